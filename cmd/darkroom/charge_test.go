package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/methods"
	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireMethod is one method as the charging walk sends it.
type wireMethod struct {
	method, name string // name: params.name / uri / taskId, as Mcp-Name carries it
	params       map[string]any
	notification bool // sent without an id (a notification handler)
}

// walkedMethods is every method darkroom or go-sdk answers (each row of
// methods.All, each tool the server lists) and the ones it answers
// -32601 (tasks/list, tasks/result, an unknown method, an unknown tool).
func walkedMethods(t *testing.T, tools []string) []wireMethod {
	t.Helper()
	params := map[string]map[string]any{
		"initialize":              {"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "walk", "version": "1"}},
		"resources/read":          {"uri": "darkroom://generations/g/outputs/0"},
		"resources/subscribe":     {"uri": "darkroom://generations/g/outputs/0"},
		"prompts/get":             {"name": "p"},
		"completion/complete":     {"ref": map[string]any{"type": "ref/prompt", "name": "p"}, "argument": map[string]any{"name": "a", "value": "b"}},
		"logging/setLevel":        {"level": "info"},
		"subscriptions/listen":    {"notifications": map[string]any{"taskIds": []string{"t1", "t2"}}},
		"tasks/get":               {"taskId": "t1"},
		"tasks/update":            {"taskId": "t1", "inputResponses": map[string]any{}},
		"tasks/cancel":            {"taskId": "t1"},
		"notifications/cancelled": {"requestId": 99},
		"notifications/progress":  {"progressToken": "p", "progress": 1},
	}
	var out []wireMethod
	listed := map[string]bool{}
	for _, m := range methods.All {
		listed[m.Name] = true
		if m.Name == "tools/call" {
			continue
		}
		p := params[m.Name]
		if p == nil {
			p = map[string]any{}
		}
		name, _ := p["name"].(string)
		if u, ok := p["uri"].(string); ok {
			name = u
		}
		if id, ok := p["taskId"].(string); ok {
			name = id
		}
		out = append(out, wireMethod{method: m.Name, name: name, params: p, notification: strings.HasPrefix(m.Name, "notifications/")})
	}
	// go-sdk v1.8.0's serverMethodInfos and the tasks dispatcher's methods:
	// the table must list each.
	for _, m := range []string{"completion/complete", "server/discover", "initialize", "ping", "prompts/list", "prompts/get",
		"tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read", "logging/setLevel",
		"resources/subscribe", "subscriptions/listen", "resources/unsubscribe", "notifications/cancelled",
		"notifications/initialized", "notifications/roots/list_changed", "notifications/progress",
		"tasks/get", "tasks/update", "tasks/cancel"} {
		if !listed[m] {
			t.Errorf("internal/methods does not list %s", m)
		}
	}
	for _, tool := range append(tools, "no_such_tool") {
		out = append(out, wireMethod{method: "tools/call", name: tool, params: map[string]any{"name": tool, "arguments": map[string]any{}}})
	}
	for _, m := range []string{"tasks/list", "tasks/result", "no/such/method"} {
		if !listed[m] { // answered -32601: listed or not
			out = append(out, wireMethod{method: m, params: map[string]any{}})
		}
	}
	return out
}

// walkEras are the protocol versions a request may speak: 2026-07-28 with
// its headers and per-request _meta, and the legacy stateless eras.
var walkEras = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// withMeta is m's params, with the 2026-07-28 _meta on that era.
func withMeta(m wireMethod, era string) map[string]any {
	p := map[string]any{}
	for k, v := range m.params {
		p[k] = v
	}
	if era == "2026-07-28" {
		p["_meta"] = modernMeta(map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}})
	}
	return p
}

// TestEveryMethodIsCharged walks every method darkroom or go-sdk answers
// on every era and both transports, as a call (and, for notifications, as
// a notification; on 2025-03-26 also in a batch), each with a fresh
// caller whose buckets hold exactly one token: the message takes it, so
// the next call (the same method, or a ping after a notification) must
// be refused -31429 at the door. A method that reaches its handler
// uncharged leaves the token and the next call passes.
func TestEveryMethodIsCharged(t *testing.T) {
	const cases = 600
	var keyList []string
	for i := range cases {
		keyList = append(keyList, fmt.Sprintf("walk%d=walk-secret-%06d", i, i))
	}
	keys, err := auth.ParseKeyList(strings.Join(keyList, ","), "test")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, 0, func(c *config) {
		c.Auth = auth.Config{Keys: keys}
		c.PollRate, c.PollBurst = 1e-9, 1
		c.CreateRate, c.CreateBurst = 1e-9, 1
		c.ByteRate, c.ByteBurst = 1<<40, 1<<40 // bytes have their own test
	})
	s.app.limits.Create.Scale = 1 // exactly one creation per fresh caller at the door
	methods := walkedMethods(t, s.app.tools.Names())

	next := 0
	token := func() string {
		if next == cases {
			t.Fatal("out of keys: raise cases")
		}
		next++
		return fmt.Sprintf("walk-secret-%06d", next-1)
	}
	// HTTP: each era, each method; a batch on 2025-03-26.
	for _, era := range walkEras {
		for _, m := range methods {
			kinds := []string{"call"}
			if m.notification {
				kinds = []string{"notification"}
			}
			if era == "2025-03-26" {
				kinds = append(kinds, "batch "+kinds[0])
			}
			for _, kind := range kinds {
				t.Run(fmt.Sprintf("http/%s/%s/%s/%s", era, kind, m.method, m.name), func(t *testing.T) {
					tok := token()
					first := httpMessage(m, era, !m.notification, 1)
					second, secondMethod := first, m
					if m.notification {
						secondMethod = wireMethod{method: "ping", params: map[string]any{}}
						second = httpMessage(secondMethod, era, true, 2)
					}
					batch := strings.HasPrefix(kind, "batch")
					postWalk(t, s.url, tok, era, m, first, batch)
					code, body := postWalk(t, s.url, tok, era, secondMethod, second, batch)
					if code != http.StatusTooManyRequests || !strings.Contains(string(body), "-31429") {
						t.Errorf("the call after the caller's only token went was answered %d %s; want 429 -31429", code, body)
					}
				})
			}
		}
	}
	// stdio: a session per case, its buckets fresh; the legacy eras
	// initialize first (charged like everything else), 2026-07-28 sends
	// its _meta on each request.
	for _, era := range walkEras {
		for _, m := range methods {
			kind := "call"
			if m.notification {
				kind = "notification"
			}
			t.Run(fmt.Sprintf("stdio/%s/%s/%s/%s", era, kind, m.method, m.name), func(t *testing.T) {
				var setup []*jsonrpc.Request
				if era != "2026-07-28" {
					init, _ := json.Marshal(map[string]any{"protocolVersion": era, "capabilities": map[string]any{},
						"clientInfo": map[string]any{"name": "walk", "version": "1"}})
					setup = []*jsonrpc.Request{
						{ID: rpcID(100), Method: "initialize", Params: init},
						{Method: "notifications/initialized", Params: json.RawMessage(`{}`)},
					}
				}
				c := limit.NewClasses(limit.Options{})
				c.Poll.Rate, c.Poll.Burst = 1e-9, len(setup)+1
				c.Create.Rate, c.Create.Burst = 1e-9, 1
				c.Bytes.Rate, c.Bytes.Burst = 1<<40, 1<<40
				conn := stdioWalk(t, s.app, c)
				for _, r := range setup {
					stdioSend(t, conn, r)
				}
				p, _ := json.Marshal(withMeta(m, era))
				first := &jsonrpc.Request{Method: m.method, Params: p}
				second := &jsonrpc.Request{ID: rpcID(2), Method: m.method, Params: p}
				if m.notification {
					pp, _ := json.Marshal(withMeta(wireMethod{params: map[string]any{}}, era))
					second = &jsonrpc.Request{ID: rpcID(2), Method: "ping", Params: pp}
				} else {
					first.ID = rpcID(1)
				}
				stdioSend(t, conn, first)
				resp := stdioSend(t, conn, second)
				if resp == nil || resp.Error == nil || !strings.Contains(resp.Error.Error(), "rate limit") {
					t.Errorf("the call after the caller's only token went was answered %+v; want -31429", resp)
				}
			})
		}
	}
}

// httpMessage is m as one JSON-RPC message of era (a call with id, or a
// notification).
func httpMessage(m wireMethod, era string, call bool, id int) []byte {
	msg := map[string]any{"jsonrpc": "2.0", "method": m.method, "params": withMeta(m, era)}
	if call {
		msg["id"] = id
	}
	b, _ := json.Marshal(msg)
	return b
}

// postWalk posts msg (alone, or as a one-element batch) with era's headers.
func postWalk(t *testing.T, base, token, era string, m wireMethod, msg []byte, batch bool) (int, []byte) {
	t.Helper()
	body := msg
	if batch {
		body = append(append([]byte("["), msg...), ']')
	}
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("MCP-Protocol-Version", era)
	if era == "2026-07-28" {
		req.Header.Set("Mcp-Method", m.method)
		if m.name != "" {
			req.Header.Set("Mcp-Name", m.name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// stdioWalk connects a raw client connection to the app as `darkroom
// stdio` serves it (its stdioChain), charged to c.
func stdioWalk(t *testing.T, a *app, c *limit.Classes) mcp.Connection {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := a.mcp.Connect(context.Background(), a.stdioChain(st, c), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ct.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(); _ = ss.Wait() })
	return conn
}

// stdioSend writes r and, for a call, returns its response (skipping the
// notifications before it).
func stdioSend(t *testing.T, conn mcp.Connection, r *jsonrpc.Request) *jsonrpc.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := conn.Write(ctx, r); err != nil {
		t.Fatal(err)
	}
	if !r.IsCall() {
		return nil
	}
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("reading the answer to %s: %v", r.Method, err)
		}
		if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID == r.ID {
			return resp
		}
	}
}

func rpcID(n int64) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(float64(n)) // as the JSON decoder makes them
	return id
}

// TestListenStreamsAreBounded: a caller holds at most DARKROOM_MAX_LISTENS
// open subscriptions/listen streams, on HTTP and on stdio; one more is
// refused at once (HTTP 429 with Retry-After, -31429 with retryAfterMs),
// and a closed stream gives its slot back.
func TestListenStreamsAreBounded(t *testing.T) {
	const maxListens = 3
	s := startServer(t, 0, func(c *config) {
		c.MaxListens = maxListens
		c.PollRate, c.PollBurst = 1e6, 1e6
	})
	_, taskIDs := reservedTasks(t, s.app, 1) // live until approved: the streams stay open
	ext := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	listenBody := rpcBody(9, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": taskIDs}}, ext)

	t.Run("http", func(t *testing.T) {
		post := func(ctx context.Context) *http.Response {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/mcp", strings.NewReader(string(listenBody)))
			for k, v := range rpcHeaders("subscriptions/listen", "", "") {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		var cancels []context.CancelFunc
		for i := range maxListens {
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			resp := post(ctx)
			if resp.StatusCode != 200 {
				t.Fatalf("listen %d: HTTP %d", i, resp.StatusCode)
			}
			// The acknowledgement: the stream holds its slot.
			if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); !strings.HasPrefix(line, "event: message") {
				t.Fatalf("listen %d: %q", i, line)
			}
			defer resp.Body.Close()
		}
		defer func() {
			for _, c := range cancels {
				c()
			}
		}()
		short, stop := context.WithTimeout(context.Background(), 5*time.Second) // an admitted stream would never end
		defer stop()
		resp := post(short)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(b), "-31429") || !strings.Contains(string(b), "retryAfterMs") {
			t.Fatalf("listen %d: HTTP %d Retry-After %q %s; want 429 -31429", maxListens+1, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
		cancels[0]() // one stream closes: its slot comes back once the server sees it gone
		eventually(t, 10*time.Second, func() bool { return s.app.limits.Listens.Held(server.LocalPrincipal) < maxListens },
			"the closed stream's slot to come back")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if resp := post(ctx); resp.StatusCode != 200 {
			t.Fatalf("listen after one closed: HTTP %d", resp.StatusCode)
		} else {
			resp.Body.Close()
		}
	})
	eventually(t, 10*time.Second, func() bool { return s.app.limits.Listens.Held(server.LocalPrincipal) == 0 },
		"the HTTP streams' slots to come back")

	t.Run("stdio", func(t *testing.T) {
		conn := stdioWalk(t, s.app, s.app.limits)
		var params map[string]any
		_ = json.Unmarshal(listenBody, &struct {
			Params *map[string]any `json:"params"`
		}{&params})
		p, _ := json.Marshal(params)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for i := range maxListens + 1 {
			if err := conn.Write(ctx, &jsonrpc.Request{ID: rpcID(int64(i + 1)), Method: "subscriptions/listen", Params: p}); err != nil {
				t.Fatal(err)
			}
		}
		// Three acknowledgements and one refusal, in any order.
		acks, refused := 0, 0
		for acks < maxListens || refused < 1 {
			msg, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("after %d acks, %d refusals: %v", acks, refused, err)
			}
			switch m := msg.(type) {
			case *jsonrpc.Request:
				if m.Method == "notifications/subscriptions/acknowledged" {
					acks++
				}
			case *jsonrpc.Response:
				if m.Error == nil || !strings.Contains(m.Error.Error(), "too many open subscriptions/listen") {
					t.Fatalf("a listen was answered %+v", m)
				}
				refused++
			}
		}
		if acks != maxListens || refused != 1 {
			t.Fatalf("%d acks and %d refusals, want %d and 1", acks, refused, maxListens)
		}
	})
}
