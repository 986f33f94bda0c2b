package main

import (
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestProviderFalAppFailure: a fal request fails inside its app, so fal
// says COMPLETED and its response_url answers 500, marked as fal's request
// error (vendors-2026-12.md item 10). fal bills no 5xx, so the generation
// ends failed with fal's message and refunded, from the first read of the
// result: not retried until darkroom gives up with an internal error.
func TestProviderFalAppFailure(t *testing.T) {
	for _, webhooks := range []bool{false, true} {
		t.Run(map[bool]string{false: "polling", true: "webhooks"}[webhooks], func(t *testing.T) {
			t.Parallel()
			rig := startEmulator(t, defaultTiming)
			s := providerServer(t, rig, webhooks)
			cs := connect(t, s.url, "2026-07-28")
			var g genView
			call(t, cs, "generate", map[string]any{"modelId": "fal-flux-schnell", "prompt": "a lighthouse [app-error]"}, &g)
			var w genView
			res := call(t, cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 10}, &w)
			row := generationRow(t, s, g.GenerationID)
			if w.Status != "failed" || w.Error == nil || w.Error.Kind != "provider" ||
				!strings.Contains(w.Error.Message, "the request failed at fal (500 runner_server_error): Internal Server Error") {
				t.Fatalf("ended %s: %s", w.Status, text(res))
			}
			if row.Charged != 0 || !strings.Contains(row.StatusMessage, "refunded") {
				t.Fatalf("charged %d of %d: %q", row.Charged, row.Credits, row.StatusMessage)
			}
			if n := rig.Count("fal", emulator.OpResult); n != 1 {
				t.Fatalf("%d reads of the result, want 1", n)
			}
		})
	}
}
