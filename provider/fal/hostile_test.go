package fal_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestHostileMetadata: fal endpoints with 300 KB titles and descriptions
// (every search_models page was 28–30 MB) are kept clipped, in Describe
// and in search hits.
func TestHostileMetadata(t *testing.T) {
	em := emulator.New(emulator.Options{})
	t.Cleanup(em.Close)
	p, err := fal.New(fal.Config{Key: "fal_test", QueueURL: em.Fal.URL, APIURL: em.Fal.URL, OpenAPIURL: em.Fal.URL, RequestsPerMinute: -1})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "models", "fal", "fal-ai__flux__dev.json"))
	if err != nil || json.Unmarshal(b, &doc) != nil {
		t.Fatalf("fixture: %v", err)
	}
	long := strings.Repeat("the best model ", 300<<10/15)
	for i := range 20 {
		d := map[string]any{}
		for k, v := range doc {
			d[k] = v
		}
		d["info"] = map[string]any{"title": long, "description": long, "version": "1",
			"x-fal-metadata": map[string]any{"endpointId": "acme/best", "category": "text-to-image", "display_name": long}}
		em.PublishFal("acme/best-"+string(rune('a'+i)), d)
	}
	ctx := context.Background()
	info, err := p.Describe(ctx, modelschema.Ref{Provider: "fal", Path: "acme/best-a"})
	if err != nil {
		t.Fatal(err)
	}
	page, err := p.Search(ctx, "best", 50, "")
	if err != nil {
		t.Fatal(err)
	}
	hits, _ := json.Marshal(page)
	t.Logf("%d KB titles and descriptions: Describe keeps %d + %d bytes; a search page of %d hits is %d bytes", len(long)>>10, len(info.Title), len(info.Description), len(page.Hits), len(hits))
	if len(info.Title) > clip.MaxTitle || len(info.Description) > clip.MaxDescription {
		t.Fatalf("Describe kept %d and %d bytes", len(info.Title), len(info.Description))
	}
	if len(page.Hits) != 20 {
		t.Fatalf("%d hits, want the 20 published", len(page.Hits))
	}
	for _, h := range page.Hits {
		if len(h.Title) > clip.MaxTitle || len(h.Description) > clip.MaxDescription {
			t.Fatalf("hit %s kept %d and %d bytes", h.ID, len(h.Title), len(h.Description))
		}
	}
}
