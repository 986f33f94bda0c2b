package main

import (
	"flag"
	"net/http/httptest"
	"testing"

	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// BenchmarkPollHandler: one poll through darkroom's whole handler chain
// in process (no network), for profiling the hot path with -cpuprofile
// or callgrind: tasks/get and a get_generation without the extension.
// make bench's single iteration would say nothing: it is skipped there
// (the figures are BenchmarkPollPaths').
func BenchmarkPollHandler(b *testing.B) {
	if f := flag.Lookup("test.benchtime"); f != nil && f.Value.String() == "1x" {
		b.Skip("for profiling: go test -run '^$' -bench BenchmarkPollHandler -benchtime 3s -cpuprofile cpu.out")
	}
	keys, err := auth.ParseKeyList("bench="+benchToken, "bench")
	if err != nil {
		b.Fatal(err)
	}
	s := startBenchServer(b, 1, false, nil, func(c *config) { c.Auth = auth.Config{Keys: keys} })
	h := s.app.handler()
	caps := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	serve := func(body []byte, headers map[string]string) *httptest.ResponseRecorder {
		return serveBench(h, body, headers)
	}
	w := serve(rpcBody(1, "tools/call", polledGenerate, caps), rpcHeaders("tools/call", "generate", benchToken))
	tid := createdID(w.Body.Bytes())
	w = serve(rpcBody(1, "tools/call", polledGenerate, map[string]any{}), rpcHeaders("tools/call", "generate", benchToken))
	gid := createdID(w.Body.Bytes())
	if tid == "" || gid == "" {
		b.Fatalf("setup: %q %q", tid, w.Body.String())
	}
	for _, c := range []struct {
		name    string
		body    []byte
		headers map[string]string
	}{
		{"tasks_get", rpcBody(2, "tasks/get", map[string]any{"taskId": tid}, caps), rpcHeaders("tasks/get", tid, benchToken)},
		{"get_generation", rpcBody(2, "tools/call", map[string]any{"name": "get_generation", "arguments": map[string]any{"generationId": gid}}, map[string]any{}),
			rpcHeaders("tools/call", "get_generation", benchToken)},
	} {
		b.Run(c.name, func(b *testing.B) {
			if w := serve(c.body, c.headers); w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
			b.ReportAllocs()
			for b.Loop() {
				serve(c.body, c.headers)
			}
		})
	}
}
