package server

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/metrics"
)

func TestErrorClass(t *testing.T) {
	for code, want := range map[int64]string{-32700: "rpc_parse_error", -32600: "rpc_invalid_request", -32601: "rpc_method_not_found",
		-32602: "rpc_invalid_params", -32603: "rpc_internal_error", -32000: "rpc_server_error", -32099: "rpc_server_error",
		-31429: "rpc_rate_limited", -32042: "rpc_server_error", 1: "rpc_error_other", -32100: "rpc_error_other"} {
		if got := ErrorClass(code); got != want {
			t.Errorf("ErrorClass(%d) = %q, want %q", code, got, want)
		}
	}
}

// TestObserverHTTP: each kind of answer is counted with its outcome, as a
// JSON body or an SSE stream, whatever the handler's writes look like,
// under the method and tool its body names whatever its headers claim.
func TestObserverHTTP(t *testing.T) {
	sse := func(msgs ...string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			for _, m := range msgs {
				// split across writes, as a stream may be
				_, _ = io.WriteString(w, "event: message\ndata: "+m[:len(m)/2])
				_, _ = io.WriteString(w, m[len(m)/2:]+"\n\n")
			}
		}
	}
	json := func(code int, body string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		}
	}
	rpc := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}
	gen := rpc("tools/call", `{"name":"generate","arguments":{"prompt":"x"}}`)
	cases := []struct {
		name, body     string
		header         [2]string // Mcp-Method, Mcp-Name: what the client claims
		method, tool   string    // the labels
		answer         func(w http.ResponseWriter)
		outcome, class string
	}{
		{"ok", gen, [2]string{}, "tools/call", "generate", json(200, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`), "ok", ""},
		{"headers lie", gen, [2]string{"tasks/get", ""}, "tools/call", "generate", json(200, `{"jsonrpc":"2.0","id":1,"result":{}}`), "ok", ""},
		{"headers lie about the tool", gen, [2]string{"tools/call", "get_generation"}, "tools/call", "generate", json(200, `{"jsonrpc":"2.0","id":1,"result":{}}`), "ok", ""},
		{"tool error", gen, [2]string{}, "tools/call", "generate", json(200, `{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`), "tool_error", ""},
		{"tool error over SSE", rpc("tools/call", `{"name":"wait_generation"}`), [2]string{}, "tools/call", "wait_generation",
			sse(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":3}}`, `{"jsonrpc":"2.0","id":1,"result":{"isError":true}}`), "tool_error", ""},
		{"invalid params", rpc("tasks/get", `{"taskId":"t"}`), [2]string{}, "tasks/get", "", json(200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}`), "rpc_invalid_params", ""},
		{"unknown tool", rpc("tools/call", `{"name":"nope"}`), [2]string{}, "tools/call", "other", json(200, `{"jsonrpc":"2.0","id":1,"result":{}}`), "ok", ""},
		{"unknown method", rpc("nope/nope", `{}`), [2]string{"tools/call", "generate"}, "other", "", json(200, `{"jsonrpc":"2.0","id":1,"result":{}}`), "ok", ""},
		{"batch", `[` + gen + `]`, [2]string{}, "batch", "", json(200, `[]`), "ok", ""},
		{"413", gen, [2]string{}, "tools/call", "generate", json(413, `too large`), "http_413", ""},
		{"429 create", gen, [2]string{"tasks/get", ""}, "tools/call", "generate", json(429, `{"jsonrpc":"2.0","id":7,"error":{"code":-31429,"message":"slow down"}}`), "http_429", "create"},
		{"429 poll", rpc("tasks/get", `{"taskId":"t"}`), [2]string{"tools/call", "generate"}, "tasks/get", "", json(429, `{"jsonrpc":"2.0","id":7,"error":{"code":-31429,"message":"slow down"}}`), "http_429", "poll"},
		{"429 resources/read", rpc("resources/read", `{"uri":"darkroom://x"}`), [2]string{}, "resources/read", "", json(429, `{"jsonrpc":"2.0","id":7,"error":{"code":-31429,"message":"slow down"}}`), "http_429", "poll"},
		{"429 listen", rpc("subscriptions/listen", `{}`), [2]string{}, "subscriptions/listen", "", json(429, `{"jsonrpc":"2.0","id":7,"error":{"code":-31429,"message":"slow down"}}`), "http_429", "listen"},
		{"429 guessing", gen, [2]string{}, "tools/call", "generate", json(429, `{"jsonrpc":"2.0","id":null,"error":{"code":-31429,"message":"slow down"}}`), "http_429", "preauth"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, [2]string{}, "notifications/initialized", "", func(w http.ResponseWriter) { w.WriteHeader(202) }, "ok", ""},
		{"stream without its response", rpc("subscriptions/listen", `{}`), [2]string{}, "subscriptions/listen", "", sse(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{}}`), "ok", ""},
		{"500", rpc("tools/list", `{}`), [2]string{}, "tools/list", "", json(500, `boom`), "http_5xx", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := metrics.New()
			toolClass := func(n string) string { return map[string]string{"generate": "create"}[n] }
			o := &Observer{Metrics: m, Tools: []string{"generate", "wait_generation"}, ToolClass: toolClass}
			srv := httptest.NewServer(o.HTTP(admit(nil, 1<<20, toolClass, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c.answer(w)
			}))))
			defer srv.Close()
			req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(c.body))
			if c.header[0] != "" {
				req.Header.Set("Mcp-Method", c.header[0])
			}
			if c.header[1] != "" {
				req.Header.Set("Mcp-Name", c.header[1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			method, tool := c.method, c.tool
			if got := sum(t, m, "darkroom_requests_total"); len(got) != 1 || got[labels("method", method, "outcome", c.outcome, "tool", tool, "transport", "http")] != 1 {
				t.Fatalf("requests_total = %v, want method=%s tool=%s outcome=%s once", got, method, tool, c.outcome)
			}
			limited := map[string]float64{}
			if c.class != "" {
				limited[labels("class", c.class)] = 1
			}
			if got := sum(t, m, "darkroom_rate_limited_total"); len(got) != len(limited) || (c.class != "" && got[labels("class", c.class)] != 1) {
				t.Fatalf("rate_limited_total = %v, want %v", got, limited)
			}
		})
	}
}

// TestObserverUnread: a request refused before its body is read (here by
// authentication) is "unknown", whatever its headers claim.
func TestObserverUnread(t *testing.T) {
	m := metrics.New()
	o := &Observer{Metrics: m, Tools: []string{"generate"}}
	srv := httptest.NewServer(o.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"generate"}}`))
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "generate")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := sum(t, m, "darkroom_requests_total"); got[labels("method", "unknown", "outcome", "http_401", "tool", "", "transport", "http")] != 1 {
		t.Fatalf("requests_total = %v, want one unknown http_401", got)
	}
}

func labels(kv ...string) string { return strings.Join(kv, ",") }

// sum gathers name's series as label list (name,value,... sorted by name)
// to value.
func sum(t *testing.T, m *metrics.Set, name string) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.Metric {
			var kv []string
			for _, l := range s.Label {
				kv = append(kv, l.GetName(), l.GetValue())
			}
			out[labels(kv...)] += s.GetCounter().GetValue()
		}
	}
	return out
}

func TestQuietSDK(t *testing.T) {
	var buf bytes.Buffer
	l := QuietSDK(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Info("server connecting")
	l.Warn("keepalive ping failed")
	l.Error("server connect error")
	out := buf.String()
	if strings.Contains(out, "server connecting") || !strings.Contains(out, "keepalive") || !strings.Contains(out, "connect error") {
		t.Fatalf("QuietSDK logged:\n%s", out)
	}
}
