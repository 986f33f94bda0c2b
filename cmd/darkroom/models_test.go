package main

// End to end: models beyond the curated catalog (provider-qualified ids,
// the operator's allow list, schemas from the provider, provider-native
// input, prices before the call), darkroom in-process against the
// provider emulator.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

func modelsServer(t *testing.T, allow string) (*emuRig, *testServer) {
	t.Helper()
	rig := startEmulator(t, defaultTiming)
	s := providerServer(t, rig, false, func(c *config) {
		c.FalAPIURL, c.FalOpenAPIURL = rig.Fal.URL, rig.Fal.URL
		a, err := modelschema.ParseAllow(allow, qualified.Names())
		if err != nil {
			t.Fatal(err)
		}
		c.ModelsAllow = a
	})
	return rig, s
}

type spentView struct {
	Spent int64 `json:"spent"`
}

func TestQualifiedModelGenerates(t *testing.T) {
	rig, s := modelsServer(t, "replicate:black-forest-labs/*,fal:fal-ai/*")
	cs := connect(t, s.url, "2026-07-28")
	for _, tt := range []struct {
		id, field string
		input     map[string]any
		credits   int64
		unit      string
	}{
		{id: "replicate:black-forest-labs/flux-schnell", input: map[string]any{"output_format": "png", "go_fast": false}, credits: 10, unit: "run"},
		{id: "fal:fal-ai/flux/schnell", input: map[string]any{"output_format": "png", "acceleration": "high"}, credits: 1, unit: "megapixel"},
	} {
		var d modelschema.Description
		res := call(t, cs, "describe_model", map[string]any{"modelId": tt.id}, &d)
		if res.IsError || d.Credits != tt.credits || d.PriceUnit != tt.unit || d.Mapping.Prompt != "prompt" || len(d.Input) == 0 {
			t.Fatalf("describe %s: %s", tt.id, text(res))
		}
		for _, f := range d.Input {
			if f.Name == "prompt" || f.Name == "seed" {
				t.Errorf("describe %s lists %s, which generate's own argument sets", tt.id, f.Name)
			}
		}
		var g genView
		res = call(t, cs, "generate", map[string]any{"modelId": tt.id, "prompt": "a lighthouse", "aspectRatio": "1:1", "input": tt.input, "wait": true, "waitSeconds": 30}, &g)
		if g.Status != "completed" || len(g.Outputs) != 1 || g.Credits != tt.credits {
			t.Fatalf("generate %s: %s", tt.id, text(res))
		}
		prov, _, _ := strings.Cut(tt.id, ":")
		inputs := rig.Inputs(prov)
		sent := inputs[len(inputs)-1]
		for k, v := range tt.input {
			if sent[k] != v {
				t.Errorf("%s: the provider got %s=%v, want %v (sent %v)", tt.id, k, sent[k], v, sent)
			}
		}
		if sent["prompt"] != "a lighthouse" || sent["seed"] == nil {
			t.Errorf("%s: darkroom's own fields not sent: %v", tt.id, sent)
		}
	}
	// A repeat with the same key and other input is a different request.
	args := map[string]any{"modelId": "fal:fal-ai/flux/schnell", "prompt": "x", "idempotencyKey": "k1", "input": map[string]any{"output_format": "png"}}
	var a, b genView
	call(t, cs, "generate", args, &a)
	args["input"] = map[string]any{"output_format": "jpeg"}
	if res := call(t, cs, "generate", args, &b); !res.IsError {
		t.Errorf("same key, other input: %s", text(res))
	}
}

func TestModelRefusalsChargeNothing(t *testing.T) {
	rig, s := modelsServer(t, "replicate:black-forest-labs/*")
	cs := connect(t, s.url, "2026-07-28")
	for _, tt := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"disallowed", map[string]any{"modelId": "replicate:stability-ai/sdxl"}, `not enabled on this server; an operator enables it by adding a pattern such as "replicate:stability-ai/*" to DARKROOM_MODELS_ALLOW`},
		{"provider not allowed", map[string]any{"modelId": "fal:fal-ai/flux/dev"}, "not enabled on this server"},
		{"unknown qualified", map[string]any{"modelId": "replicate:black-forest-labs/flux-99"}, "does not exist"},
		{"unknown curated", map[string]any{"modelId": "no-such-model"}, "does not exist"},
		{"bad input value", map[string]any{"modelId": "replicate-flux-schnell", "input": map[string]any{"output_quality": 101}}, "input.output_quality: sent 101; replicate-flux-schnell allows integer from 0 to 100"},
		{"bad enum", map[string]any{"modelId": "replicate:black-forest-labs/flux-schnell", "input": map[string]any{"megapixels": "4"}}, `allows one of "1" or "0.25"`},
		{"prompt twice", map[string]any{"modelId": "replicate:black-forest-labs/flux-schnell", "input": map[string]any{"prompt": "y"}}, "input.prompt is set by darkroom's prompt argument"},
		{"image field", map[string]any{"modelId": "replicate-flux-dev", "input": map[string]any{"image": "https://example.com/a.png"}}, "inputImage (or inputs)"},
		{"input on a vendor without schema", map[string]any{"modelId": "local-sketch", "input": map[string]any{"x": 1}}, "takes no input"},
		{"input not an object", map[string]any{"modelId": "replicate-flux-schnell", "input": []any{1}}, "must be"},
	} {
		tt.args["prompt"] = "a lighthouse"
		res := call(t, cs, "generate", tt.args, nil)
		if !res.IsError || !strings.Contains(text(res), tt.want) {
			t.Errorf("%s: %s; want an error with %q", tt.name, text(res), tt.want)
		}
		if n := rig.Jobs("replicate") + rig.Jobs("fal"); n != 0 {
			t.Fatalf("%s: %d provider jobs", tt.name, n)
		}
		var c spentView
		call(t, cs, "get_credits", map[string]any{}, &c)
		if c.Spent != 0 {
			t.Fatalf("%s: spent %d", tt.name, c.Spent)
		}
	}
	res := call(t, cs, "describe_model", map[string]any{"modelId": "replicate:stability-ai/sdxl"}, nil)
	if !res.IsError || !strings.Contains(text(res), "DARKROOM_MODELS_ALLOW") {
		t.Errorf("describe a disallowed model: %s", text(res))
	}
}

func TestSearchModels(t *testing.T) {
	_, s := modelsServer(t, "replicate:black-forest-labs/*,fal:fal-ai/*")
	cs := connect(t, s.url, "2026-07-28")
	var r modelschema.SearchResult
	res := call(t, cs, "search_models", map[string]any{"query": "flux", "limit": 3}, &r)
	if res.IsError || len(r.Models) != 3 || r.NextCursor == "" {
		t.Fatalf("search: %s", text(res))
	}
	var all []modelschema.Hit
	all = append(all, r.Models...)
	for r.NextCursor != "" {
		cur := r.NextCursor
		r = modelschema.SearchResult{}
		call(t, cs, "search_models", map[string]any{"query": "flux", "limit": 3, "cursor": cur}, &r)
		all = append(all, r.Models...)
	}
	ids := map[string]string{}
	for _, h := range all {
		ids[h.ID] = h.Source
	}
	for id, src := range map[string]string{
		"replicate-flux-schnell": "curated", "fal-flux-dev": "curated",
		"replicate:black-forest-labs/flux-schnell": "replicate", "fal:fal-ai/flux/schnell": "fal",
	} {
		if ids[id] != src {
			t.Errorf("search flux: %s from %q, want %q (got %v)", id, ids[id], src, ids)
		}
	}
	if _, ok := ids["replicate:acme/clip-maker"]; ok {
		t.Error("search lists a model the allow list does not allow")
	}
	var v modelschema.SearchResult
	call(t, cs, "search_models", map[string]any{"query": "", "kind": "video"}, &v)
	for _, h := range v.Models {
		if h.Kind != "video" {
			t.Errorf("kind video: %+v", h)
		}
	}
	if res := call(t, cs, "search_models", map[string]any{"query": "flux", "cursor": "bogus"}, nil); !res.IsError {
		t.Errorf("bogus cursor: %s", text(res))
	}
	if res := call(t, cs, "search_models", map[string]any{"query": "flux", "limit": 51}, nil); !res.IsError {
		t.Errorf("limit 51: %s", text(res))
	}
}

func TestDescribeCuratedModel(t *testing.T) {
	_, s := modelsServer(t, "")
	cs := connect(t, s.url, "2026-07-28")
	var d modelschema.Description
	res := call(t, cs, "describe_model", map[string]any{"modelId": "fal-kling-1.6"}, &d)
	if res.IsError || !d.Curated || d.Mapping.DurationSeconds != "duration" || d.PriceUnit != "run" || d.Input == nil {
		t.Fatalf("describe fal-kling-1.6: %s", text(res))
	}
	b, _ := json.Marshal(d.Input)
	if !strings.Contains(string(b), `"cfg_scale"`) {
		t.Errorf("input fields: %s", b)
	}
	res = call(t, cs, "describe_model", map[string]any{"modelId": "local-sketch"}, &d)
	if res.IsError || d.Input != nil || d.Provider != "local" {
		t.Fatalf("describe local-sketch: %s", text(res))
	}
	_ = emulator.ReplicateVersion
}

// TestQualifiedModelAfterRestart: a generation of a qualified model
// created by one process is finished by the next, on the same data
// directory, with the provider's metadata down: the model comes from the
// stored schema, not a fetch.
func TestQualifiedModelAfterRestart(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	dir := t.TempDir()
	opts := func(c *config) {
		c.DataDir, c.DatabaseURL = dir, "" // one SQLite file for both processes
		c.FalAPIURL, c.FalOpenAPIURL = rig.Fal.URL, rig.Fal.URL
		c.ModelsAllow, _ = modelschema.ParseAllow("fal:fal-ai/*", qualified.Names())
	}
	var id string
	t.Run("first process", func(t *testing.T) {
		// It polls, so that it can be stopped between looks; a process
		// stopped while it holds fal's stream is TestSignalKillNine's.
		s := providerServer(t, rig, false, opts, pollOnly(true))
		cs := connect(t, s.url, "2026-07-28")
		var g genView
		res := call(t, cs, "generate", map[string]any{"modelId": "fal:fal-ai/flux/schnell", "prompt": "a lighthouse", "input": map[string]any{"output_format": "png"}}, &g)
		if res.IsError || g.GenerationID == "" {
			t.Fatalf("generate: %s", text(res))
		}
		id = g.GenerationID
		// Stopped between steps: a stop in the middle of a step leaves
		// a lease the next process waits out.
		waitIdle(t, s, id)
	})
	rig.SetModelsDown(true)
	fetches := rig.ModelFetches()
	s := providerServer(t, rig, false, opts)
	cs := connect(t, s.url, "2026-07-28")
	var w genView
	res := call(t, cs, "wait_generation", map[string]any{"generationId": id, "timeoutSeconds": 30}, &w)
	if w.Status != "completed" || len(w.Outputs) != 1 {
		t.Fatalf("after the restart: %s", text(res))
	}
	if n := rig.ModelFetches(); n != fetches {
		t.Errorf("the second process fetched the schema %d times; the stored copy serves", n-fetches)
	}
	inputs := rig.Inputs("fal")
	if len(inputs) != 1 || inputs[0]["output_format"] != "png" {
		t.Errorf("fal got %v", inputs)
	}
}

// TestUnconfiguredProviderNamesItsKey: with no vendor keys set, a curated
// model of each provider is refused by generate (also as a dry run) and
// describe_model with the key the server needs, not as a model that does
// not exist; an id no catalog holds still does not exist.
func TestUnconfiguredProviderNamesItsKey(t *testing.T) {
	s := startServer(t, 0)
	cs := connect(t, s.url, "2026-07-28")
	keys := map[string]string{"replicate": "REPLICATE_API_TOKEN", "fal": "FAL_KEY", "google": "GEMINI_API_KEY", "openai": "OPENAI_API_KEY"}
	first := map[string]string{} // provider → its first curated model
	for _, e := range catalog.Default() {
		if _, ok := first[e.Provider]; !ok && !e.Disabled {
			first[e.Provider] = e.ID
		}
	}
	if len(first) != len(keys) {
		t.Fatalf("curated providers %v, want one model of each of %v", first, keys)
	}
	for prov, id := range first {
		want := fmt.Sprintf("modelId %q is not available on this server: it needs %s on the server", id, keys[prov])
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"generate", map[string]any{"modelId": id, "prompt": "a lighthouse"}},
			{"generate", map[string]any{"modelId": id, "prompt": "a lighthouse", "dryRun": true}},
			{"describe_model", map[string]any{"modelId": id}},
		} {
			if res := call(t, cs, c.tool, c.args, nil); !res.IsError || !strings.Contains(text(res), want) {
				t.Errorf("%s %v: %s; want %q", c.tool, c.args, text(res), want)
			}
		}
	}
	if res := call(t, cs, "generate", map[string]any{"modelId": "no-such-model", "prompt": "x"}, nil); !res.IsError || !strings.Contains(text(res), "does not exist") {
		t.Errorf("unknown id: %s", text(res))
	}
}

// TestModelsFileProviderRules: a models file entry whose provider no
// adapter answers to is refused at start, configured or not, naming the
// providers darkroom runs; one its adapter cannot run is refused by that
// adapter when it is built.
func TestModelsFileProviderRules(t *testing.T) {
	for _, c := range []struct{ entry, want string }{
		{`{"modelId":"x","provider":"acme","kind":"image","endpoint":"a/b","input":{"prompt":"p"},"expectedSeconds":1}`, `provider "acme" is not one darkroom runs (fal, google, openai, replicate)`},
		{`{"modelId":"x","provider":"replicate","kind":"image","endpoint":"a/b/c","input":{"prompt":"p"},"expectedSeconds":1}`, `replicate endpoint "a/b/c" is not owner/name`},
	} {
		f := filepath.Join(t.TempDir(), "models.json")
		if err := os.WriteFile(f, []byte(`{"models":[`+c.entry+`]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := &config{ModelsFile: f, ReplicateToken: "r8_test"}
		_, err := remoteProviders(context.Background(), cfg, slog.New(slog.DiscardHandler), provider.DirSpool(t.TempDir()))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.entry, err, c.want)
		}
	}
}
