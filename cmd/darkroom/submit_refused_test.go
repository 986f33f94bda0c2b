package main

import (
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestSubmitRefusedRefunded: a vendor that refuses a submit for good
// (Replicate's 422 "Input validation failed") made no job and bills
// nothing, so the generation ends failed with the vendor's reason and
// its credits refunded, though Replicate bills the predictions that fail.
func TestSubmitRefusedRefunded(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := providerServer(t, rig, false)
	cs := connect(t, s.url, "2026-07-28")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "replicate-flux-schnell", "prompt": "a lighthouse [invalid]"}, &g)
	var w genView
	res := call(t, cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 10}, &w)
	if w.Status != "failed" || w.Error == nil || w.Error.Kind != "provider" {
		t.Fatalf("ended %s: %s", w.Status, text(res))
	}
	if row := generationRow(t, s, g.GenerationID); row.Charged != 0 || !strings.Contains(row.StatusMessage, "refunded") {
		t.Fatalf("a refused submit charged %d of %d: %q", row.Charged, row.Credits, row.StatusMessage)
	}
	if n := rig.Jobs("replicate"); n != 0 {
		t.Fatalf("the vendor made %d jobs", n)
	}
	if n := rig.Count("replicate", emulator.OpCreate); n != 1 {
		t.Fatalf("%d creates, want 1: a refusal is not retried", n)
	}
}
