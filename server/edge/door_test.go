package edge

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/tasks"
)

// doorFixture serves the door (the Host check and Admit) in front of a
// handler that marks each request handed on.
type doorFixture struct {
	srv    *httptest.Server
	passed chan struct{}
}

func newDoorFixture(t *testing.T) *doorFixture {
	t.Helper()
	f := &doorFixture{passed: make(chan struct{}, 16)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !HostAllowed(r) {
			http.Error(w, "Forbidden: invalid Host header", http.StatusForbidden)
			return
		}
		if _, _, ok := Admit(w, r, 1<<20); !ok {
			return
		}
		f.passed <- struct{}{}
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func TestBodyTooLarge(t *testing.T) {
	f := newDoorFixture(t)
	big := strings.Repeat("x", 2<<20)
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"pad":"`+big+`"}}`))
	req.Header.Set("Mcp-Method", "tasks/get")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("HTTP %d, want 413", resp.StatusCode)
	}
}

// TestBodyRead: what the door reads of a body, whichever way its length
// is told: an exact small length, a length the client never finishes, a
// chunked body, a length above the small-read bound, and one over the
// cap. Only a whole body is parsed and handed on.
func TestBodyRead(t *testing.T) {
	f := newDoorFixture(t)
	addr := strings.TrimPrefix(f.srv.URL, "http://")
	msg := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	padded := func(n int) string { // msg padded with spaces to n bytes
		return msg + strings.Repeat(" ", n-len(msg))
	}
	cases := []struct {
		name    string
		headers string // after the request line
		body    string
		status  int
		passed  bool
	}{
		{"exact", fmt.Sprintf("Content-Length: %d\r\n", len(msg)), msg, http.StatusTeapot, true},
		{"short of its length", fmt.Sprintf("Content-Length: %d\r\n", len(msg)+40), msg, http.StatusBadRequest, false},
		{"chunked", "Transfer-Encoding: chunked\r\n", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(msg), msg), http.StatusTeapot, true},
		{"above the small read", fmt.Sprintf("Content-Length: %d\r\n", exactReadMax+1), padded(exactReadMax + 1), http.StatusTeapot, true},
		{"over the cap", fmt.Sprintf("Content-Length: %d\r\n", 1<<20+1), padded(1<<20 + 1), http.StatusRequestEntityTooLarge, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			req := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" + c.headers + "\r\n" + c.body
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			_ = conn.(*net.TCPConn).CloseWrite() // a short body ends here
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			passed := false
			select {
			case <-f.passed:
				passed = true
			default:
			}
			if resp.StatusCode != c.status || passed != c.passed {
				t.Fatalf("HTTP %d, handed on %v; want %d, %v", resp.StatusCode, passed, c.status, c.passed)
			}
		})
	}
}

// TestDoorHeaderChecks: the door refuses, before anything runs, a request
// whose SEP-2243 headers are required and missing or disagree with its
// body, -32602 first for a 2026-07-28 call without _meta, and passes the
// rest (an earlier era, a base64 header, a notification, a batch) on.
func TestDoorHeaderChecks(t *testing.T) {
	f := newDoorFixture(t)
	meta := func(v string) map[string]any {
		return map[string]any{"_meta": map[string]any{tasks.MetaProtocolVersion: v, tasks.MetaClientCapabilities: tasksCaps()}}
	}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := map[string]any{k: v}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	get := with(meta(testVersion), "taskId", "t1")
	b64 := func(v string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?=" }
	modern := map[string]string{"Mcp-Protocol-Version": testVersion, "Mcp-Method": "tasks/get", "Mcp-Name": "t1"}
	cases := []struct {
		name    string
		body    any
		headers map[string]string // over modern; "" deletes
		code    int64             // 0: handed on
	}{
		{"ok", rpc(1, "tasks/get", get), nil, 0},
		{"base64 Mcp-Name", rpc(1, "tasks/get", get), map[string]string{"Mcp-Name": b64("t1")}, 0},
		{"Mcp-Name mismatch", rpc(1, "tasks/get", get), map[string]string{"Mcp-Name": "t2"}, tasks.CodeHeaderMismatch},
		{"Mcp-Name missing", rpc(1, "tasks/get", get), map[string]string{"Mcp-Name": ""}, tasks.CodeHeaderMismatch},
		{"Mcp-Method mismatch", rpc(1, "tasks/get", get), map[string]string{"Mcp-Method": "tasks/cancel"}, tasks.CodeHeaderMismatch},
		{"protocol header differs from _meta", rpc(1, "tasks/get", get), map[string]string{"Mcp-Protocol-Version": "2025-11-25"}, tasks.CodeHeaderMismatch},
		{"missing _meta", rpc(1, "tasks/get", map[string]any{"taskId": "t1"}), nil, tasks.CodeInvalidParams},
		{"missing _meta beats a header mismatch", rpc(1, "tasks/get", map[string]any{"taskId": "t1"}), map[string]string{"Mcp-Name": "t2"}, tasks.CodeInvalidParams},
		{"tools/call Mcp-Name mismatch", rpc(1, "tools/call", with(meta(testVersion), "name", "generate")), map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "other"}, tasks.CodeHeaderMismatch},
		{"earlier era: no Mcp-Method needed", rpc(1, "tasks/get", with(meta("2025-06-18"), "taskId", "t1")), map[string]string{"Mcp-Protocol-Version": "2025-06-18", "Mcp-Method": ""}, 0},
		{"notification without _meta", rpc(0, "notifications/initialized", nil), map[string]string{"Mcp-Method": "notifications/initialized", "Mcp-Name": ""}, 0},
		{"batch: no Mcp-Method", []any{rpc(1, "ping", meta(testVersion))}, map[string]string{"Mcp-Method": ""}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, _ := json.Marshal(c.body)
			req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", bytes.NewReader(body))
			for k, v := range modern {
				req.Header.Set(k, v)
			}
			for k, v := range c.headers {
				if req.Header.Del(k); v != "" {
					req.Header.Set(k, v)
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if c.code == 0 {
				if resp.StatusCode != http.StatusTeapot {
					t.Fatalf("HTTP %d %s: not handed on", resp.StatusCode, b)
				}
				<-f.passed
				return
			}
			var r struct {
				Error struct{ Code int64 } `json:"error"`
			}
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &r) != nil || r.Error.Code != c.code {
				t.Fatalf("HTTP %d %s, want 400 with %d", resp.StatusCode, b, c.code)
			}
		})
	}
}

// rpc is a JSON-RPC request (id 0: a notification).
func rpc(id int, method string, params map[string]any) map[string]any {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if id != 0 {
		m["id"] = id
	}
	if params != nil {
		m["params"] = params
	}
	return m
}
