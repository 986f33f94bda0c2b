package replicate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestHostileMetadata: a model author's 12 MB description (every
// describe_model reply was 22–24 MB) is kept clipped, in Describe and in
// search hits, and a hit whose name is no model name is left out.
func TestHostileMetadata(t *testing.T) {
	em, p := setup(t, emulator.Options{}, nil)
	huge := strings.Repeat("a model for everything ", 12<<20/23)
	schema := map[string]any{"openapi": "3.0.2", "components": map[string]any{"schemas": map[string]any{
		"Input": map[string]any{"type": "object", "properties": map[string]any{"prompt": map[string]any{"type": "string"}}}}}}
	em.PublishReplicate("acme/everything", "image", huge, schema)
	em.PublishReplicate("acme/"+strings.Repeat("n", 300<<10), "image", "a name of 300 KB", schema)
	ctx := context.Background()

	info, err := p.Describe(ctx, modelschema.Ref{Provider: "replicate", Path: "acme/everything"})
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := json.Marshal(modelschema.Info{Title: info.Title, Description: info.Description})
	page, err := p.Search(ctx, "", 50, "")
	if err != nil {
		t.Fatal(err)
	}
	hits, _ := json.Marshal(page)
	t.Logf("a %d MB description: Describe keeps %d bytes of title and description; a search page of %d hits is %d bytes",
		len(huge)>>20, len(kept), len(page.Hits), len(hits))
	if len(info.Description) > clip.MaxDescription {
		t.Fatalf("Describe kept a %d-byte description", len(info.Description))
	}
	found := false
	for _, h := range page.Hits {
		if len(h.ID) > 300 || len(h.Title) > clip.MaxTitle || len(h.Description) > clip.MaxDescription {
			t.Fatalf("hit %.40q… kept %d, %d, %d bytes of id, title, description", h.ID, len(h.ID), len(h.Title), len(h.Description))
		}
		found = found || h.ID == "replicate:acme/everything"
	}
	if !found {
		t.Fatalf("the model is not among the hits: %d", len(page.Hits))
	}
}
