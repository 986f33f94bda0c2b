package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestNoTaskBeforeTheTasksWire: a task is only ever the answer to a
// request on the 2026-07-28 wire whose own _meta declares the extension.
// A 2025 stdio session that declared it in initialize cannot poll
// tasks/get, so it gets the plain generationId result: charged once, and
// a retry with the same idempotencyKey is the same generation.
func TestNoTaskBeforeTheTasksWire(t *testing.T) {
	s := startServer(t, 0)

	t.Run("stdio 2025-11-25, extension in initialize", func(t *testing.T) {
		st, ct := mcp.NewInMemoryTransports()
		limited := server.LimitTransport(st, s.app.limits, s.app.tools.RateClass, server.LocalPrincipal)
		ss, err := s.app.mcp.Connect(context.Background(), s.app.tasks.Transport(limited, server.LocalPrincipal), nil)
		if err != nil {
			t.Fatal(err)
		}
		caps := &mcp.ClientCapabilities{}
		caps.AddExtension(tasks.ExtensionID, map[string]any{})
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "legacy-stdio", Version: "1"}, &mcp.ClientOptions{Capabilities: caps}).
			Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
		if got := ss.InitializeParams().Capabilities.Extensions[tasks.ExtensionID]; got == nil {
			t.Fatalf("the session's initialize did not declare the extension (%v)", ss.InitializeParams().Capabilities)
		}
		var before struct{ Spent int64 }
		call(t, cs, "get_credits", map[string]any{}, &before)
		args := map[string]any{"modelId": "local-sketch", "prompt": "legacy stdio", "idempotencyKey": "legacy-stdio-1"}
		var first, retry genView
		if res := call(t, cs, "generate", args, &first); res.IsError || first.GenerationID == "" {
			t.Fatalf("generate: %s", text(res))
		}
		if res := call(t, cs, "generate", args, &retry); res.IsError || retry.GenerationID != first.GenerationID {
			t.Fatalf("retry with the same key: %q (%s), want %q", retry.GenerationID, text(res), first.GenerationID)
		}
		var after struct{ Spent int64 }
		call(t, cs, "get_credits", map[string]any{}, &after)
		if after.Spent-before.Spent != first.Credits || first.Credits == 0 {
			t.Fatalf("charged %d, want %d once", after.Spent-before.Spent, first.Credits)
		}
	})

	post := func(t *testing.T, version string, meta map[string]any) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
			"_meta": meta, "name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": "era " + version}}})
		code, raw, err := postRaw(http.DefaultClient, s.url+"/mcp", body, map[string]string{
			"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": "generate"})
		if err != nil || code != 200 {
			t.Fatalf("POST: %d %v %s", code, err, raw)
		}
		var m struct {
			Result map[string]any `json:"result"`
			Error  any            `json:"error"`
		}
		if err := json.Unmarshal(lastData(raw), &m); err != nil || m.Error != nil {
			t.Fatalf("reply %s: %v", raw, err)
		}
		return m.Result
	}
	ext := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	for _, c := range []struct {
		name, version string
		meta          map[string]any
		task          bool
	}{
		{"HTTP 2025-11-25, extension in _meta", "2025-11-25", map[string]any{"io.modelcontextprotocol/clientCapabilities": ext}, false},
		{"HTTP 2025-06-18, extension in _meta", "2025-06-18", map[string]any{"io.modelcontextprotocol/clientCapabilities": ext}, false},
		{"HTTP 2026-07-28, extension in _meta", "2026-07-28", map[string]any{
			"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": ext}, true},
		{"HTTP 2026-07-28, no extension", "2026-07-28", map[string]any{
			"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := post(t, c.version, c.meta)
			isTask := res["resultType"] == "task"
			if isTask != c.task {
				t.Fatalf("resultType %v, want task=%v: %v", res["resultType"], c.task, res)
			}
			if sc, _ := res["structuredContent"].(map[string]any); !c.task && (sc == nil || sc["generationId"] == nil) {
				t.Fatalf("no generationId in %v", res)
			}
		})
	}
}
