package main

import (
	"fmt"
	"testing"

	"github.com/darkroom-mcp/darkroom/generation"
)

// TestOpenAICallCap: eight OpenAI generations at once against the
// adapter's cap of four synchronous calls. All eight complete, the
// emulator never answers more than four at once, and a refusal by the
// cap is no attempt (the unit guard is generation's
// TestRunnerAtCapacitySpendsNoAttempt: before, each refusal counted and
// the twelfth failed the generation).
func TestOpenAICallCap(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := vendorServer(t, rig, "openai")
	tc := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	var ids []string
	for i := range 8 {
		ids = append(ids, generateID(t, tc, "openai-gpt-image-2", fmt.Sprintf("kite %d [run=2s]", i)))
	}
	for _, id := range ids {
		waitRow(t, s, id, "completed", func(row generation.Row) bool { return row.Status.Terminal() })
		if row := generationRow(t, s, id); row.Status != generation.StatusCompleted {
			t.Fatalf("generation %s ended %s (%s)", id, row.Status, row.StatusMessage)
		}
	}
	if n, peak := rig.Jobs("openai"), rig.PeakInFlight("openai"); n != 8 || peak != 4 {
		t.Fatalf("%d jobs at OpenAI, %d calls at once at most; want 8 and 4", n, peak)
	}
}
