package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// BenchmarkCaches: what each cache (internal/caches) buys on the path it
// serves. One request at a time runs through darkroom's whole handler
// chain in process (or, for the task index, the one call it serves), in
// alternating rounds with the cache and without it (caches.Disable).
// Each side keeps its fastest round's CPU per request; "x_without" is the
// ratio, measured in this one run. A cache that buys less than 1.2× on
// its path has no place. Every cache in internal/caches is measured
// (the benchmark fails on one it does not).
func BenchmarkCaches(b *testing.B) {
	keys, err := auth.ParseKeyList("bench="+benchToken, "bench")
	if err != nil {
		b.Fatal(err)
	}
	withKey := func(c *config) { c.Auth = auth.Config{Keys: keys}; c.InlinePreview = true }
	// idle has no runner: what it creates stays queued, as a poll finds
	// it mid-run. done runs generations to the end (a finished image).
	// fal serves qualified models from the emulator's fal.
	idleApp := startBenchServer(b, 1, false, nil, withKey).app
	idle := idleApp.handler()
	done := startBenchServer(b, 0, true, nil, withKey).app.handler()
	fal := falBenchServer(b, func(c *config) { c.ModelsAllow, _ = modelschema.ParseAllow("fal:fal-ai/*", qualified.Names()) }).app.handler()
	caps := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	tid := createdID(serveBench(idle, rpcBody(1, "tools/call", polledGenerate, caps), rpcHeaders("tools/call", "generate", benchToken)).Body.Bytes())
	gid := createdID(serveBench(idle, rpcBody(1, "tools/call", polledGenerate, map[string]any{}), rpcHeaders("tools/call", "generate", benchToken)).Body.Bytes())
	image := map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": "a finished image", "wait": true, "waitSeconds": 30}}
	fid := createdID(serveBench(done, rpcBody(1, "tools/call", image, map[string]any{}), rpcHeaders("tools/call", "generate", benchToken)).Body.Bytes())
	if tid == "" || gid == "" || fid == "" {
		b.Fatalf("setup: task %q, generations %q and %q", tid, gid, fid)
	}
	// A task-following generation, for the task index: its id.
	tgid := ""
	if t, err := idleApp.tasks.Store().Get(context.Background(), tid); err == nil {
		_, tgid, _ = strings.Cut(t.Ref, ":")
	}
	if tgid == "" {
		b.Fatalf("setup: task %s follows no generation", tid)
	}
	getGen := func(id string) map[string]any {
		return map[string]any{"name": "get_generation", "arguments": map[string]any{"generationId": id}}
	}
	legacy := func(params map[string]any) ([]byte, map[string]string) {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
		return body, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2025-06-18", "Authorization": "Bearer " + benchToken}
	}
	call := func(h http.Handler, tool string, args map[string]any) func() *httptest.ResponseRecorder {
		body, headers := rpcBody(2, "tools/call", map[string]any{"name": tool, "arguments": args}, map[string]any{}), rpcHeaders("tools/call", tool, benchToken)
		return func() *httptest.ResponseRecorder { return serveBench(h, body, headers) }
	}
	post := func(h http.Handler, body []byte, headers map[string]string) func() *httptest.ResponseRecorder {
		return func() *httptest.ResponseRecorder { return serveBench(h, body, headers) }
	}
	legacyBody, legacyHeaders := legacy(getGen(gid))
	imageBody, imageHeaders := legacy(getGen(fid))
	mirror := idleApp.gen.Mirror
	measured := map[caches.Cache]bool{}
	for _, c := range []struct {
		path     string
		run      func() *httptest.ResponseRecorder
		wantErr  bool // the path answers a tool error (an unknown model)
		measures []caches.Cache
		// vendor: without the cache the path asks the (emulated) vendor,
		// under fal's outbound limit (600 a minute): fewer calls a round.
		vendor bool
	}{
		{"tasks_get", post(idle, rpcBody(2, "tasks/get", map[string]any{"taskId": tid}, caps), rpcHeaders("tasks/get", tid, benchToken)), false,
			[]caches.Cache{caches.TaskRows, caches.Replies}, false},
		{"get_generation_legacy", post(idle, legacyBody, legacyHeaders), false, []caches.Cache{caches.GenerationRows, caches.Replies}, false},
		{"get_generation_image", post(done, imageBody, imageHeaders), false, []caches.Cache{caches.Previews}, false},
		{"generate_dry_run_qualified", call(fal, "generate", map[string]any{"modelId": "fal:fal-ai/flux/schnell", "prompt": "x", "dryRun": true}), false,
			[]caches.Cache{caches.SchemaModels}, false},
		{"generate_unknown_qualified", call(fal, "generate", map[string]any{"modelId": "fal:fal-ai/no-such-model", "prompt": "x", "dryRun": true}), true,
			[]caches.Cache{caches.SchemaMisses}, true},
		{"search_models", call(fal, "search_models", map[string]any{"query": "flux"}), false, []caches.Cache{caches.Searches}, true},
		// The task index's path is the notification of each committed
		// change of a generation (the hub calls Mirror.Notify).
		{"generation_change_notify", func() *httptest.ResponseRecorder { mirror.Notify(tgid); return nil }, false, []caches.Cache{caches.TaskIndex}, false},
	} {
		if w := c.run(); w != nil && (w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"isError":true`)) != c.wantErr) {
			b.Fatalf("%s: %d %s", c.path, w.Code, w.Body)
		}
		for _, cache := range c.measures {
			measured[cache] = true
			perRound := 1500
			if c.vendor {
				perRound = 15
			}
			on, off := cacheRounds(func() { c.run() }, cache, perRound)
			name := fmt.Sprintf("%s/%s", c.path, cache)
			b.Logf("%-48s %8.1f µs with, %8.1f µs without: %.2f×", name, us(on), us(off), float64(off)/float64(on))
			b.ReportMetric(float64(off)/float64(on), c.path+"/"+strings.ReplaceAll(cache.String(), " ", "_")+"_x_without")
		}
	}
	for _, cache := range caches.All() {
		if !measured[cache] || caches.Made(cache) == 0 {
			b.Errorf("%s is measured on no path, or the app built none", cache)
		}
	}
}

// cacheRounds is the fastest round's CPU per call of run, with cache on
// and with it off, in alternating rounds.
func cacheRounds(run func(), cache caches.Cache, perRound int) (on, off time.Duration) {
	const rounds = 7
	on, off = time.Hour, time.Hour
	round := func() time.Duration {
		run() // a miss fills the cache, outside the count
		start := cpuTime()
		for range perRound {
			run()
		}
		return (cpuTime() - start) / time.Duration(perRound)
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
