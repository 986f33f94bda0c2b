package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
)

// testModelSchemas: a fetched schema is kept with its age, read back
// byte for byte, replaced by a later fetch and never by an older one; an
// id never stored is provider.ErrNotFound.
func testModelSchemas(t *testing.T, e Engine) {
	if e.Schemas == nil {
		t.Skip("the engine has no model schema store")
	}
	ctx := context.Background()
	s := e.Schemas
	const id = "fal:fal-ai/flux/dev"
	if _, err := s.ModelSchema(ctx, id); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("unknown id: %v; want ErrNotFound", err)
	}
	doc := []byte(`{"format":"fal","doc":{"openapi":"3.0.4"}}`)
	for _, st := range []modelschema.Stored{
		{ModelID: id, Info: doc, FetchedAt: at(1000)},
		{ModelID: id, Info: []byte(`{"older":true}`), FetchedAt: at(500)}, // a slow refresh racing a newer one
	} {
		if err := s.PutModelSchema(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ModelSchema(ctx, id)
	if err != nil || !bytes.Equal(got.Info, doc) || !got.FetchedAt.Equal(at(1000)) || got.ModelID != id {
		t.Fatalf("read back %q at %v (%v); want the newer fetch", got.Info, got.FetchedAt, err)
	}
	newer := []byte(`{"format":"fal","doc":{"openapi":"3.1.0"}}`)
	if err := s.PutModelSchema(ctx, modelschema.Stored{ModelID: id, Info: newer, FetchedAt: at(2000)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ModelSchema(ctx, id); !bytes.Equal(got.Info, newer) || !got.FetchedAt.Equal(at(2000)) {
		t.Fatalf("after a refresh: %q at %v", got.Info, got.FetchedAt)
	}
	if _, err := s.ModelSchema(ctx, "replicate:other/model"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("another id: %v", err)
	}
}
