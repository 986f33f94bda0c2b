package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStoreFailureNamesNothing: a request whose store read fails (here the
// database closed under the server) tells its caller an internal error
// happened, never the store's own text, which names internals (a file, a
// database's address and user). Every serving path: the dispatcher's
// tasks/get, a 2026-07-28 tools/call (the lean read path, then go-sdk's)
// and a 2025-11-25 session's tools/call (go-sdk's).
func TestStoreFailureNamesNothing(t *testing.T) {
	ts := startServer(t, 0)
	legacy := connect(t, ts.url, "2025-11-25")
	if err := ts.app.db.Close(); err != nil {
		t.Fatal(err)
	}
	id := generation.NewID() // well formed, so the store is asked
	hc := &http.Client{}
	taskCaps := map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	for _, c := range []struct {
		name   string
		method string
		params map[string]any
	}{
		{"tasks/get", "tasks/get", map[string]any{"taskId": id}},
		{"get_generation on 2026-07-28", "tools/call", map[string]any{"name": "get_generation", "arguments": map[string]any{"generationId": id}}},
		{"get_credits on 2026-07-28", "tools/call", map[string]any{"name": "get_credits", "arguments": map[string]any{}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := rpcDo(hc, ts.url, "", taskCaps, c.method, c.params)
			if err != nil {
				t.Fatal(err)
			}
			if r.Error == nil || r.Error.Message != tasks.InternalMessage || r.Error.Code != -32603 {
				t.Fatalf("HTTP %d, error %+v, result %v; want -32603 %q", r.Status, r.Error, r.Result, tasks.InternalMessage)
			}
		})
	}
	for tool, args := range map[string]map[string]any{"get_generation": {"generationId": id}, "get_credits": {}} {
		t.Run(tool+" on 2025-11-25", func(t *testing.T) {
			_, err := legacy.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
			if err == nil || !strings.Contains(err.Error(), tasks.InternalMessage) || strings.Contains(err.Error(), "closed") {
				t.Fatalf("error %v; want only %q", err, tasks.InternalMessage)
			}
		})
	}
}
