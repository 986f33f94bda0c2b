package main

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// panicOnCreate is a log handler that panics on the record a create
// logs once its generation is stored, while armed: a panic inside the
// generate tool's handler after the store, with no hook in the server.
type panicOnCreate struct {
	armed    *atomic.Bool
	panicked *atomic.Int64 // "panic serving a request" records
}

func (h panicOnCreate) Enabled(context.Context, slog.Level) bool { return true }
func (h panicOnCreate) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h panicOnCreate) WithGroup(string) slog.Handler            { return h }
func (h panicOnCreate) Handle(_ context.Context, r slog.Record) error {
	switch {
	case r.Message == "generation created" && h.armed.Load():
		panic("test: a bug after the create")
	case r.Message == "panic serving a request":
		h.panicked.Add(1)
	}
	return nil
}

// TestToolPanicIsAnswered: a panic inside a tool handler, on each
// serving path (go-sdk over HTTP, the dispatcher's lean generate over
// HTTP, go-sdk behind the stdio stack), is answered -32603 and logged;
// the generation it had stored ends failed, refunded; the process serves
// on. Without the guards the panic ends the test binary.
func TestToolPanicIsAnswered(t *testing.T) {
	var armed atomic.Bool
	var panicked atomic.Int64
	s := startServerLog(t, slog.New(panicOnCreate{&armed, &panicked}), 1)
	plain := &rpcClient{t: t, url: s.url, caps: map[string]any{}}

	// stdio's stack: the tasks dispatcher's transport around go-sdk's
	// server, as `darkroom stdio` runs it, over an in-memory pipe.
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.app.mcp.Connect(context.Background(), s.app.tasks.Transport(st, server.LocalPrincipal), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "panic-test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	args := map[string]any{"modelId": "local-motion", "prompt": "boom", "durationSeconds": 2}
	httpGenerate := func(caps map[string]any) func() (int64, string) {
		return func() (int64, string) {
			r := (&rpcClient{t: t, url: s.url, caps: caps}).tool("generate", args)
			if r.Error == nil {
				return 0, ""
			}
			return r.Error.Code, r.Error.Message
		}
	}
	for _, tt := range []struct {
		name     string
		generate func() (code int64, msg string)
	}{
		{"http go-sdk", httpGenerate(map[string]any{})},
		{"http lean task", httpGenerate(withTasks())},
		{"stdio", func() (int64, string) {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "generate", Arguments: args})
			if err == nil {
				return 0, ""
			}
			return tasks.CodeInternal, err.Error()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spent := func() any {
				return plain.tool("get_credits", nil).Result["structuredContent"].(map[string]any)["spent"]
			}
			before, spentBefore := panicked.Load(), spent()
			armed.Store(true)
			code, msg := tt.generate()
			armed.Store(false)
			if code != tasks.CodeInternal || !strings.Contains(msg, tasks.PanicMessage) {
				t.Fatalf("answer: %d %q, want %d %q", code, msg, tasks.CodeInternal, tasks.PanicMessage)
			}
			if n := panicked.Load() - before; n != 1 {
				t.Fatalf("%d panics logged, want 1", n)
			}
			// The generation it stored: failed, refunded.
			l := plain.tool("list_generations", nil).Result["structuredContent"].(map[string]any)["generations"].([]any)
			g := l[0].(map[string]any)
			if g["status"] != "failed" || !strings.Contains(g["statusMessage"].(string), "refunded") {
				t.Fatalf("stored generation: %v", g)
			}
			if after := spent(); after != spentBefore {
				t.Fatalf("spent %v after the panicked create, %v before", after, spentBefore)
			}
			// Serving on: the next create works on the same path.
			if code, msg := tt.generate(); code != 0 {
				t.Fatalf("after the panic: %d %s", code, msg)
			}
			l = plain.tool("list_generations", nil).Result["structuredContent"].(map[string]any)["generations"].([]any)
			if st := l[0].(map[string]any)["status"]; st == "failed" {
				t.Fatalf("next create: %v", l[0])
			}
		})
	}
}
