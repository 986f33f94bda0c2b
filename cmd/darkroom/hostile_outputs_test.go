package main

// End to end: a provider that returns more than it was asked for (the
// emulator's [many:N], [zeros:N] prompt tokens on the real wire). A
// generation keeps what it was charged for, never more, and an output
// that is not an image is neither kept nor charged.

import (
	"testing"
)

func TestProviderReturnsMoreThanCharged(t *testing.T) {
	_, s := modelsServer(t, "fal:fal-ai/*")
	cs := connect(t, s.url, "2026-07-28")
	for _, tt := range []struct {
		name, model, prompt string
		count               int
		wantOutputs         int
		wantStatus          string
	}{
		{"Replicate: 60 files for 1", "replicate-flux-schnell", "a cat [many:60]", 1, 1, "completed"},
		{"Replicate: 60 files for 2", "replicate-flux-schnell", "a dog [many:60]", 2, 2, "completed"},
		{"fal: 60 files for 1", "fal:fal-ai/flux/schnell", "a cow [many:60]", 1, 1, "completed"},
		{"Replicate: 1 MB of zeros", "replicate-flux-schnell", "an owl [zeros:1000000]", 1, 0, "failed"},
		{"fal: 1 MB of zeros", "fal:fal-ai/flux/schnell", "a hen [zeros:1000000]", 1, 0, "failed"},
	} {
		var before, after spentView
		call(t, cs, "get_credits", map[string]any{}, &before)
		var g genView
		res := call(t, cs, "generate", map[string]any{"modelId": tt.model, "prompt": tt.prompt, "count": tt.count, "wait": true, "waitSeconds": 50}, &g)
		if g.Status != tt.wantStatus || len(g.Outputs) != tt.wantOutputs {
			t.Errorf("%s: %s %d outputs, want %s %d: %s", tt.name, g.Status, len(g.Outputs), tt.wantStatus, tt.wantOutputs, text(res))
		}
		call(t, cs, "get_credits", map[string]any{}, &after)
		if tt.wantStatus == "failed" && after.Spent != before.Spent {
			t.Errorf("%s: charged %d for nothing kept", tt.name, after.Spent-before.Spent)
		}
		if tt.wantStatus == "completed" && after.Spent-before.Spent != g.Credits {
			t.Errorf("%s: charged %d, the generation says %d", tt.name, after.Spent-before.Spent, g.Credits)
		}
	}
}
