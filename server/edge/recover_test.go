package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/tasks"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLeanPanicsAnswered: a panic in a handler the dispatcher runs below
// go-sdk (a Tool's Task or Read, a keyed read's Render, ServeResource) is
// answered -32603 there, once, and not handed to go-sdk to run (and
// panic) again; the server serves on. Without the guards net/http drops
// the connection.
func TestLeanPanicsAnswered(t *testing.T) {
	en, _, _ := newEngine(t)
	runs := map[string]int{}
	boom := func(name string) { runs[name]++; panic("test: " + name) }
	en.ServeTool("make", Tool{Task: func(context.Context, *mcp.CallToolRequest) (tasks.ToolOutcome, error) {
		boom("make")
		return tasks.ToolOutcome{}, nil
	}})
	en.ServeTool("peek", Tool{Read: func(context.Context, *mcp.CallToolRequest) (Reply, error) {
		boom("peek")
		return Reply{}, nil
	}})
	en.ServeTool("render", Tool{Read: func(context.Context, *mcp.CallToolRequest) (Reply, error) {
		runs["render"]++
		return Reply{ID: "g", Key: 1, Render: func() *mcp.CallToolResult { panic("test: render") }}, nil
	}})
	en.ServeResource(func(context.Context, *mcp.ReadResourceRequest) (mcp.Result, error) {
		boom("darkroom://x")
		return nil, nil
	}, nil)
	srv, passed := serve(t, en)
	for _, c := range []struct{ method, name string }{
		{"tools/call", "make"}, {"tools/call", "peek"}, {"tools/call", "render"}, {"resources/read", "darkroom://x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			params := map[string]any{"_meta": map[string]any{tasks.MetaProtocolVersion: testVersion, tasks.MetaClientCapabilities: tasksCaps()}}
			if c.method == "tools/call" {
				params["name"], params["arguments"] = c.name, map[string]any{}
			} else {
				params["uri"] = c.name
			}
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": c.method, "params": params})
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", bytes.NewReader(body))
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
				Error *tasks.RPCError
			}
			if json.Unmarshal(b, &m) != nil || m.ID != 7 || m.Error == nil || m.Error.Code != tasks.CodeInternal ||
				!strings.Contains(m.Error.Message, tasks.PanicMessage) || resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("answer %d %s", resp.StatusCode, b)
			}
			if runs[c.name] != 1 || len(passed) != 0 {
				t.Fatalf("handler ran %d times, %d requests passed to go-sdk", runs[c.name], len(passed))
			}
		})
	}
}
