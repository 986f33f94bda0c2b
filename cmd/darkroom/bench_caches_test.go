package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// BenchmarkCaches: what each cache (internal/caches) buys on the paths it
// serves. One request at a time runs through darkroom's whole handler
// chain in process, in alternating rounds with the cache and without it
// (caches.Disable). Each side keeps its fastest round's CPU per request;
// "x_without" is the ratio, measured in this one run. A cache that buys
// less than 1.2× on its path has no place.
func BenchmarkCaches(b *testing.B) {
	keys, err := auth.ParseKeyList("bench="+benchToken, "bench")
	if err != nil {
		b.Fatal(err)
	}
	withKey := func(c *config) { c.Auth = auth.Config{Keys: keys}; c.InlinePreview = true }
	// idle has no runner: what it creates stays queued, as a poll finds
	// it mid-run. done runs generations to the end (a finished image).
	idle := startBenchServer(b, 1, false, nil, withKey).app.handler()
	done := startBenchServer(b, 0, true, nil, withKey).app.handler()
	caps := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	tid := createdID(serveBench(idle, rpcBody(1, "tools/call", polledGenerate, caps), rpcHeaders("tools/call", "generate", benchToken)).Body.Bytes())
	gid := createdID(serveBench(idle, rpcBody(1, "tools/call", polledGenerate, map[string]any{}), rpcHeaders("tools/call", "generate", benchToken)).Body.Bytes())
	image := map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": "a finished image", "wait": true, "waitSeconds": 30}}
	fid := createdID(serveBench(done, rpcBody(1, "tools/call", image, map[string]any{}), rpcHeaders("tools/call", "generate", benchToken)).Body.Bytes())
	if tid == "" || gid == "" || fid == "" {
		b.Fatalf("setup: task %q, generations %q and %q", tid, gid, fid)
	}
	getGen := func(id string) map[string]any {
		return map[string]any{"name": "get_generation", "arguments": map[string]any{"generationId": id}}
	}
	legacy := func(params map[string]any) ([]byte, map[string]string) {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
		return body, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2025-06-18", "Authorization": "Bearer " + benchToken}
	}
	legacyBody, legacyHeaders := legacy(getGen(gid))
	imageBody, imageHeaders := legacy(getGen(fid))
	for _, c := range []struct {
		path    string
		h       http.Handler
		body    []byte
		headers map[string]string
		caches  []caches.Cache
	}{
		{"tasks_get", idle, rpcBody(2, "tasks/get", map[string]any{"taskId": tid}, caps), rpcHeaders("tasks/get", tid, benchToken),
			[]caches.Cache{caches.TaskRows, caches.Replies}},
		{"get_generation_legacy", idle, legacyBody, legacyHeaders, []caches.Cache{caches.GenerationRows, caches.Replies}},
		{"get_generation_2026", idle, rpcBody(2, "tools/call", getGen(gid), map[string]any{}), rpcHeaders("tools/call", "get_generation", benchToken),
			[]caches.Cache{caches.RequestMeta}},
		{"get_generation_image", done, imageBody, imageHeaders, []caches.Cache{caches.Previews}},
	} {
		if w := serveBench(c.h, c.body, c.headers); w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"isError":true`)) {
			b.Fatalf("%s: %d %s", c.path, w.Code, w.Body)
		}
		for _, cache := range c.caches {
			on, off := cacheRounds(c.h, c.body, c.headers, cache)
			name := fmt.Sprintf("%s/%s", c.path, cache)
			b.Logf("%-40s %6.1f µs with, %6.1f µs without: %.2f×", name, us(on), us(off), float64(off)/float64(on))
			b.ReportMetric(float64(off)/float64(on), c.path+"/"+strings.ReplaceAll(cache.String(), " ", "_")+"_x_without")
		}
	}
}

// cacheRounds is the fastest round's CPU per request through h, with
// cache on and with it off, in alternating rounds.
func cacheRounds(h http.Handler, body []byte, headers map[string]string, cache caches.Cache) (on, off time.Duration) {
	const rounds, perRound = 7, 1500
	on, off = time.Hour, time.Hour
	round := func() time.Duration {
		serveBench(h, body, headers) // a miss fills the cache, outside the count
		start := cpuTime()
		for range perRound {
			serveBench(h, body, headers)
		}
		return (cpuTime() - start) / perRound
	}
	for range rounds {
		on = min(on, round())
		restore := caches.Disable(cache)
		off = min(off, round())
		restore()
	}
	return on, off
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// serveBench runs one request through h in process.
func serveBench(h http.Handler, body []byte, headers map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	r.RemoteAddr = "10.1.2.3:4567"
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
