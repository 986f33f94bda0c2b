package main

import (
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestVendorProviderDown: with the vendor answering 5xx to everything,
// /readyz names it unreachable (and stays 200: the vendor is not this
// replica's fault), a generation waits and retries; back up, it
// completes, one vendor job, charged once.
func TestVendorProviderDown(t *testing.T) {
	cases := []struct{ vendor, model string }{
		{"google", "google-gemini-3.1-flash-image"},
		{"google", "google-omni-1.1-flash"},
		{"openai", "openai-gpt-image-1"},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			t.Parallel()
			rig := startEmulator(t, defaultTiming)
			for _, op := range []emulator.Op{emulator.OpCreate, emulator.OpStatus} {
				rig.Inject(emulator.Rule{Provider: c.vendor, Op: op, Fault: emulator.Fault500})
			}
			s := vendorServer(t, rig, c.vendor)
			code, checks := readyz(t, s.url)
			if code != 200 || checks["provider:"+c.vendor] != "unreachable" || checks["store"] != "ok" {
				t.Fatalf("readyz with %s down: %d %v", c.vendor, code, checks)
			}
			cs := connect(t, s.url, "2026-07-28")
			var g genView
			if res := call(t, cs, "generate", map[string]any{"modelId": c.model, "prompt": "through an outage"}, &g); res.IsError {
				t.Fatalf("generate: %s", text(res))
			}
			eventually(t, 20*time.Second, func() bool { return rig.Count(c.vendor, emulator.OpCreate) >= 2 }, "two refused submits")
			rig.ClearFaults()
			var w genView
			call(t, cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 30}, &w)
			if w.Status != "completed" {
				t.Fatalf("after the outage: %+v", w)
			}
			row := generationRow(t, s, g.GenerationID)
			if n := rig.Jobs(c.vendor); n != 1 || row.Charged != row.Credits {
				t.Fatalf("%d vendor jobs, charged %d of %d", n, row.Charged, row.Credits)
			}
		})
	}
}

// TestVendorCancelDuringCall: a cancel asked while a synchronous OpenAI
// call is in flight cannot stop it (the API has no cancel); the image it
// made is delivered (and charged), and exactly one call was made.
func TestVendorCancelDuringCall(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	rig.Inject(emulator.Rule{Provider: "openai", Op: emulator.OpCreate, Fault: emulator.FaultSlow, Times: 1})
	s := vendorServer(t, rig, "openai")
	cs := connect(t, s.url, "2026-07-28")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "openai-gpt-image-1", "prompt": "held"}, &g)
	<-rig.SlowHits()
	var cg genView
	call(t, cs, "cancel_generation", map[string]any{"generationId": g.GenerationID}, &cg)
	rig.Release()
	var w genView
	call(t, cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 30}, &w)
	if w.Status != "completed" || len(w.Outputs) != 1 {
		t.Fatalf("cancel during the call: %+v", w)
	}
	if row := generationRow(t, s, g.GenerationID); row.Charged != row.Credits {
		t.Fatalf("a delivered image charged %d of %d", row.Charged, row.Credits)
	}
	if n := rig.Count("openai", emulator.OpCreate); n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
}
