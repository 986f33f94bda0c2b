package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// postRPC sends one raw request for method with params as p's era sends
// it; the reply as leanPost.post reports it. name is the Mcp-Name.
func (p leanPost) postRPC(t *testing.T, url, method, name string, params map[string]any) (string, bool) {
	t.Helper()
	params = mapsClone(params)
	if p.meta != nil {
		params["_meta"] = p.meta
	}
	for k, v := range p.params {
		params[k] = v
	}
	id := p.id
	if id == nil {
		id = 41
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, _ := http.NewRequest("POST", url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if p.version != "" {
		req.Header.Set("Mcp-Protocol-Version", p.version)
	}
	if p.version >= "2026-07-28" {
		req.Header.Set("Mcp-Method", method)
		req.Header.Set("Mcp-Name", name)
	}
	for k, v := range p.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: read: %v", method, err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return fmt.Sprintf("%d %s", resp.StatusCode, raw), resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == "application/json"
	}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			last = d
		}
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, last), false
}

func mapsClone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestLeanBytesAnswerAsGoSDK: resources/read of an output and
// view_generation with output are answered below go-sdk, their bytes
// streamed, on the 2026-07-28 wire and the legacy stateless eras, with
// exactly the bytes go-sdk sends for the same request (the same app
// served without the dispatcher); the 2026-only ttlMs/cacheScope reach
// 2026-07-28 clients only; and what the lean path cannot match reaches
// go-sdk.
func TestLeanBytesAnswerAsGoSDK(t *testing.T) {
	s := startServer(t, 0, func(c *config) {
		c.PollRate, c.PollBurst = 1e6, 1_000_000
	})
	sdk := sdkOracle(t, s)
	c := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	gen := func(model, prompt string) string {
		r := c.tool("generate", map[string]any{"modelId": model, "prompt": prompt, "wait": true, "waitSeconds": 30})
		return r.Result["structuredContent"].(map[string]any)["generationId"].(string)
	}
	done, failed := gen("local-sketch", "bytes"), gen("local-sketch", "no [fail]")
	uri := "darkroom://generations/" + done + "/outputs/0"
	uiCaps := map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/ui": map[string]any{"mimeTypes": []any{"text/html;profile=mcp-app"}}}}
	modern := func(caps map[string]any) map[string]any {
		return map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
	}
	eras := []struct {
		name string
		leanPost
		lean bool
	}{
		{"2026-07-28 viewer", leanPost{version: "2026-07-28", meta: modern(uiCaps)}, true},
		{"2026-07-28", leanPost{version: "2026-07-28", meta: modern(map[string]any{})}, true},
		{"2026-07-28 string id", leanPost{version: "2026-07-28", meta: modern(uiCaps), id: "r-1"}, true},
		{"2025-11-25", leanPost{version: "2025-11-25"}, true},
		{"2025-06-18", leanPost{version: "2025-06-18"}, true},
		{"2025-03-26", leanPost{version: "2025-03-26"}, true},
		{"2024-11-05", leanPost{version: "2024-11-05"}, true},
		{"no version header", leanPost{}, true},
		// go-sdk's:
		{"legacy progressToken", leanPost{version: "2025-11-25", meta: map[string]any{"progressToken": 3}}, false},
		{"2026-07-28 lying Mcp-Method", leanPost{version: "2026-07-28", meta: modern(uiCaps), headers: map[string]string{"Mcp-Method": "tasks/get"}}, false},
		{"2026-07-28 lying Mcp-Name", leanPost{version: "2026-07-28", meta: modern(uiCaps), headers: map[string]string{"Mcp-Name": "get_credits"}}, false},
		{"unknown version", leanPost{version: "2099-01-01"}, false},
		{"float id", leanPost{version: "2025-06-18", id: 4.5}, false},
	}
	type req struct {
		method, name string
		params       map[string]any
		bytes        bool // a blob is streamed (when the lean path serves it)
	}
	view := func(args map[string]any) req {
		return req{"tools/call", "view_generation", map[string]any{"name": "view_generation", "arguments": args}, args["output"] != nil}
	}
	reqs := []req{
		{"resources/read", uri, map[string]any{"uri": uri}, true},
		{"resources/read", "darkroom://generations/" + done + "/outputs/1", map[string]any{"uri": "darkroom://generations/" + done + "/outputs/1"}, false},
		{"resources/read", "darkroom://generations/" + failed + "/outputs/0", map[string]any{"uri": "darkroom://generations/" + failed + "/outputs/0"}, false},
		{"resources/read", "darkroom://nope", map[string]any{"uri": "darkroom://nope"}, false},
		view(map[string]any{"generationId": done, "output": 0}),
		view(map[string]any{"generationId": done}),
		view(map[string]any{"generationId": done, "output": 3}),
		view(map[string]any{"generationId": "nope", "output": 0}),
	}
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			for _, q := range reqs {
				var l, g string
				var served bool
				for range 5 { // progress and links move with the clock
					l, served = era.postRPC(t, s.url, q.method, q.name, q.params)
					var bypassed bool
					g, bypassed = era.postRPC(t, sdk.URL, q.method, q.name, q.params)
					if bypassed {
						t.Fatalf("the go-sdk server answered below go-sdk: %.300s", g)
					}
					if l == g {
						break
					}
				}
				// Only results with bytes are sure to be lean: errors are go-sdk's.
				if era.lean && q.bytes && strings.HasPrefix(g, "200 ") && !strings.Contains(g, `"error"`) && !served {
					t.Errorf("%s %s: not served below go-sdk", q.method, q.name)
				}
				if !era.lean && served {
					t.Errorf("%s %s: served below go-sdk: %.300s", q.method, q.name, l)
				}
				if l != g {
					t.Errorf("%s %v: answers differ:\n lean:   %.400s\n go-sdk: %.400s", q.method, q.params, l, g)
				}
				legacy := era.version < "2026-07-28"
				if q.method == "resources/read" && legacy && (strings.Contains(g, `"ttlMs"`) || strings.Contains(g, `"cacheScope"`)) {
					t.Errorf("%s: a %q client gets the 2026-only cache hints: %.300s", q.name, era.version, g)
				}
				if q.method == "resources/read" && !legacy && strings.Contains(g, `"blob"`) && !strings.Contains(g, `"ttlMs":3600000,"cacheScope":"private"`) {
					t.Errorf("%s: a 2026-07-28 read lacks its cache hints: %.300s", q.name, g)
				}
			}
		})
	}
}
