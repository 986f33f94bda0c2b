package main

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// leanPost is one raw tools/call as a client of some era sends it.
type leanPost struct {
	version string            // Mcp-Protocol-Version ("" none)
	meta    map[string]any    // params._meta (nil: none)
	params  map[string]any    // extra params
	headers map[string]string // extra headers
	id      any
}

// post sends p for tool with args to url and returns the JSON-RPC message
// of the answer and whether it came as plain JSON (the lean path) rather
// than go-sdk's SSE.
func (p leanPost) post(t *testing.T, url, tool string, args any) (string, bool) {
	t.Helper()
	params := map[string]any{"name": tool}
	if args != nil {
		params["arguments"] = args
	}
	return p.postRPC(t, url, "tools/call", tool, params)
}

// TestLeanReadsAnswerAsGoSDK: get_generation, list_generations,
// download_output and get_credits are answered below go-sdk on the
// 2026-07-28 wire and the legacy stateless eras with exactly the bytes
// go-sdk sends for the same request (the same app served without the
// dispatcher), and every request the lean path cannot match reaches
// go-sdk.
func TestLeanReadsAnswerAsGoSDK(t *testing.T) {
	s := startServer(t, 1, func(c *config) {
		c.PollRate, c.PollBurst = 1e6, 1_000_000
		c.CreateRate, c.CreateBurst = 1e6, 1_000_000
		b := int64(1000)
		c.DailyBudget = &b
	})
	sdk := sdkOracle(t, s)

	c := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	gen := func(model, prompt string) string {
		r := c.tool("generate", map[string]any{"modelId": model, "prompt": prompt})
		return r.Result["structuredContent"].(map[string]any)["generationId"].(string)
	}
	done, failed, running := gen("local-sketch", "done"), gen("local-sketch", "no [fail]"), gen("local-motion", "long [slow]")
	for _, id := range []string{done, failed} {
		c.tool("wait_generation", map[string]any{"generationId": id, "timeoutSeconds": 30})
	}

	modern := func(caps map[string]any) map[string]any {
		return map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
	}
	withTasksCaps := map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	eras := []struct {
		name string
		leanPost
		lean bool
	}{
		{"2026-07-28", leanPost{version: "2026-07-28", meta: modern(map[string]any{})}, true},
		{"2026-07-28 Tasks client", leanPost{version: "2026-07-28", meta: modern(withTasksCaps)}, true},
		{"2026-07-28 clientInfo", leanPost{version: "2026-07-28", meta: merged(modern(map[string]any{}), "io.modelcontextprotocol/clientInfo", map[string]any{"name": "x", "version": "1"})}, true},
		{"2026-07-28 string id", leanPost{version: "2026-07-28", meta: modern(map[string]any{}), id: "req-1"}, true},
		{"2025-11-25", leanPost{version: "2025-11-25"}, true},
		{"2025-06-18", leanPost{version: "2025-06-18"}, true},
		{"2025-03-26", leanPost{version: "2025-03-26"}, true},
		{"2024-11-05", leanPost{version: "2024-11-05"}, true},
		{"no version header", leanPost{}, true},
		{"legacy string id", leanPost{version: "2025-06-18", id: "a-1"}, true},
		// go-sdk's, all of them:
		{"legacy progressToken", leanPost{version: "2025-11-25", meta: map[string]any{"progressToken": 3}}, false},
		{"legacy task param (go-sdk ignores it)", leanPost{version: "2025-11-25", params: map[string]any{"task": map[string]any{"ttl": 1000}}}, true},
		{"legacy inputResponses", leanPost{version: "2025-11-25", params: map[string]any{"inputResponses": map[string]any{}}}, false},
		{"2026-07-28 requestState", leanPost{version: "2026-07-28", meta: modern(map[string]any{}), params: map[string]any{"requestState": "x"}}, false},
		{"2026-07-28 bad clientInfo", leanPost{version: "2026-07-28", meta: merged(modern(map[string]any{}), "io.modelcontextprotocol/clientInfo", "me")}, false},
		{"2026-07-28 base64 Mcp-Name", leanPost{version: "2026-07-28", meta: modern(map[string]any{}), headers: map[string]string{"Mcp-Name": "=?base64?Z2V0X2NyZWRpdHM=?="}}, false},
		{"unknown version", leanPost{version: "2099-01-01"}, false},
		{"float id", leanPost{version: "2025-06-18", id: 4.5}, false},
		{"escaped string id", leanPost{version: "2025-06-18", id: "é"}, false},
		{"Last-Event-ID", leanPost{version: "2025-06-18", headers: map[string]string{"Last-Event-ID": "1"}}, false},
	}
	calls := []struct {
		tool string
		args any
	}{
		{"get_generation", map[string]any{"generationId": running}},
		{"get_generation", map[string]any{"generationId": done}},
		{"get_generation", map[string]any{"generationId": failed}},
		{"get_generation", map[string]any{"generationId": "nope"}},
		{"get_generation", map[string]any{"generationId": 5}},
		{"get_generation", map[string]any{}},
		{"get_generation", map[string]any{"generationId": strings.Repeat("x", 500)}},
		{"get_generation", nil},
		{"get_generation", "not an object"},
		{"list_generations", map[string]any{}},
		{"list_generations", map[string]any{"limit": 1}},
		{"list_generations", map[string]any{"limit": 0}},
		{"list_generations", map[string]any{"status": "completed"}},
		{"list_generations", map[string]any{"cursor": "garbage"}},
		{"download_output", map[string]any{"generationId": done}},
		{"download_output", map[string]any{"generationId": done, "index": 3}},
		{"download_output", map[string]any{"generationId": running}},
		{"download_output", map[string]any{"generationId": failed}},
		{"get_credits", map[string]any{}},
		{"get_credits", nil},
	}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			for _, call := range calls {
				// Links and progress move with the clock: equal once in
				// a few tries is equal.
				var l, g string
				var served bool
				for range 5 {
					l, served = era.post(t, s.url, call.tool, call.args)
					var bypassed bool
					g, bypassed = era.post(t, sdk.URL, call.tool, call.args)
					if bypassed {
						t.Fatalf("the go-sdk server answered below go-sdk: %s", g)
					}
					if l == g {
						break
					}
				}
				if want := era.lean && call.args != "not an object"; served != want {
					t.Errorf("%s %v: served below go-sdk %v, want %v: %s", call.tool, call.args, served, want, l)
				}
				if l != g {
					t.Errorf("%s %v: answers differ:\n lean:   %s\n go-sdk: %s", call.tool, call.args, l, g)
				}
			}
		})
	}
}

func merged(m map[string]any, k string, v any) map[string]any {
	m[k] = v
	return m
}

// TestLeanReadsMetrics: a poll answered below go-sdk is counted with its
// true outcome (the dispatcher tells the metrics recorder, which does not
// parse the reply): a result, a tool error, and the same over go-sdk; and
// each request under the engine that answered it.
func TestLeanReadsMetrics(t *testing.T) {
	s := startServer(t, 1)
	c := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	id := c.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "counted"}).Result["structuredContent"].(map[string]any)["generationId"].(string)
	modern := leanPost{version: "2026-07-28", meta: map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}
	for _, p := range []struct {
		post leanPost
		args map[string]any
		lean bool
	}{
		{modern, map[string]any{"generationId": id}, true},
		{modern, map[string]any{"generationId": "nope"}, true},
		{leanPost{version: "2025-06-18"}, map[string]any{"generationId": "nope"}, true},
		{leanPost{version: "2025-06-18", meta: map[string]any{"progressToken": 1}}, map[string]any{"generationId": "nope"}, false},
	} {
		if _, served := p.post.post(t, s.url, "get_generation", p.args); served != p.lean {
			t.Fatalf("%+v: served below go-sdk %v, want %v", p, served, p.lean)
		}
	}
	fams := scrape(t, s.app.metricsHandler(), "")
	checkSeries(t, fams, []series{
		{"darkroom_requests_total", l("transport", "http", "method", "tools/call", "tool", "get_generation", "outcome", "ok"), 1},
		{"darkroom_requests_total", l("transport", "http", "method", "tools/call", "tool", "get_generation", "outcome", "tool_error"), 3},
		// Which engine answered: the three polls below go-sdk, the
		// generate (no Tasks extension) and the poll with a progressToken
		// by go-sdk.
		{"darkroom_requests_by_path_total", l("transport", "http", "path", "lean"), 3},
		{"darkroom_requests_by_path_total", l("transport", "http", "path", "go-sdk"), 2},
	})
}

// TestLeanGenerateDecidesFromKeys: a Tasks client's generate is served
// below go-sdk unless its arguments carry an input image (inputImage or
// inputs keys); a prompt whose text is "inputImage" is served lean (it
// was decided by searching the raw bytes).
func TestLeanGenerateDecidesFromKeys(t *testing.T) {
	s := startServer(t, 1)
	tasksPost := leanPost{version: "2026-07-28", meta: map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": withTasks()}}
	img := map[string]any{"data": base64.StdEncoding.EncodeToString(emulator.PNG()), "mimeType": "image/png"}
	for _, c := range []struct {
		name string
		args map[string]any
		lean bool
	}{
		{"prompt only", map[string]any{"modelId": "local-sketch", "prompt": "a kite"}, true},
		{"a prompt that is the key's name", map[string]any{"modelId": "local-sketch", "prompt": "inputImage"}, true},
		{"a negative prompt that is the other's", map[string]any{"modelId": "local-sketch", "prompt": "a kite", "negativePrompt": "inputs"}, true},
		{"an input image", map[string]any{"modelId": "local-photo", "prompt": "warmer", "inputImage": img}, false},
		{"inputs", map[string]any{"modelId": "local-photo", "prompt": "warmer", "inputs": []any{map[string]any{"role": "image", "image": img}}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if body, served := tasksPost.post(t, s.url, "generate", c.args); served != c.lean {
				t.Fatalf("served below go-sdk %v, want %v: %s", served, c.lean, body)
			}
		})
	}
}
