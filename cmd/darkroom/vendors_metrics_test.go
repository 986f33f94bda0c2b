package main

import (
	"strings"
	"testing"
)

// TestVendorMetrics: each vendor's calls are counted under its own
// provider label (a video interaction: submit, open_output, its status
// read by a watch; a synchronous image: submit, open_output).
func TestVendorMetrics(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := vendorServer(t, rig, "google", func(c *config) { c.OpenAIKey, c.OpenAIBaseURL = "sk-test", rig.OpenAI.URL })
	cs := connect(t, s.url, "2026-07-28")
	for _, m := range []string{"google-omni-1.1-flash", "google-gemini-3.1-flash-image", "openai-gpt-image-1"} {
		var w genView
		call(t, cs, "generate", map[string]any{"modelId": m, "prompt": "counted", "wait": true, "waitSeconds": 30}, &w)
		if w.Status != "completed" {
			t.Fatalf("%s: %+v", m, w)
		}
	}
	want := []series{
		{"darkroom_provider_calls_total", l("provider", "google", "operation", "submit", "outcome", "ok"), 2},
		{"darkroom_provider_calls_total", l("provider", "google", "operation", "open_output", "outcome", "ok"), 2},
		{"darkroom_provider_calls_total", l("provider", "openai", "operation", "submit", "outcome", "ok"), 1},
		{"darkroom_provider_calls_total", l("provider", "openai", "operation", "open_output", "outcome", "ok"), 1},
		{"darkroom_generations_finished_total", l("provider", "google", "status", "completed"), 2},
		{"darkroom_generations_finished_total", l("provider", "openai", "status", "completed"), 1},
	}
	fams := scrapeSettled(t, s.app.metricsHandler(), want)
	checkSeries(t, fams, want)
	// The image's look; the interaction is watched (its stream and the
	// get that closes it are the adapter's Watch, not status calls).
	if v := value(fams, "darkroom_provider_calls_total", l("provider", "google", "operation", "status")); v < 1 {
		t.Errorf("google status calls %v, want at least one", v)
	}
}

// TestVendorOutputFetchPolicy: a Gemini video uri outside the allowed hosts
// (or on a private address) is never fetched: the generation fails with
// the reason, refunded.
func TestVendorOutputFetchPolicy(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := vendorServer(t, rig, "google", func(c *config) { c.UnsafeOutputFetch, c.OutputHosts = false, nil })
	cs := connect(t, s.url, "2026-07-28")
	var w genView
	call(t, cs, "generate", map[string]any{"modelId": "google-omni-1.1-flash", "prompt": "kept out", "wait": true, "waitSeconds": 30}, &w)
	if w.Status != "failed" || w.Error == nil || !strings.Contains(w.Error.Message, "will not fetch") {
		t.Fatalf("a private-address video was not refused: %+v", w)
	}
	if row := generationRow(t, s, w.GenerationID); row.Charged != 0 {
		t.Fatalf("charged %d for a refused download", row.Charged)
	}
}
