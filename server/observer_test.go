package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
	"github.com/darkroom-mcp/darkroom/metrics"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// decoy is the reply every answer of TestObserverHTTP writes, as a JSON
// body or an SSE event: a parse error with no id, unlike any outcome a
// case's answerer tells. A recorder that read replies would label every
// case rpc_parse_error (and a 429 preauth, by its null id).
const decoy = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"decoy"}}`

// TestObserverHTTP: each kind of answer is counted with the outcome its
// answerer told (envelope.Tell, recordOutcome) or the door knows (its HTTP
// status), never what the reply says (decoy), under the method and tool
// its body names whatever its headers claim.
func TestObserverHTTP(t *testing.T) {
	type answer func(w http.ResponseWriter, r *http.Request)
	write := func(code int, sse bool) answer {
		return func(w http.ResponseWriter, r *http.Request) {
			if sse {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(code)
				_, _ = io.WriteString(w, "event: message\ndata: "+decoy+"\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = io.WriteString(w, decoy)
		}
	}
	tell := func(code int64, isError bool, then answer) answer {
		return func(w http.ResponseWriter, r *http.Request) {
			envelope.Tell(w, code, isError)
			then(w, r)
		}
	}
	// sdk runs result through go-sdk's path's recordOutcome, which tells
	// the recorder through the request's envelope.
	sdk := func(res mcp.Result, err error) answer {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = recordOutcome(func(context.Context, string, mcp.Request) (mcp.Result, error) { return res, err })(r.Context(), "tools/call", &mcp.CallToolRequest{})
			write(200, true)(w, r)
		}
	}
	// gone ends the stream while go-sdk's handler still runs (the client
	// went away): a handler ran, nothing is told yet.
	gone := func(w http.ResponseWriter, r *http.Request) {
		entered, release := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(release) })
		go recordOutcome(func(context.Context, string, mcp.Request) (mcp.Result, error) {
			close(entered)
			<-release
			return nil, context.Canceled
		})(r.Context(), "tools/call", &mcp.CallToolRequest{})
		<-entered
		write(200, true)(w, r)
	}
	// limited is a 429 as the per-caller limits write it: nothing told.
	limited := func(w http.ResponseWriter, r *http.Request) {
		ratelimited.WriteHTTP(w, json.RawMessage("7"), time.Second)
	}
	spent := limit.NewClasses(limit.Options{}).PreAuth
	spent.Rate, spent.Burst = 1e-9, 1
	guess := guessThrottle(spent, nil)
	served := func(p envelope.Path, then answer) answer {
		return func(w http.ResponseWriter, r *http.Request) {
			w.(envelope.Outcome).ServedBy(p)
			then(w, r)
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
		answer         answer
		outcome, class string
	}{
		{"ok", gen, [2]string{}, "tools/call", "generate", tell(0, false, write(200, false)), "ok", ""},
		{"headers lie", gen, [2]string{"tasks/get", ""}, "tools/call", "generate", tell(0, false, write(200, false)), "ok", ""},
		{"headers lie about the tool", gen, [2]string{"tools/call", "get_generation"}, "tools/call", "generate", tell(0, false, write(200, false)), "ok", ""},
		{"tool error", gen, [2]string{}, "tools/call", "generate", tell(0, true, write(200, false)), "tool_error", ""},
		{"tool error on go-sdk's path", rpc("tools/call", `{"name":"wait_generation"}`), [2]string{}, "tools/call", "wait_generation",
			sdk(&mcp.CallToolResult{IsError: true}, nil), "tool_error", ""},
		{"error on go-sdk's path", gen, [2]string{}, "tools/call", "generate", sdk(nil, &jsonrpc.Error{Code: -32603}), "rpc_internal_error", ""},
		{"invalid params", rpc("tasks/get", `{"taskId":"t"}`), [2]string{}, "tasks/get", "", tell(-32602, false, write(200, false)), "rpc_invalid_params", ""},
		{"unknown tool", rpc("tools/call", `{"name":"nope"}`), [2]string{}, "tools/call", "other", tell(0, false, write(200, false)), "ok", ""},
		{"unknown method", rpc("nope/nope", `{}`), [2]string{"tools/call", "generate"}, "other", "", tell(-32601, false, write(200, false)), "rpc_method_not_found", ""},
		{"batch: its first answer", `[` + gen + `,` + gen + `]`, [2]string{}, "batch", "", tell(-32601, false, tell(0, false, write(200, false))), "rpc_method_not_found", ""},
		{"stream ended while go-sdk's handler runs", gen, [2]string{}, "tools/call", "generate", gone, "ok", ""},
		{"go-sdk refused before any handler", rpc("tools/list", `7`), [2]string{}, "tools/list", "", write(200, false), "rpc_invalid_params", ""},
		{"400", gen, [2]string{}, "tools/call", "generate", tell(-32020, false, write(400, false)), "http_4xx", ""},
		{"413", gen, [2]string{}, "tools/call", "generate", write(413, false), "http_413", ""},
		{"429 create", gen, [2]string{"tasks/get", ""}, "tools/call", "generate", limited, "http_429", "create"},
		{"429 poll", rpc("tasks/get", `{"taskId":"t"}`), [2]string{"tools/call", "generate"}, "tasks/get", "", limited, "http_429", "poll"},
		{"429 resources/read", rpc("resources/read", `{"uri":"darkroom://x"}`), [2]string{}, "resources/read", "", limited, "http_429", "poll"},
		{"429 listen", rpc("subscriptions/listen", `{}`), [2]string{}, "subscriptions/listen", "", limited, "http_429", "listen"},
		{"429 guessing", gen, [2]string{}, "tools/call", "generate", func(w http.ResponseWriter, r *http.Request) {
			for !guess(w, r) {
			}
		}, "http_429", "preauth"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, [2]string{}, "notifications/initialized", "", write(202, false), "ok", ""},
		{"stream without its response", rpc("subscriptions/listen", `{"notifications":{"taskIds":["t"]}}`), [2]string{}, "subscriptions/listen", "",
			served(envelope.PathTasks, write(200, true)), "ok", ""},
		{"500", rpc("tools/list", `{}`), [2]string{}, "tools/list", "", write(500, false), "http_5xx", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := metrics.New()
			toolClass := func(n string) string { return map[string]string{"generate": "create"}[n] }
			o := &Observer{Metrics: m, Tools: []string{"generate", "wait_generation"}, ToolClass: toolClass}
			srv := httptest.NewServer(o.HTTP(admit(nil, 1<<20, toolClass, http.HandlerFunc(c.answer))))
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

// TestObserverRealChain: on darkroom's real chain (guess guard, API-key
// auth, per-caller limits, go-sdk), each outcome is told or known at the
// door: a guess past the guard's burst is a preauth 429 before any body
// is read, go-sdk's refusal of params that do not decode (before any
// handler runs, answered in a 200) is rpc_invalid_params, and a tool's
// isError result is told by recordOutcome.
func TestObserverRealChain(t *testing.T) {
	g := newGuardRig(t, "")
	m := metrics.New()
	h := (&Observer{Metrics: m, Tools: []string{"get_generation"}}).HTTP(g.h)
	post := func(token, body string) int {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		r.RemoteAddr = "203.0.113.5:4000"
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	for post("a-guess", `{"jsonrpc":"2.0","id":1,"method":"ping"}`) != http.StatusTooManyRequests {
	}
	post(validSecret, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`)
	post(validSecret, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_generation","arguments":{"generationId":"gen_none"}}}`)
	http := func(method, tool, outcome string) string {
		return labels("method", method, "outcome", outcome, "tool", tool, "transport", "http")
	}
	want := map[string]float64{
		http("unknown", "", "http_401"):                    guardBurst,
		http("unknown", "", "http_429"):                    1,
		http("tools/call", "other", "rpc_invalid_params"):  1,
		http("tools/call", "get_generation", "tool_error"): 1,
	}
	if got := sum(t, m, "darkroom_requests_total"); !maps.Equal(got, want) {
		t.Errorf("requests_total = %v, want %v", got, want)
	}
	if got := sum(t, m, "darkroom_rate_limited_total"); !maps.Equal(got, map[string]float64{labels("class", "preauth"): 1}) {
		t.Errorf("rate_limited_total = %v, want one preauth", got)
	}
}

// TestObserverStdio: on stdio each call is labelled from its parse and
// its outcome from the response: a tools/call result's isError, one
// nested in its structured output aside.
func TestObserverStdio(t *testing.T) {
	m := metrics.New()
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	for name, isError := range map[string]bool{"generate": true, "get_generation": false} {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{}, IsError: isError, StructuredContent: map[string]any{"isError": true}}, nil
		})
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), (&Observer{Metrics: m, Tools: []string{"generate"}}).Transport(st), nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"generate", "get_generation"} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	_ = cs.Close()
	_ = ss.Wait()
	stdio := func(method, tool, outcome string) string {
		return labels("method", method, "outcome", outcome, "tool", tool, "transport", "stdio")
	}
	want := map[string]float64{stdio("server/discover", "", "ok"): 1, stdio("tools/call", "generate", "tool_error"): 1, stdio("tools/call", "other", "ok"): 1}
	if got := sum(t, m, "darkroom_requests_total"); !maps.Equal(got, want) {
		t.Errorf("requests_total = %v, want %v", got, want)
	}
}
