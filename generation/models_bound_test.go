package generation

import (
	"fmt"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
)

// TestResolvedModelsBounded: the qualified models remembered stay within
// maxResolved however many ids callers name (it was a sync.Map that grew
// with every one).
func TestResolvedModelsBounded(t *testing.T) {
	var r resolvedModels
	for i := range 3 * maxResolved {
		r.store(provider.Model{ID: fmt.Sprintf("replicate:o/m%d", i)})
		if len(r.m) > maxResolved {
			t.Fatalf("%d remembered after %d stores", len(r.m), i+1)
		}
	}
	last := fmt.Sprintf("replicate:o/m%d", 3*maxResolved-1)
	if _, ok := r.load(last); !ok {
		t.Fatal("the latest resolution is not remembered")
	}
	r.store(provider.Model{ID: last, Title: "again"}) // storing a known id keeps the rest
	if m, _ := r.load(last); m.Title != "again" || len(r.m) == 1 {
		t.Fatalf("%+v, %d remembered", m, len(r.m))
	}
}
