package modelschema_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestQualifiedOfficialModel: a qualified id of an official Replicate
// model is run through its model endpoint (Replicate refuses a version of
// it with 422, and the emulator does too); any other model by version.
func TestQualifiedOfficialModel(t *testing.T) {
	f := newFixture(t)
	f.em.PublishOfficialReplicate("acme/official", "image", "an official model published now", map[string]any{
		"components": map[string]any{"schemas": map[string]any{"Input": map[string]any{"type": "object",
			"properties": map[string]any{"prompt": map[string]any{"type": "string"}}}}}})
	r := f.registry(t, "replicate:*", "replicate")
	f.rep.SetResolve(func(ctx context.Context, id string) (catalog.Entry, error) {
		m, err := r.Resolve(ctx, id)
		if err != nil {
			return catalog.Entry{}, err
		}
		return m.Entry, nil
	})
	clip := emulator.ReplicateVersion("acme/clip-maker")
	ctx := context.Background()
	for _, tt := range []struct {
		id, version string // version: what the prediction reports
	}{
		{"replicate:black-forest-labs/flux-schnell", "hidden"},
		{"replicate:acme/official", "hidden"},
		{"replicate:acme/clip-maker", clip},
		{"replicate:acme/clip-maker:" + clip, clip},
	} {
		t.Run(tt.id, func(t *testing.T) {
			m, err := r.Resolve(ctx, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			job, err := f.rep.Submit(ctx, provider.Request{IdempotencyKey: "k-" + tt.id, Model: m.Model(), Prompt: "a lighthouse"})
			if err != nil {
				t.Fatalf("submit (entry version %q): %v", m.Entry.Version, err)
			}
			req, _ := http.NewRequest(http.MethodGet, f.em.Replicate.URL+"/v1/predictions/"+job.ID, nil)
			req.Header.Set("Authorization", "Bearer r8_test")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var pr struct{ Model, Version string }
			if err := json.NewDecoder(resp.Body).Decode(&pr); err != nil || pr.Version != tt.version {
				t.Fatalf("prediction %+v (%v); want version %q", pr, err, tt.version)
			}
		})
	}
}

// TestStoredBeforeIsOfficial: a Replicate document stored before darkroom
// read is_official is fetched again on first use, so an official model
// leaves its version; with Replicate down the stored copy serves as it did.
func TestStoredBeforeIsOfficial(t *testing.T) {
	const id = "replicate:black-forest-labs/flux-schnell"
	for _, tt := range []struct {
		name    string
		down    bool
		version string // the entry's
	}{
		{"replicate answers", false, ""},
		{"replicate down", true, "black-forest-labs/flux-schnell:" + emulator.ReplicateVersion("black-forest-labs/flux-schnell")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			ref, _ := known.ParseID(id)
			info, err := f.rep.Describe(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			info.Official = nil // as stored before
			b, _ := json.Marshal(info)
			f.store.m[id] = modelschema.Stored{ModelID: id, Info: b, FetchedAt: f.now}
			f.em.SetModelsDown(tt.down)
			fetches := f.em.ModelFetches()

			m, err := f.registry(t, "replicate:*", "replicate").Resolve(ctx, id)
			if err != nil || m.Entry.Version != tt.version {
				t.Fatalf("%v, entry version %q; want %q", err, m.Entry.Version, tt.version)
			}
			if n := f.em.ModelFetches() - fetches; n != 1 {
				t.Errorf("%d fetches; want one", n)
			}
			var stored modelschema.Info
			json.Unmarshal(f.store.m[id].Info, &stored)
			if (stored.Official != nil) == tt.down {
				t.Errorf("stored official %v", stored.Official)
			}
		})
	}
}
