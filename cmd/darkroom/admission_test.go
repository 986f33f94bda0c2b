package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
	"github.com/darkroom-mcp/darkroom/ui"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// admissionKey is TestOneAdmission's caller.
const admissionKey = "admit-secret-000001"

// admissionServer is darkroom with one API key and limits no walk
// exhausts (or, with burst, limits that refuse the second poll).
func admissionServer(t *testing.T, log *slog.Logger, burst int) *testServer {
	t.Helper()
	keys, err := auth.ParseKeyList("admit="+admissionKey, "test")
	if err != nil {
		t.Fatal(err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return startServerLog(t, log, 1, func(c *config) {
		c.Auth = auth.Config{Keys: keys}
		c.PollRate, c.PollBurst = 1e6, 1e6
		c.CreateRate, c.CreateBurst = 1e6, 1e6
		c.ByteRate, c.ByteBurst = 1<<40, 1<<40
		if burst > 0 {
			c.PollRate, c.PollBurst = 1e-9, burst
		}
	})
}

// wantRuns is how many handlers answer m on era (in a batch, on stdio),
// and whether exactly (go-sdk runs a notification's handler after it
// answered 202, so a notification is held to at most one): none for what
// go-sdk refuses before any handler (a method it does not serve, or not
// on that era: server/discover before 2026-07-28, the handshake, ping,
// logging and subscriptions on it), what the server refuses for an
// undeclared capability (prompts, completion), tasks/* in a batch (the
// dispatcher serves no batch, go-sdk no tasks/*) and the app-only view
// tool, which ui's middleware hides from a client that did not declare
// the view (none here); one for everything else.
func wantRuns(m wireMethod, era string, batch bool) (runs int64, exact bool) {
	modern := era == "2026-07-28"
	switch {
	case strings.HasPrefix(m.method, "notifications/"):
		return 1, false
	case m.method == "tasks/list" || m.method == "tasks/result" || m.method == "no/such/method",
		strings.HasPrefix(m.method, "prompts/") || strings.HasPrefix(m.method, "completion/"),
		m.method == "server/discover" && !modern,
		modern && (m.method == "initialize" || m.method == "ping" || m.method == "logging/setLevel" ||
			m.method == "resources/subscribe" || m.method == "resources/unsubscribe"),
		batch && strings.HasPrefix(m.method, "tasks/"),
		m.name == ui.ViewTool:
		return 0, true
	}
	return 1, true
}

// counted sends one request and requires the edge's counts of it to be
// want: each request admitted once, its Host checked once, parsed once,
// its handler run at most once. Not parallel: the counts are the
// process's.
func counted(t *testing.T, want edgecount.Counts, send func()) {
	t.Helper()
	countedRuns(t, want, true, send)
}

// countedRuns is counted, with handler runs at most want's unless exact.
func countedRuns(t *testing.T, want edgecount.Counts, exact bool, send func()) {
	t.Helper()
	before := edgecount.Now()
	send()
	got := before.Since()
	if !exact && got.Handlers <= want.Handlers {
		got.Handlers = want.Handlers
	}
	if got != want {
		t.Errorf("admissions %d, Host checks %d, parses %d, handler runs %d; want %d, %d, %d, %d",
			got.Admissions, got.HostChecks, got.Parses, got.Handlers, want.Admissions, want.HostChecks, want.Parses, want.Handlers)
	}
}

// TestOneAdmission walks every method and tool (walkedMethods) on every
// era and both transports (HTTP, and stdio as `darkroom stdio` stacks
// it), then the requests that take other turns: the door's refusals (a
// foreign Host, no credential, a body that is no JSON-RPC, headers that
// disagree with the body, an empty bucket), dry runs and refused creates
// on the lean path and go-sdk's, a create with an input file (the lean
// path's predicate sends it to go-sdk), every read and tasks/get while
// the store fails, and panics in the generate handler on both paths.
// Each request is admitted once, its Host checked once (HTTP), parsed
// once, and its handler run once (none when it is refused before one).
func TestOneAdmission(t *testing.T) {
	s := admissionServer(t, nil, 0)
	methods := walkedMethods(t, s.app.tools.Names())
	for _, era := range walkEras {
		for _, m := range methods {
			kinds := []bool{false}
			if era == "2025-03-26" {
				kinds = append(kinds, true) // a one-message batch too
			}
			for _, batch := range kinds {
				t.Run(fmt.Sprintf("http/%s/%s/%s/batch=%v", era, m.method, m.name, batch), func(t *testing.T) {
					msg := httpMessage(m, era, !m.notification, 1)
					runs, exact := wantRuns(m, era, batch)
					countedRuns(t, edgecount.Counts{Admissions: 1, HostChecks: 1, Parses: 1, Handlers: runs}, exact,
						func() { postWalk(t, s.url, admissionKey, era, m, msg, batch) })
				})
			}
		}
	}
	for _, era := range walkEras {
		t.Run("stdio/"+era, func(t *testing.T) {
			c := limit.NewClasses(limit.Options{})
			c.Poll.Rate, c.Poll.Burst = 1e6, 1e6
			c.Create.Rate, c.Create.Burst = 1e6, 1e6
			c.Bytes.Rate, c.Bytes.Burst = 1<<40, 1<<40
			conn := stdioWalk(t, s.app, c)
			one := edgecount.Counts{Admissions: 1, Parses: 1, Handlers: 1}
			if era != "2026-07-28" {
				init, _ := json.Marshal(map[string]any{"protocolVersion": era, "capabilities": map[string]any{},
					"clientInfo": map[string]any{"name": "walk", "version": "1"}})
				counted(t, one, func() { stdioSend(t, conn, &jsonrpc.Request{ID: rpcID(100), Method: "initialize", Params: init}) })
				// A notification has no answer to wait for: it is counted
				// with the ping answered after it.
				counted(t, edgecount.Counts{Admissions: 2, Parses: 2, Handlers: 2}, func() {
					stdioSend(t, conn, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
					stdioSend(t, conn, &jsonrpc.Request{ID: rpcID(101), Method: "ping", Params: json.RawMessage(`{}`)})
				})
			}
			for i, m := range methods {
				if strings.HasPrefix(m.method, "notifications/") || m.method == "initialize" {
					continue // answered by nothing to wait for (or already sent)
				}
				p, _ := json.Marshal(withMeta(m, era))
				req := &jsonrpc.Request{ID: rpcID(int64(i + 1)), Method: m.method, Params: p}
				runs, exact := wantRuns(m, era, false)
				countedRuns(t, edgecount.Counts{Admissions: 1, Parses: 1, Handlers: runs}, exact, func() { stdioSend(t, conn, req) })
			}
		})
	}

	// The door's refusals: nothing past the refusing layer runs.
	gen := wireMethod{method: "tools/call", name: "get_generation", params: map[string]any{"name": "get_generation", "arguments": map[string]any{"generationId": generation.NewID()}}}
	for _, c := range []struct {
		name   string
		want   edgecount.Counts
		status int
		req    func() *http.Request
	}{
		{"foreign Host", edgecount.Counts{HostChecks: 1}, http.StatusForbidden, func() *http.Request {
			r := walkRequest(s.url, admissionKey, "2026-07-28", gen, httpMessage(gen, "2026-07-28", true, 1))
			r.Host = "evil.example"
			return r
		}},
		{"no credential", edgecount.Counts{HostChecks: 1}, http.StatusUnauthorized, func() *http.Request {
			return walkRequest(s.url, "", "2026-07-28", gen, httpMessage(gen, "2026-07-28", true, 1))
		}},
		{"not JSON", edgecount.Counts{Admissions: 1, HostChecks: 1, Parses: 1}, http.StatusBadRequest, func() *http.Request {
			return walkRequest(s.url, admissionKey, "2025-06-18", gen, []byte(`{"jsonrpc":`))
		}},
		{"Mcp-Name disagrees with the body", edgecount.Counts{Admissions: 1, HostChecks: 1, Parses: 1}, http.StatusBadRequest, func() *http.Request {
			r := walkRequest(s.url, admissionKey, "2026-07-28", gen, httpMessage(gen, "2026-07-28", true, 1))
			r.Header.Set("Mcp-Name", "get_credits")
			return r
		}},
	} {
		t.Run("refused/"+c.name, func(t *testing.T) {
			counted(t, c.want, func() {
				if code, body := doWalk(t, c.req()); code != c.status {
					t.Errorf("HTTP %d %s; want %d", code, body, c.status)
				}
			})
		})
	}
	t.Run("refused/an empty bucket", func(t *testing.T) {
		limited := admissionServer(t, nil, 1)
		ping := wireMethod{method: "ping", params: map[string]any{}}
		postWalk(t, limited.url, admissionKey, "2026-07-28", ping, httpMessage(ping, "2026-07-28", true, 1), false)
		counted(t, edgecount.Counts{Admissions: 1, HostChecks: 1, Parses: 1}, func() {
			if code, body := postWalk(t, limited.url, admissionKey, "2026-07-28", ping, httpMessage(ping, "2026-07-28", true, 2), false); code != http.StatusTooManyRequests {
				t.Errorf("HTTP %d %s; want 429", code, body)
			}
		})
	})

	// Creates that end without a generation, on each path: a Tasks
	// client's (lean), a 2026-07-28 client's without the extension and
	// a legacy one's (go-sdk).
	img := map[string]any{"data": base64.StdEncoding.EncodeToString(emulator.PNG()), "mimeType": "image/png"}
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"dry run", map[string]any{"modelId": "local-sketch", "prompt": "a kite", "dryRun": true}},
		{"unknown model", map[string]any{"modelId": "no-such-model", "prompt": "a kite"}},
		{"unknown argument", map[string]any{"modelId": "local-sketch", "prompt": "a kite", "colour": "red"}},
		{"input image, dry run", map[string]any{"modelId": "local-photo", "prompt": "warmer", "inputImage": img, "dryRun": true}},
	} {
		for _, era := range []string{"2026-07-28 tasks", "2026-07-28", "2025-06-18"} {
			t.Run(fmt.Sprintf("generate/%s/%s", c.name, era), func(t *testing.T) {
				m := wireMethod{method: "tools/call", name: "generate", params: map[string]any{"name": "generate", "arguments": c.args}}
				counted(t, edgecount.Counts{Admissions: 1, HostChecks: 1, Parses: 1, Handlers: 1}, func() {
					if code, body := postEraWithCaps(t, s.url, era, m); code != http.StatusOK {
						t.Errorf("HTTP %d %s", code, body)
					}
				})
			})
		}
	}

	// Panics in generate's handler, after it stored the generation.
	t.Run("panic", func(t *testing.T) {
		var armed atomic.Bool
		var panicked atomic.Int64
		ps := admissionServer(t, slog.New(panicOnCreate{&armed, &panicked}), 0)
		m := wireMethod{method: "tools/call", name: "generate", params: map[string]any{"name": "generate",
			"arguments": map[string]any{"modelId": "local-sketch", "prompt": "boom"}}}
		for _, era := range []string{"2026-07-28 tasks", "2026-07-28", "2025-06-18"} {
			t.Run(era, func(t *testing.T) {
				armed.Store(true)
				defer armed.Store(false)
				before := panicked.Load()
				counted(t, edgecount.Counts{Admissions: 1, HostChecks: 1, Parses: 1, Handlers: 1}, func() {
					_, body := postEraWithCaps(t, ps.url, era, m)
					if !strings.Contains(string(body), tasks.PanicMessage) {
						t.Errorf("answered %s; want the panic's -32603", body)
					}
				})
				if n := panicked.Load() - before; n != 1 {
					t.Errorf("%d panics; want 1", n)
				}
			})
		}
	})

	// The store fails (the database closed under the server): every read
	// is answered -32603 once, on the lean path too, never handed to
	// go-sdk to read the store again.
	t.Run("failing store", func(t *testing.T) {
		fs := admissionServer(t, nil, 0)
		if err := fs.app.db.Close(); err != nil {
			t.Fatal(err)
		}
		id := generation.NewID()
		reads := []wireMethod{
			{method: "tasks/get", name: id, params: map[string]any{"taskId": id}},
			{method: "resources/read", name: "darkroom://generations/" + id + "/outputs/0", params: map[string]any{"uri": "darkroom://generations/" + id + "/outputs/0"}},
			{method: "tools/call", name: "generate", params: map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": "a kite"}}},
		}
		for _, tool := range fs.app.tools.Table() {
			if tool.Read != nil && tool.Lean == nil { // the view's is for a client that declared it: the walk's path
				args := map[string]any{"generationId": id}
				if tool.Def.Name == "get_credits" || tool.Def.Name == "list_generations" {
					args = map[string]any{}
				}
				reads = append(reads, wireMethod{method: "tools/call", name: tool.Def.Name, params: map[string]any{"name": tool.Def.Name, "arguments": args}})
			}
		}
		for _, m := range reads {
			for _, era := range []string{"2026-07-28 tasks", "2026-07-28", "2025-06-18"} {
				if m.method == "tasks/get" && era != "2026-07-28 tasks" {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%s", m.method, m.name, era), func(t *testing.T) {
					counted(t, edgecount.Counts{Admissions: 1, HostChecks: 1, Parses: 1, Handlers: 1}, func() {
						_, body := postEraWithCaps(t, fs.url, era, m)
						if !strings.Contains(string(body), "-32603") && !strings.Contains(string(body), `"isError":true`) {
							t.Errorf("answered %s; want an internal error", body)
						}
					})
				})
			}
		}
	})
}

// postEraWithCaps posts m on era; "2026-07-28 tasks" is that era with the
// Tasks extension declared.
func postEraWithCaps(t *testing.T, base, era string, m wireMethod) (int, []byte) {
	t.Helper()
	switch era {
	case "2026-07-28 tasks": // withMeta declares the extension
		return postWalk(t, base, admissionKey, "2026-07-28", m, httpMessage(m, "2026-07-28", true, 1), false)
	case "2026-07-28":
		p := map[string]any{"_meta": modernMeta(map[string]any{})}
		for k, v := range m.params {
			p[k] = v
		}
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": m.method, "params": p})
		return postWalk(t, base, admissionKey, era, m, msg, false)
	}
	return postWalk(t, base, admissionKey, era, m, httpMessage(m, era, true, 1), false)
}

// walkRequest is postWalk's request, to change before it is sent.
func walkRequest(base, token, era string, m wireMethod, body []byte) *http.Request {
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("MCP-Protocol-Version", era)
	if era == "2026-07-28" {
		req.Header.Set("Mcp-Method", m.method)
		if m.name != "" {
			req.Header.Set("Mcp-Name", m.name)
		}
	}
	return req
}

func doWalk(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
