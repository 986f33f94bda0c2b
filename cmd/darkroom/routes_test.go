package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawPost is one POST to /mcp exactly as given.
type rawPost struct {
	headers map[string]string
	body    string
	status  int // expected HTTP status
}

// refusedInTx is an expected status: the creating transaction refused the
// create rate and go-sdk answered, HTTP 200 carrying the -31429 error
// with retryAfterMs (the lean path answers 429 itself, as the admission's
// flood guard does).
const refusedInTx = -429

const (
	modernCaps  = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	testMaxBody = 64 << 10
)

// callBody is a tools/call of tool (arguments args) with an optional _meta
// of version and caps ("" leaves _meta out); extra is spliced into params.
func callBody(id int, method, tool, version, caps, extra string) string {
	params := `"name":"` + tool + `","arguments":{"modelId":"local-sketch","prompt":"route"}`
	if tool == "" {
		params = `"x":1`
	}
	if version != "" {
		params += `,"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	params += extra
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"%s","params":{%s}}`, id, method, params)
}

func genModern(id int, caps string) string {
	return callBody(id, "tools/call", "generate", "2026-07-28", caps, "")
}

func genLegacy(id int) string { return callBody(id, "tools/call", "generate", "", "", "") }

func modernHeaders(method, name string) map[string]string {
	return map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}
}

// TestGenerateMeetsTheCreateLimitOnEveryRoute: with a create burst of one,
// every way of reaching generate (both eras, both paths below and through
// go-sdk, lying headers, batches, key-case tricks, bodies that hide a second
// request) either is charged as a creation or is refused before anything
// runs and costs nothing. Each route is its own caller (API key), so its
// bucket starts full. The creating transaction decides the rate (a second
// generate: 429 on the lean path, refusedInTx where go-sdk answers); the
// door's flood guard (4x the burst) refuses a batch beyond it whole.
func TestGenerateMeetsTheCreateLimitOnEveryRoute(t *testing.T) {
	pad := strings.Repeat(" ", testMaxBody) // whitespace JSON allows before a value
	routes := []struct {
		name  string
		posts []rawPost
		gens  int // generations created in the end
	}{
		{"2026-07-28 Tasks client (lean path below go-sdk)", []rawPost{
			{modernHeaders("tools/call", "generate"), genModern(1, modernCaps), 200},
			{modernHeaders("tools/call", "generate"), genModern(2, modernCaps), 429},
		}, 1},
		{"2026-07-28 without the extension (go-sdk)", []rawPost{
			{modernHeaders("tools/call", "generate"), genModern(1, `{}`), 200},
			{modernHeaders("tools/call", "generate"), genModern(2, `{}`), refusedInTx},
		}, 1},
		{"2026-07-28 MRTR retry form (go-sdk)", []rawPost{
			{modernHeaders("tools/call", "generate"), callBody(1, "tools/call", "generate", "2026-07-28", `{}`, `,"requestState":"x","inputResponses":{}`), 200},
			{modernHeaders("tools/call", "generate"), genModern(2, modernCaps), 429},
		}, 1},
		{"legacy, no version header, Mcp-Method claims tools/list", []rawPost{
			{map[string]string{"Mcp-Method": "tools/list"}, genLegacy(1), 200},
			{map[string]string{"Mcp-Method": "tools/list"}, genLegacy(2), refusedInTx},
		}, 1},
		{"legacy 2025-06-18, Mcp-Name claims list_models", []rawPost{
			{map[string]string{"MCP-Protocol-Version": "2025-06-18", "Mcp-Method": "tools/call", "Mcp-Name": "list_models"}, genLegacy(1), 200},
			{map[string]string{"MCP-Protocol-Version": "2025-06-18", "Mcp-Method": "tasks/get", "Mcp-Name": "x"}, genLegacy(2), refusedInTx},
		}, 1},
		{"legacy 2025-03-26 batch of five generates (over the flood guard's burst: refused whole)", []rawPost{
			{nil, "[" + genLegacy(1) + "," + genLegacy(2) + "," + genLegacy(3) + "," + genLegacy(4) + "," + genLegacy(5) + "]", 429},
			{nil, "[" + genLegacy(6) + "]", 200},
			{nil, "[" + callBody(7, "tools/call", "list_models", "", "", "") + "," + genLegacy(8) + "]", refusedInTx},
		}, 1},
		{"name key in another case: go-sdk runs params.name", []rawPost{
			{nil, callBody(1, "tools/call", "generate", "", "", `,"NAME":"list_models"`), 200},
			{nil, callBody(2, "tools/call", "generate", "", "", `,"Name":"list_models"`), refusedInTx},
		}, 1},
		{"name key in another case: list_models runs, nothing charged", []rawPost{
			{nil, callBody(1, "tools/call", "list_models", "", "", `,"NAME":"generate"`), 200},
			{nil, callBody(2, "tools/call", "list_models", "", "", `,"NAME":"generate"`), 200},
			{nil, genLegacy(3), 200},
		}, 1},
		{"2026-07-28, Mcp-Name lies: refused, costs nothing", []rawPost{
			{modernHeaders("tools/call", "list_models"), genModern(1, modernCaps), 400},
			{modernHeaders("tools/call", "generate"), genModern(2, modernCaps), 200},
		}, 1},
		{"2026-07-28, Mcp-Method lies: refused, costs nothing", []rawPost{
			{modernHeaders("tasks/get", "generate"), genModern(1, modernCaps), 400},
			{modernHeaders("tools/call", "generate"), genModern(2, modernCaps), 200},
		}, 1},
		{"2026-07-28 body under a legacy version header: refused, costs nothing", []rawPost{
			{map[string]string{"MCP-Protocol-Version": "2025-06-18"}, genModern(1, modernCaps), 400},
			{nil, genModern(2, modernCaps), 400},
			{modernHeaders("tools/call", "generate"), genModern(3, modernCaps), 200},
		}, 1},
		{"trailing data after the message: -32700, costs nothing", []rawPost{
			{nil, genLegacy(1) + ` {"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 400},
			{nil, callBody(1, "tools/call", "list_models", "", "", "") + genLegacy(2), 400},
			{nil, genLegacy(3) + "x", 400},
			{nil, genLegacy(4), 200},
		}, 1},
		{"over the cap, a request after the padding: 413, nothing runs", []rawPost{
			{nil, pad + genLegacy(1), 413},
			{map[string]string{"Mcp-Method": "tools/list"}, pad + genLegacy(2), 413},
			{nil, genLegacy(3), 200},
		}, 1},
		{"notification form: never run, costs nothing", []rawPost{
			{nil, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"generate","arguments":{"modelId":"local-sketch","prompt":"n"}}}`, 0},
			{nil, genLegacy(2), 200},
		}, 1},
	}
	var keyList []string
	for i := range routes {
		keyList = append(keyList, fmt.Sprintf("r%d=secret-route-%04d", i, i))
	}
	keys, err := auth.ParseKeyList(strings.Join(keyList, ","), "test")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, 0, func(c *config) {
		c.Auth = auth.Config{Keys: keys}
		c.CreateRate, c.CreateBurst = 1e-6, 1
		c.MaxBodyBytes = testMaxBody
	})
	for i, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			for j, p := range r.posts {
				status, body := postAs(t, s.url, fmt.Sprintf("secret-route-%04d", i), p)
				if p.status == refusedInTx {
					if status != 200 || !strings.Contains(string(body), fmt.Sprint(ratelimited.Code)) || !strings.Contains(string(body), "retryAfterMs") {
						t.Fatalf("post %d: HTTP %d %s, want 200 with the -31429 error", j, status, body)
					}
					continue
				}
				if p.status != 0 && status != p.status {
					t.Fatalf("post %d: HTTP %d %s, want %d", j, status, body, p.status)
				}
				if status == 429 && !strings.Contains(string(body), fmt.Sprint(ratelimited.Code)) {
					t.Fatalf("post %d: 429 without the -31429 error: %s", j, body)
				}
			}
			gens, _, err := s.app.svc.List(context.Background(), keys[i].Principal().ID, "", "", 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(gens) != r.gens {
				t.Fatalf("%d generations created, want %d", len(gens), r.gens)
			}
		})
	}
}

func postAs(t *testing.T, base, token string, p rawPost) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(p.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range p.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// stdioSession connects a client to the app as `darkroom stdio` serves it
// (limits inside the tasks dispatcher's transport), over in-memory pipes.
func stdioSession(t *testing.T, a *app) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	limited := server.LimitTransport(st, a.limits, a.tools.RateClass, server.LocalPrincipal)
	ss, err := a.mcp.Connect(context.Background(), a.tasks.Transport(limited, server.LocalPrincipal), nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

// TestStdioMeetsTheSameLimits: on stdio the local user draws from the same
// per-principal buckets: a second generate and a poll over the burst are
// answered -31429 with retryAfterMs, and nothing is created for them.
// The session's opening (server/discover) is charged too, as every
// method is.
func TestStdioMeetsTheSameLimits(t *testing.T) {
	s := startServer(t, 0, func(c *config) {
		c.CreateRate, c.CreateBurst = 1e-6, 1
		c.PollRate, c.PollBurst = 1e-6, 3 // the opening server/discover and two polls
	})
	cs := stdioSession(t, s.app)
	ctx := context.Background()
	gen := &mcp.CallToolParams{Name: "generate", Arguments: map[string]any{"modelId": "local-sketch", "prompt": "stdio"}}
	res, err := cs.CallTool(ctx, gen)
	if err != nil || res.IsError {
		t.Fatalf("first generate: %v %+v", err, res)
	}
	var g struct {
		GenerationID string `json:"generationId"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &g)
	_, err = cs.CallTool(ctx, gen)
	assertRateLimited(t, "second generate", err)
	for i := range 2 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_generation", Arguments: map[string]any{"generationId": g.GenerationID}}); err != nil {
			t.Fatalf("poll %d: %v", i, err)
		}
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_generation", Arguments: map[string]any{"generationId": g.GenerationID}})
	assertRateLimited(t, "third poll", err)
	// Every method is charged: list_models too.
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_models", Arguments: map[string]any{}})
	assertRateLimited(t, "list_models over the burst", err)
	gens, _, _ := s.app.svc.List(ctx, server.LocalPrincipal, "", "", 100)
	if len(gens) != 1 {
		t.Fatalf("%d generations, want 1", len(gens))
	}
}

func assertRateLimited(t *testing.T, what string, err error) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != ratelimited.Code || !strings.Contains(string(je.Data), "retryAfterMs") {
		t.Fatalf("%s: %v, want the -31429 error with retryAfterMs", what, err)
	}
}

// TestUndeclaredCapabilitiesAreNotFound: prompts/*, resources/subscribe and
// completion/complete answer -32601 on every era and transport (404 on
// 2026-07-28), since darkroom declares none of them (resources without
// subscribe: see TestOutputResources).
func TestUndeclaredCapabilitiesAreNotFound(t *testing.T) {
	s := startServer(t, 0)
	methods := []string{"prompts/list", "prompts/get", "resources/subscribe", "completion/complete"}
	for _, m := range methods {
		t.Run("2026-07-28 "+m, func(t *testing.T) {
			name := ""
			extra := `,"name":"p","uri":"file:///x","ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"v"}`
			if m == "prompts/get" {
				name = "p"
			} else if m == "resources/read" {
				name = "file:///x"
			}
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":9,"method":"%s","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}%s}}`, m, extra)
			status, b := postAs(t, s.url, "", rawPost{headers: modernHeaders(m, name), body: body})
			if status != http.StatusNotFound || !strings.Contains(string(b), `-32601`) || !strings.Contains(string(b), `"id":9`) {
				t.Fatalf("HTTP %d %s, want 404 and -32601 echoing the id", status, b)
			}
		})
	}
	ctx := context.Background()
	sessions := map[string]*mcp.ClientSession{"2025-06-18 over HTTP": connect(t, s.url, "2025-06-18"), "stdio": stdioSession(t, s.app)}
	for era, cs := range sessions {
		t.Run(era, func(t *testing.T) {
			calls := map[string]func() error{
				"prompts/list": func() error { _, err := cs.ListPrompts(ctx, nil); return err },
				"prompts/get":  func() error { _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "p"}); return err },
			}
			if era != "stdio" { // go-sdk's client does not send it on 2026-07-28
				calls["resources/subscribe"] = func() error {
					return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "darkroom://generations/x/outputs/0"})
				}
			}
			for m, call := range calls {
				var je *jsonrpc.Error
				if err := call(); !errors.As(err, &je) || je.Code != jsonrpc.CodeMethodNotFound {
					t.Errorf("%s: %v, want -32601", m, err)
				}
			}
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Errorf("tools/list: %v", err)
			}
		})
	}
}

// TestHostCheckOnEveryPath: on a loopback listener a foreign Host is 403
// for requests that never reach go-sdk (tasks/get, the lean generate) as
// for those that do, and nothing runs.
func TestHostCheckOnEveryPath(t *testing.T) {
	s := startServer(t, 0)
	posts := map[string]rawPost{
		"tasks/get": {headers: modernHeaders("tasks/get", "t1"),
			body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + modernCaps + `}}}`},
		"lean generate":   {headers: modernHeaders("tools/call", "generate"), body: genModern(2, modernCaps)},
		"go-sdk generate": {body: genLegacy(3)},
	}
	for name, p := range posts {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(p.body))
			req.Host = "evil.example:80"
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range p.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("HTTP %d, want 403", resp.StatusCode)
			}
		})
	}
	gens, _, _ := s.app.svc.List(context.Background(), server.LocalPrincipal, "", "", 100)
	if len(gens) != 0 {
		t.Fatalf("%d generations created behind a foreign Host", len(gens))
	}
}
