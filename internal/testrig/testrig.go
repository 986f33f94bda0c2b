// Package testrig builds a generation service on real parts for the tests
// of the packages above generation: the embedded engine in a temporary
// folder, the local provider at latency 0 and a blob folder. (generation's
// own tests cannot use it: the engine imports generation.)
package testrig

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
	"github.com/darkroom-mcp/darkroom/storage/sqlite"
)

// Rig holds the parts; they are closed when the test ends.
type Rig struct {
	Dir   string
	DB    *sqlite.DB
	Blobs *blob.Local
	Local *local.Provider
}

// New opens the parts in a fresh temporary folder.
func New(t testing.TB) *Rig {
	t.Helper()
	r := &Rig{Dir: t.TempDir()}
	var err error
	if r.DB, err = sqlite.Open(context.Background(), filepath.Join(r.Dir, "darkroom.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.DB.Close() })
	if r.Local, err = local.New(local.Options{Dir: r.Dir, Scale: 0}); err != nil {
		t.Fatal(err)
	}
	if r.Blobs, err = blob.NewLocal(filepath.Join(r.Dir, "files"), bytes.Repeat([]byte{7}, 32), "http://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	return r
}

// Service builds a service over the rig; cfg's Store, Blobs and Providers
// default to the rig's.
func (r *Rig) Service(t testing.TB, cfg generation.Config) *generation.Service {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = r.DB.Generations()
	}
	if cfg.Blobs == nil {
		cfg.Blobs = r.Blobs
	}
	if cfg.Providers == nil {
		cfg.Providers = []provider.Provider{r.Local}
	}
	svc, err := generation.NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
