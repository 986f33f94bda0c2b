package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLeanPanicsAnswered: a panic in a handler the dispatcher runs below
// go-sdk (ServeTool, ServeRead, a keyed read's Render, ServeResource) is
// answered -32603 there, once, and not handed to go-sdk to run (and
// panic) again; the server serves on. Without the guards net/http drops
// the connection.
func TestLeanPanicsAnswered(t *testing.T) {
	s, _, _ := newTestStore(t)
	d := NewDispatcher(Options{Store: s, ServerInfo: map[string]string{"name": "test"}})
	runs := map[string]int{}
	boom := func(name string) { runs[name]++; panic("test: " + name) }
	d.ServeTool("make", func(context.Context, *mcp.CallToolRequest) (ToolOutcome, error) {
		boom("make")
		return ToolOutcome{}, nil
	}, nil)
	d.ServeRead("peek", func(context.Context, *mcp.CallToolRequest) (Reply, error) {
		boom("peek")
		return Reply{}, nil
	}, nil, &mcp.Implementation{Name: "darkroom", Version: "1"})
	d.ServeRead("render", func(context.Context, *mcp.CallToolRequest) (Reply, error) {
		runs["render"]++
		return Reply{ID: "g", Key: 1, Render: func() *mcp.CallToolResult { panic("test: render") }}, nil
	}, nil, &mcp.Implementation{Name: "darkroom", Version: "1"})
	d.ServeResource(func(context.Context, *mcp.ReadResourceRequest) (mcp.Result, error) {
		boom("darkroom://x")
		return nil, nil
	}, nil)
	f := newHTTPFixture(t, d)
	for _, c := range []struct{ method, name string }{
		{"tools/call", "make"}, {"tools/call", "peek"}, {"tools/call", "render"}, {"resources/read", "darkroom://x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			params := map[string]any{"_meta": map[string]any{metaProtocolVersion: testVersion, metaClientCapabilities: tasksCaps()}}
			if c.method == "tools/call" {
				params["name"], params["arguments"] = c.name, map[string]any{}
			} else {
				params["uri"] = c.name
			}
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": c.method, "params": params})
			req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", bytes.NewReader(body))
			for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
				"Mcp-Protocol-Version": testVersion, "Mcp-Method": c.method, "Mcp-Name": c.name} {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("the connection: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			var m struct {
				ID    int
				Error *RPCError
			}
			if json.Unmarshal(b, &m) != nil || m.ID != 7 || m.Error == nil || m.Error.Code != CodeInternal ||
				!strings.Contains(m.Error.Message, PanicMessage) || resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("answer %d %s", resp.StatusCode, b)
			}
			if runs[c.name] != 1 || len(f.passed) != 0 {
				t.Fatalf("handler ran %d times, %d requests passed to go-sdk", runs[c.name], len(f.passed))
			}
		})
	}
}

// TestCallPanicAnswered: a panic below Dispatcher.Call (tasks/*) is its
// -32603 answer.
func TestCallPanicAnswered(t *testing.T) {
	d := NewDispatcher(Options{Store: &Store{}}) // no backend: a lookup panics
	_, e := d.Call(context.Background(), "alice", rpc(methodGet, map[string]any{"taskId": "t1"}), nil)
	if e == nil || e.Code != CodeInternal || e.Message != PanicMessage {
		t.Fatalf("Call: %+v", e)
	}
}
