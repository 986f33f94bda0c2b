package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/server/auth"
)

// BenchmarkModelReads: describe_model (of a curated fal model, its schema
// held) and search_models through the whole handler chain in process,
// answered on the lean path from the reply cache: the server CPU of a
// repeated question.
func BenchmarkModelReads(b *testing.B) {
	s := falBenchServer(b, func(c *config) { c.ModelsAllow, _ = modelschema.ParseAllow("fal:fal-ai/*", qualified.Names()) })
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

// BenchmarkCreateInput: what checking provider-native input against a
// model's schema adds to a create's server CPU (issue goal: under 10%).
// The same create of a curated fal model (its schema held), through the
// whole handler chain in process with no runner, without and with an
// input of six fields, in alternating rounds; the fastest round of each.
// 16 creates at a time, as a busy server's group commit shares its
// transactions (one at a time, each create pays a transaction and a
// sync of its own, and validation looks smaller than it is).
func BenchmarkCreateInput(b *testing.B) {
	s := falBenchServer(b, func(c *config) { c.MaxInFlight = 0 })
	h := s.app.handler()
	headers := rpcHeaders("tools/call", "generate", benchToken)
	create := func(input map[string]any) []byte {
		args := map[string]any{"modelId": "fal-flux-dev", "prompt": "a lighthouse at dusk"}
		if input != nil {
			args["input"] = input
		}
		return rpcBody(1, "tools/call", map[string]any{"name": "generate", "arguments": args}, map[string]any{})
	}
	plain := create(nil)
	withInput := create(map[string]any{"num_inference_steps": 30, "guidance_scale": 3.5, "enable_safety_checker": false,
		"output_format": "png", "acceleration": "regular", "sync_mode": false})
	for _, body := range [][]byte{plain, withInput} {
		if w := serveBench(h, body, headers); w.Code != http.StatusOK || createdID(w.Body.Bytes()) == "" {
			b.Fatalf("setup: %d %s", w.Code, w.Body)
		}
	}
	const rounds, perRound, clients = 9, 640, 16
	round := func(body []byte) time.Duration {
		start := cpuTime()
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for range perRound / clients {
					serveBench(h, body, headers)
				}
			})
		}
		wg.Wait()
		return (cpuTime() - start) / perRound
	}
	// The validation alone: the same input decoded and checked against
	// the same model's schema as generate does (gentools' resolveModel).
	m, ok := s.app.svc.Model("fal-flux-dev")
	if !ok {
		b.Fatal("fal-flux-dev is not in the catalog")
	}
	rawInput, _ := json.Marshal(map[string]any{"num_inference_steps": 30, "guidance_scale": 3.5, "enable_safety_checker": false,
		"output_format": "png", "acceleration": "regular", "sync_mode": false})
	validate := func() time.Duration {
		start := cpuTime()
		for range perRound {
			in, err := modelschema.DecodeInput(rawInput)
			if err == nil {
				err = s.app.models.CheckInput(context.Background(), m, in)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		return (cpuTime() - start) / perRound
	}
	without, with, check := time.Hour, time.Hour, time.Hour
	for range rounds {
		without = min(without, round(plain))
		with = min(with, round(withInput))
		check = min(check, validate())
	}
	b.Logf("create: %.1f µs without input, %.1f µs with six checked fields (+%.1f%%: the larger arguments parsed and stored, and checked); the check alone %.1f µs, %.1f%% of a create",
		us(without), us(with), 100*(float64(with)/float64(without)-1), us(check), 100*float64(check)/float64(without))
	b.ReportMetric(us(without), "create_µs")
	b.ReportMetric(us(with), "create_with_input_µs")
	b.ReportMetric(100*(float64(with)/float64(without)-1), "input_added_%")
	b.ReportMetric(100*float64(check)/float64(without), "validation_%_of_create")
}

// falBenchServer is a bench server (no runner) with the bench key and fal
// on the emulator, then opt.
func falBenchServer(b *testing.B, opt func(*config)) *testServer {
	keys, err := auth.ParseKeyList("bench="+benchToken, "bench")
	if err != nil {
		b.Fatal(err)
	}
	rig := startEmulator(b, defaultTiming)
	return startBenchServer(b, 1, false, nil, func(c *config) {
		c.Auth = auth.Config{Keys: keys}
		c.FalKey, c.FalQueueURL, c.FalAPIURL, c.FalOpenAPIURL = "fal_test", rig.Fal.URL, rig.Fal.URL, rig.Fal.URL
		opt(c)
	})
}
