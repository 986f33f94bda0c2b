package main

// End to end: a model's author is hostile (anyone can publish a model on
// Replicate or fal, and an allow pattern such as "replicate:*" lets it
// in). The emulator serves the author's schema through the real wire.

import (
	"strings"
	"testing"
)

func TestHostileSchemaStopsNothing(t *testing.T) {
	rig, s := modelsServer(t, "replicate:evil/*,fal:evil/*")
	cs := connect(t, s.url, "2026-07-28")
	ref := func(n string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + n} }
	input := func(props map[string]any) map[string]any {
		props["prompt"] = map[string]any{"type": "string"}
		return map[string]any{"type": "object", "properties": props}
	}
	// A → B → A through allOf and anyOf: validating against it recursed
	// until the process died of a stack overflow.
	loop := map[string]any{"components": map[string]any{"schemas": map[string]any{
		"Input": input(map[string]any{"x": ref("A")}),
		"A":     map[string]any{"allOf": []any{ref("B")}},
		"B":     map[string]any{"anyOf": []any{ref("A"), map[string]any{"type": "null"}}},
	}}}
	rig.PublishReplicate("evil/loop", "image", "a loop", loop)
	loopFal := map[string]any{"components": loop["components"], "paths": map[string]any{"/evil/loop": map[string]any{"post": map[string]any{
		"requestBody": map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": ref("Input")}}}}}}}
	rig.PublishFal("evil/loop", loopFal)
	// A pattern legal in size, against a long string that matches.
	rig.PublishReplicate("evil/pattern", "image", "a pattern", map[string]any{"components": map[string]any{"schemas": map[string]any{
		"Input": input(map[string]any{"s": map[string]any{"type": "string", "pattern": "[a-z]{1,600}0"}}),
	}}})

	for _, tt := range []struct {
		name, tool string
		args       map[string]any
		want       string
	}{
		{"describe a loop (Replicate)", "describe_model", map[string]any{"modelId": "replicate:evil/loop"}, "$ref cycle A → B → A"},
		{"describe a loop (fal)", "describe_model", map[string]any{"modelId": "fal:evil/loop"}, "$ref cycle A → B → A"},
		{"dry run on a loop", "generate", map[string]any{"modelId": "replicate:evil/loop", "prompt": "p", "dryRun": true, "input": map[string]any{"x": 1}}, "$ref cycle"},
		{"generate on a loop", "generate", map[string]any{"modelId": "fal:evil/loop", "prompt": "p", "input": map[string]any{"x": 1}}, "$ref cycle"},
		{"a costly match", "generate", map[string]any{"modelId": "replicate:evil/pattern", "prompt": "p", "input": map[string]any{"s": strings.Repeat("a", 60_000) + "0"}}, "too costly to check"},
	} {
		res := call(t, cs, tt.tool, tt.args, nil)
		if !res.IsError || !strings.Contains(text(res), tt.want) {
			t.Errorf("%s: %s; want an error with %q", tt.name, text(res), tt.want)
		}
	}
	if n := rig.Jobs("replicate") + rig.Jobs("fal"); n != 0 {
		t.Errorf("%d provider jobs", n)
	}
	var c spentView
	call(t, cs, "get_credits", map[string]any{}, &c)
	if c.Spent != 0 {
		t.Errorf("spent %d", c.Spent)
	}
	// The server still serves everyone, the same model's fair use too.
	var g genView
	res := call(t, cs, "generate", map[string]any{"modelId": "replicate:evil/pattern", "prompt": "p", "input": map[string]any{"s": "abc0"}, "dryRun": true}, &g)
	if res.IsError {
		t.Errorf("a fair input: %s", text(res))
	}
}

// TestHostilePriceRefused: a fal author publishes a price no credit
// count holds (it wrapped credits negative at count 2, the dry run
// allowed it and the create panicked). The model is refused with the
// reason, for free, and the server keeps serving.
func TestHostilePriceRefused(t *testing.T) {
	rig, s := modelsServer(t, "fal:evil/*")
	cs := connect(t, s.url, "2026-07-28")
	doc := map[string]any{
		"components": map[string]any{"schemas": map[string]any{"Input": map[string]any{"type": "object", "properties": map[string]any{
			"prompt": map[string]any{"type": "string"}, "num_images": map[string]any{"type": "integer", "minimum": 1, "maximum": 4}}}}},
		"paths": map[string]any{"/evil/pricey": map[string]any{"post": map[string]any{"requestBody": map[string]any{"content": map[string]any{
			"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Input"}}}}}}},
	}
	for _, price := range []string{"50000000000000000", "1e400", "-0.05"} {
		rig.PublishFal("evil/pricey", doc)
		rig.PublishFalPrice("evil/pricey", price, "image")
		for _, tt := range []struct {
			tool string
			args map[string]any
		}{
			{"describe_model", map[string]any{"modelId": "fal:evil/pricey"}},
			{"generate", map[string]any{"modelId": "fal:evil/pricey", "prompt": "p", "count": 2, "dryRun": true}},
			{"generate", map[string]any{"modelId": "fal:evil/pricey", "prompt": "p", "count": 2}},
		} {
			res := call(t, cs, tt.tool, tt.args, nil)
			if !res.IsError || !strings.Contains(text(res), "published price") {
				t.Errorf("price %s, %s: %s; want its price refused", price, tt.tool, text(res))
			}
		}
	}
	if n := rig.Jobs("fal"); n != 0 {
		t.Errorf("%d provider jobs", n)
	}
	var c spentView
	call(t, cs, "get_credits", map[string]any{}, &c)
	if c.Spent != 0 {
		t.Errorf("spent %d", c.Spent)
	}
}
