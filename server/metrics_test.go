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

func TestEnvelopeOf(t *testing.T) {
	cases := []struct {
		name, body, method, tool string
	}{
		{"tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"generate","arguments":{"prompt":"x"}}}`, "tools/call", "generate"},
		{"params first", `{"params":{"_meta":{"a":{"name":"no"}},"arguments":{},"name":"get_generation"},"method":"tools/call","id":2}`, "tools/call", "get_generation"},
		{"cut inside the arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"generate","arguments":{"prompt":"xxxxx`, "tools/call", "generate"},
		{"cut before the name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"prompt":"xx`, "tools/call", ""},
		{"other method", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t"}}`, "tasks/get", ""},
		{"batch", `[{"jsonrpc":"2.0"}]`, "batch", ""},
		{"not JSON", `hello`, "", ""},
		{"empty", ``, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, n := envelopeOf([]byte(c.body))
			if m != c.method || n != c.tool {
				t.Fatalf("envelopeOf = %q, %q; want %q, %q", m, n, c.method, c.tool)
			}
		})
	}
}

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
// JSON body or an SSE stream, whatever the handler's writes look like.
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
	cases := []struct {
		name, method, tool, body string
		answer                   func(w http.ResponseWriter)
		outcome, class           string
	}{
		{"ok", "tools/call", "generate", "", json(200, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`), "ok", ""},
		{"tool error", "tools/call", "generate", "", json(200, `{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`), "tool_error", ""},
		{"tool error over SSE", "tools/call", "wait_generation", "",
			sse(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":3}}`, `{"jsonrpc":"2.0","id":1,"result":{"isError":true}}`), "tool_error", ""},
		{"invalid params", "tasks/get", "", "", json(200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}`), "rpc_invalid_params", ""},
		{"unknown tool, method from the body", "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}`,
			json(200, `{"jsonrpc":"2.0","id":1,"result":{}}`), "ok", ""},
		{"401", "tools/call", "generate", "", json(401, `unauthorized`), "http_401", ""},
		{"413", "tools/call", "generate", "", json(413, `too large`), "http_413", ""},
		{"429 create", "tools/call", "generate", "", json(429, `{"jsonrpc":"2.0","id":7,"error":{"code":-31429,"message":"slow down"}}`), "http_429", "create"},
		{"429 poll", "tasks/get", "", "", json(429, `{"jsonrpc":"2.0","id":7,"error":{"code":-31429,"message":"slow down"}}`), "http_429", "poll"},
		{"429 guessing", "tools/call", "generate", "", json(429, `{"jsonrpc":"2.0","id":null,"error":{"code":-31429,"message":"slow down"}}`), "http_429", "preauth"},
		{"notification", "notifications/initialized", "", "", func(w http.ResponseWriter) { w.WriteHeader(202) }, "ok", ""},
		{"stream without its response", "subscriptions/listen", "", "", sse(`{"jsonrpc":"2.0","method":"notifications/tasks","params":{}}`), "ok", ""},
		{"500", "tools/list", "", "", json(500, `boom`), "http_5xx", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := metrics.New()
			o := &Observer{Metrics: m, Tools: []string{"generate", "wait_generation"}, ToolClass: func(n string) string {
				return map[string]string{"generate": "create"}[n]
			}}
			srv := httptest.NewServer(o.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				c.answer(w)
			})))
			defer srv.Close()
			req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(c.body))
			if c.method != "" {
				req.Header.Set("Mcp-Method", c.method)
			}
			if c.tool != "" {
				req.Header.Set("Mcp-Name", c.tool)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			method, tool := c.method, c.tool
			if c.body != "" {
				method, tool = "tools/call", "other"
			}
			if method != "tools/call" {
				tool = ""
			}
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

// TestObserverDrainEndsListen: Drain cancels an open listen stream's
// request, and one opened afterwards at once.
func TestObserverDrainEndsListen(t *testing.T) {
	o := &Observer{Metrics: metrics.New()}
	h := o.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	listen := func() *http.Response {
		req, _ := http.NewRequest("POST", srv.URL, nil)
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	open := listen() // headers arrived: the handler is waiting
	o.Drain()
	if _, err := io.ReadAll(open.Body); err != nil {
		t.Fatalf("stream did not end cleanly: %v", err)
	}
	after := listen()
	if _, err := io.ReadAll(after.Body); err != nil {
		t.Fatal(err)
	}
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
