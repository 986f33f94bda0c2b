package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/darkroom-mcp/darkroom/storage/sqlite"
	"github.com/darkroom-mcp/darkroom/tasks"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolFixture serves the dispatcher's middleware with one lean tool,
// "make", in front of a handler standing in for go-sdk that records the
// body it was handed.
type toolFixture struct {
	srv    *httptest.Server
	calls  atomic.Int32 // handler runs
	passed chan []byte  // bodies handed to go-sdk
	store  *tasks.Store
	db     *sqlite.DB
}

func newToolFixture(t *testing.T) *toolFixture {
	t.Helper()
	en, s, db := newEngine(t)
	f := &toolFixture{store: s, db: db}
	// "make" creates a task, fails with an tasks.RPCError or another error, or
	// answers a result, as its "do" argument says; "full" is left to
	// go-sdk by its predicate.
	en.ServeTool("make", Tool{Task: func(ctx context.Context, req *mcp.CallToolRequest) (tasks.ToolOutcome, error) {
		f.calls.Add(1)
		var a struct{ Do string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		switch a.Do {
		case "create":
			task := &tasks.Task{Owner: "alice", Ref: "test:x", ClientCaps: tasks.CapsJSON(req)}
			if err := s.Write(ctx, "", func(ctx context.Context, tx tasks.Tx) error { return s.Create(ctx, tx, task) }); err != nil {
				return tasks.ToolOutcome{}, err
			}
			return tasks.ToolOutcome{Task: task}, nil
		case "rpcerr":
			return tasks.ToolOutcome{}, &tasks.RPCError{Code: tasks.CodeMissingCapability, Message: "needs elicitation"}
		case "fail":
			return tasks.ToolOutcome{}, errors.New("test: the store is down")
		case "toolerr":
			return tasks.ToolOutcome{Result: &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "refused"}}}}, nil
		}
		return tasks.ToolOutcome{Result: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "plain"}}}}, nil
	}, Lean: func(req *mcp.CallToolRequest) bool {
		var a struct{ Do string }
		return json.Unmarshal(req.Params.Arguments, &a) == nil && a.Do != "full"
	}})
	f.srv, f.passed = serve(t, en)
	return f
}

type toolCallCase struct {
	name    string
	do      string
	params  map[string]any    // merged into params (nil values delete)
	meta    map[string]any    // merged into _meta (nil values delete)
	body    map[string]any    // merged into the message (nil values delete)
	headers map[string]string // "" deletes
	host    string
	served  bool // answered by the dispatcher, not go-sdk
	// refused is the status of a request answered before any handler
	// runs or anything is passed on (0: not refused).
	refused  int
	trailing string // appended to the body
}

func queryInt(db *sqlite.DB, q string) (n int, err error) {
	err = db.Read.QueryRow(q).Scan(&n)
	return n, err
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
		} else {
			dst[k] = v
		}
	}
}

func (f *toolFixture) call(t *testing.T, c toolCallCase) (*http.Response, []byte) {
	t.Helper()
	meta := map[string]any{tasks.MetaProtocolVersion: testVersion, tasks.MetaClientCapabilities: tasksCaps()}
	merge(meta, c.meta)
	params := map[string]any{"name": "make", "arguments": map[string]any{"do": c.do}, "_meta": meta}
	merge(params, c.params)
	msg := map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
	merge(msg, c.body)
	body, _ := json.Marshal(msg)
	body = append(body, c.trailing...)
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", bytes.NewReader(body))
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": testVersion, "Mcp-Method": "tools/call", "Mcp-Name": "make"}
	maps.Copy(h, c.headers)
	for k, v := range h {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	if c.host != "" {
		req.Host = c.host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestServeTool: the dispatcher answers a tools/call itself when go-sdk
// would take the request as it stands and the tool's predicate takes its
// arguments, whatever the handler returns (a task, an tasks.RPCError, a
// result, a tool error, an internal error), running it once; everything
// else reaches go-sdk with its body intact and nothing run.
func TestServeTool(t *testing.T) {
	cases := []toolCallCase{
		{name: "task created", do: "create", served: true},
		{name: "rpc error", do: "rpcerr", served: true},
		{name: "plain result", do: "plain", served: true},
		{name: "tool error", do: "toolerr", served: true},
		{name: "internal error", do: "fail", served: true},
		{name: "the predicate refuses the arguments", do: "full"},
		{name: "extension not declared", do: "create", meta: map[string]any{tasks.MetaClientCapabilities: map[string]any{}}},
		{name: "other tool", do: "create", params: map[string]any{"name": "other"}, headers: map[string]string{"Mcp-Name": "other"}},
		{name: "Mcp-Name differs from the body", do: "create", params: map[string]any{"name": "other"}, refused: http.StatusBadRequest},
		{name: "Mcp-Method missing", do: "create", headers: map[string]string{"Mcp-Method": ""}, refused: http.StatusBadRequest},
		{name: "version header differs from _meta", do: "create", meta: map[string]any{tasks.MetaProtocolVersion: "2025-11-25"}, refused: http.StatusBadRequest},
		{name: "older version", do: "create", headers: map[string]string{"Mcp-Protocol-Version": "2025-11-25"}, meta: map[string]any{tasks.MetaProtocolVersion: "2025-11-25"}},
		{name: "Accept without event-stream", do: "create", headers: map[string]string{"Accept": "application/json"}},
		{name: "Accept */*", do: "create", headers: map[string]string{"Accept": "*/*"}, served: true},
		{name: "Content-Type not JSON", do: "create", headers: map[string]string{"Content-Type": "text/plain"}},
		{name: "Content-Type with charset", do: "create", headers: map[string]string{"Content-Type": "application/json; charset=utf-8"}, served: true},
		{name: "Last-Event-ID", do: "create", headers: map[string]string{"Last-Event-ID": "1"}},
		{name: "MRTR retry", do: "create", params: map[string]any{"requestState": "s", "inputResponses": map[string]any{}}},
		{name: "clientInfo malformed", do: "create", meta: map[string]any{metaClientInfo: "me"}},
		{name: "clientInfo well formed", do: "create", meta: map[string]any{metaClientInfo: map[string]any{"name": "me", "version": "1"}}, served: true},
		{name: "capabilities malformed", do: "create", meta: map[string]any{tasks.MetaClientCapabilities: map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}, "elicitation": 5}}},
		{name: "null id", do: "create", body: map[string]any{"id": nil}},
		{name: "not JSON-RPC 2.0", do: "create", body: map[string]any{"jsonrpc": "1.0"}},
		{name: "foreign Host on a loopback listener", do: "create", host: "evil.example", refused: http.StatusForbidden},
		{name: "trailing data after the message", do: "create", trailing: ` {"jsonrpc":"2.0","id":8,"method":"tools/call"}`, refused: http.StatusBadRequest},
		{name: "name key in another case", do: "create", params: map[string]any{"NAME": "other"}, served: true},
	}
	t.Run("body over the limit", func(t *testing.T) {
		f := newToolFixture(t)
		resp, _ := f.call(t, toolCallCase{do: "create", params: map[string]any{"arguments": map[string]any{"do": "create", "pad": strings.Repeat("x", 2<<20)}}})
		if resp.StatusCode != http.StatusRequestEntityTooLarge || f.calls.Load() != 0 {
			t.Fatalf("status %d after %d handler runs, want 413 and none", resp.StatusCode, f.calls.Load())
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newToolFixture(t)
			resp, body := f.call(t, c)
			if c.refused != 0 {
				if resp.StatusCode != c.refused || f.calls.Load() != 0 || len(f.passed) != 0 {
					t.Fatalf("status %d %s after %d handler runs, want %d, nothing run or passed", resp.StatusCode, body, f.calls.Load(), c.refused)
				}
				return
			}
			if !c.served {
				if resp.StatusCode != http.StatusTeapot {
					t.Fatalf("status %d %s, want the request passed on", resp.StatusCode, body)
				}
				var m map[string]any
				if err := json.Unmarshal(<-f.passed, &m); err != nil || m["method"] != "tools/call" {
					t.Fatalf("go-sdk got a damaged body: %v %v", m, err)
				}
				if n, err := queryInt(f.db, "SELECT COUNT(*) FROM tasks"); err != nil || n != 0 {
					t.Fatal("a passed request left a task behind")
				}
				return
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			var r struct {
				ID     json.RawMessage
				Result *struct {
					ResultType string `json:"resultType"`
					TaskID     string `json:"taskId"`
				}
				Error *struct{ Code int64 }
			}
			if err := json.Unmarshal(body, &r); err != nil || string(r.ID) != "7" {
				t.Fatalf("response %s: %v", body, err)
			}
			switch c.do {
			case "create":
				if r.Result == nil || r.Result.ResultType != "task" {
					t.Fatalf("want a CreateTaskResult, got %s", body)
				}
				if _, err := f.store.Lookup(context.Background(), "alice", r.Result.TaskID); err != nil {
					t.Fatalf("task %s not stored: %v", r.Result.TaskID, err)
				}
			case "rpcerr":
				if r.Error == nil || r.Error.Code != tasks.CodeMissingCapability {
					t.Fatalf("want error -32021, got %s", body)
				}
			case "fail":
				if r.Error == nil || r.Error.Code != tasks.CodeInternal || strings.Contains(string(body), "store") {
					t.Fatalf("want -32603 naming nothing, got %s", body)
				}
			case "plain", "toolerr":
				want := `"content":[{"type":"text","text":"plain"}],"resultType":"complete"}}`
				if c.do == "toolerr" {
					want = `"content":[{"type":"text","text":"refused"}],"isError":true,"resultType":"complete"}}`
				}
				if !strings.HasSuffix(string(body), want) || !strings.Contains(string(body), `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"test"}}`) {
					t.Fatalf("want go-sdk's encoding of the result, got %s", body)
				}
			}
			if n := f.calls.Load(); n != 1 {
				t.Fatalf("handler ran %d times", n)
			}
		})
	}
}
