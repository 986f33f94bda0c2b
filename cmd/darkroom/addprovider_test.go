package main

import (
	"bytes"
	"context"
	"image/png"
	"slices"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/testdata/fakeprovider"
)

// addAdapter adds a row to adapters for the test's duration (not
// parallel: the table is the process's).
func addAdapter(t *testing.T, a adapter) {
	before := adapters
	adapters = append(slices.Clone(adapters), a)
	t.Cleanup(func() { adapters = before })
}

// TestAddProviderFromTestPackage: ARCHITECTURE's "How to add a provider"
// holds for a provider defined outside darkroom's adapters
// (testdata/fakeprovider, which passes the provider contract: see
// provider/providertest's TestFake): one row of adapters, and it serves
// generate: its model is listed and described, generated, charged, and
// its output read back as the image the vendor made.
func TestAddProviderFromTestPackage(t *testing.T) {
	vendor := fakeprovider.NewVendor(time.Now())
	addAdapter(t, adapter{name: fakeprovider.Name, on: func(*config) bool { return true },
		build: func(context.Context, adapterEnv) (provider.Provider, error) { return fakeprovider.New(vendor), nil }})

	s := startServer(t, 0)
	cs := connect(t, s.url, "2026-07-28")
	var l struct {
		Models []struct {
			ID string `json:"modelId"`
		} `json:"models"`
	}
	call(t, cs, "list_models", map[string]any{}, &l)
	if !slices.ContainsFunc(l.Models, func(m struct {
		ID string `json:"modelId"`
	}) bool {
		return m.ID == fakeprovider.Model.ID
	}) {
		t.Fatalf("list_models lacks %s: %v", fakeprovider.Model.ID, l.Models)
	}
	if res := call(t, cs, "describe_model", map[string]any{"modelId": fakeprovider.Model.ID}, nil); res.IsError {
		t.Fatalf("describe_model: %s", text(res))
	}
	var g genView
	if res := call(t, cs, "generate", map[string]any{"modelId": fakeprovider.Model.ID, "prompt": "a kite"}, &g); res.IsError {
		t.Fatalf("generate: %s", text(res))
	}
	eventually(t, 10*time.Second, func() bool { return vendor.Jobs() == 1 }, "the job at the fake vendor")
	vendor.Advance(3 * time.Second) // the fake vendor's job is done
	var w genView
	if res := call(t, cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 30}, &w); res.IsError || w.Status != "completed" || len(w.Outputs) != 1 {
		t.Fatalf("wait: %s", text(res))
	}
	if w.Credits != fakeprovider.Model.Credits || vendor.Jobs() != 1 {
		t.Fatalf("charged %d credits (want %d), %d vendor jobs", w.Credits, fakeprovider.Model.Credits, vendor.Jobs())
	}
	_, body := httpGet(t, w.Outputs[0].URL)
	if _, err := png.Decode(bytes.NewReader(body)); err != nil {
		t.Fatalf("the output is not the vendor's PNG: %v (%d bytes)", err, len(body))
	}
}
