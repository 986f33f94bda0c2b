package edge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/storage/sqlite"
	"github.com/darkroom-mcp/darkroom/tasks"
)

const testVersion = "2026-07-28"

// newTestStore is a task store on a fresh embedded engine.
func newTestStore(t testing.TB) (*tasks.Store, *sqlite.DB) {
	t.Helper()
	d, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return tasks.NewStore(d.Tasks(), time.Now), d
}

func tasksCaps() map[string]any {
	return map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
}

// newEngine is an engine in front of a dispatcher on a fresh store.
func newEngine(t testing.TB) (*Engine, *tasks.Store, *sqlite.DB) {
	s, db := newTestStore(t)
	d := tasks.NewDispatcher(tasks.Options{Store: s, ServerInfo: map[string]string{"name": "test"}})
	d.Register("test", kind{})
	return New(d, Options{}), s, db
}

// serve serves en's middleware for the caller "alice" in front of a
// handler standing in for go-sdk, which records each body it is handed.
func serve(t testing.TB, en *Engine) (*httptest.Server, chan []byte) {
	passed := make(chan []byte, 16)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		passed <- b
		w.WriteHeader(http.StatusTeapot)
	})
	srv := httptest.NewServer(en.Middleware(func(*http.Request) string { return "alice" }, 1<<20)(next))
	t.Cleanup(srv.Close)
	return srv, passed
}

// kind renders nothing: the tests create tasks and never read them.
type kind struct{}

func (kind) Cancel(context.Context, *tasks.Task) error                               { return nil }
func (kind) Answered(context.Context, *tasks.Task, map[string]json.RawMessage) error { return nil }
func (kind) Result(context.Context, *tasks.Task) (json.RawMessage, error)            { return nil, nil }
