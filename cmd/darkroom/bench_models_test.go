package main

import (
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/server/auth"
)

// BenchmarkModelReads: describe_model (of a curated fal model, its schema
// held) and search_models through the whole handler chain in process,
// answered on the lean path from the reply cache: the server CPU of a
// repeated question.
func BenchmarkModelReads(b *testing.B) {
	keys, err := auth.ParseKeyList("bench="+benchToken, "bench")
	if err != nil {
		b.Fatal(err)
	}
	rig := startEmulator(b, defaultTiming)
	s := startBenchServer(b, 1, false, nil, func(c *config) {
		c.Auth = auth.Config{Keys: keys}
		c.FalKey, c.FalQueueURL, c.FalAPIURL, c.FalOpenAPIURL = "fal_test", rig.Fal.URL, rig.Fal.URL, rig.Fal.URL
		c.ModelsAllow, _ = modelschema.ParseAllow("fal:fal-ai/*")
	})
	h := s.app.handler()
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"describe_model", map[string]any{"modelId": "fal-flux-dev"}},
		{"search_models", map[string]any{"query": "flux"}},
	} {
		body := rpcBody(2, "tools/call", map[string]any{"name": c.name, "arguments": c.args}, map[string]any{})
		headers := rpcHeaders("tools/call", c.name, benchToken)
		b.Run(c.name, func(b *testing.B) {
			if w := serveBench(h, body, headers); w.Code != 200 || strings.Contains(w.Body.String(), `"isError":true`) {
				b.Fatalf("%d %s", w.Code, w.Body)
			}
			b.ReportAllocs()
			for b.Loop() {
				serveBench(h, body, headers)
			}
		})
	}
}
