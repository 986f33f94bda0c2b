package main

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/tasks"
)

// BenchmarkFairness: one key flat out (one request at a time, as fast as
// answers come) on subscriptions/listen (1,000 task ids a stream) or on
// upload_input (10 MiB images), at the default limits, against a darkroom
// process, while a second key polls tasks/get on its own task, one call
// at a time. The baseline flood is the cheapest request there is, a
// tasks/get refused at the door: on a machine whose cores the flooding
// client shares, that alone slows the second key. Reports the second
// key's tasks/get p50 and p99 (ms) idle and under each flood, and the
// ratios of the p50s to idle and to the baseline flood (goal: listen and
// upload under 1.2 of it), medians of 3 interleaved rounds.
func BenchmarkFairness(b *testing.B) {
	const bobKey, malKey = "bob-secret-0123456789", "mallory-secret-0123456789"
	srv := startServerChild(b, serverSpec{Kind: "darkroom", Dir: b.TempDir(),
		Keys: "bob=" + bobKey + ";rate=100000;burst=100000,mallory=" + malKey})
	url := srv.url
	hc := benchClient(16)
	ext := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	bobTask := createPolled(b, hc, url, ext, bobKey)
	// Mallory's reserved generation, waiting for its image.
	code, resp, err := postRaw(hc, url, rpcBody(1, "tools/call", map[string]any{"name": "generate",
		"arguments": map[string]any{"modelId": "local-animate", "prompt": "flood"}}, map[string]any{}), rpcHeaders("tools/call", "generate", malKey))
	malGen := createdID(resp)
	if err != nil || code != 200 || malGen == "" {
		b.Fatalf("mallory's generation: %d %v %.300s", code, err, resp)
	}

	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = tasks.NewID()
	}
	listen := rpcBody(2, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": ids}}, ext)
	image := base64.StdEncoding.EncodeToString(make([]byte, 10<<20))
	upload := rpcBody(3, "tools/call", map[string]any{"name": "upload_input", "arguments": map[string]any{
		"generationId": malGen, "image": map[string]any{"data": image, "mimeType": "image/png"}}}, map[string]any{})
	floods := map[string]struct {
		workers int
		body    []byte
		headers map[string]string
	}{
		"listen": {1, listen, rpcHeaders("subscriptions/listen", "", malKey)},
		"upload": {1, upload, rpcHeaders("tools/call", "upload_input", malKey)},
		// The baseline: the cheapest request there is, refused at the door.
		"poll": {1, rpcBody(5, "tasks/get", map[string]any{"taskId": ids[0]}, ext), rpcHeaders("tasks/get", ids[0], malKey)},
	}
	// flood runs one flood until ctx ends; an answer is read whole, but an
	// open listen stream only to its first line, then dropped.
	codes := map[string]map[int]int{"listen": {}, "upload": {}, "poll": {}}
	flood := func(ctx context.Context, name string) (sent int) {
		f := floods[name]
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range f.workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(f.body)))
					for k, v := range f.headers {
						req.Header.Set(k, v)
					}
					code := 0
					if resp, err := hc.Do(req); err == nil {
						code = resp.StatusCode
						if code == http.StatusOK && name == "listen" {
							_, _ = io.ReadFull(resp.Body, make([]byte, 64)) // the stream is open: drop it
						} else {
							_, _ = io.Copy(io.Discard, resp.Body) // the connection is kept, as a client keeps it
						}
						_ = resp.Body.Close()
					}
					mu.Lock()
					codes[name][code]++
					sent++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return sent
	}
	get := rpcBody(4, "tasks/get", map[string]any{"taskId": bobTask}, ext)
	getHeaders := rpcHeaders("tasks/get", bobTask, bobKey)
	poll := func(n int) (p50, p99 float64) {
		lat := make([]float64, 0, n)
		for range n {
			start := time.Now()
			code, resp, err := postRaw(hc, url, get, getHeaders)
			if err != nil || code != 200 || !strings.Contains(string(resp), `"taskId"`) {
				b.Fatalf("bob's tasks/get: %d %v %.300s", code, err, resp)
			}
			lat = append(lat, float64(time.Since(start).Microseconds())/1000)
		}
		slices.Sort(lat)
		return lat[n/2], lat[n*99/100]
	}
	const polls = 400
	type figures struct{ p50, p99 []float64 }
	got := map[string]*figures{"idle": {}, "listen": {}, "upload": {}, "poll": {}}
	sent := map[string]int{}
	serverCPU := map[string]time.Duration{}
	for round := 0; round < 3; round++ {
		for _, phase := range []string{"idle", "poll", "listen", "idle", "upload"} {
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(context.Background())
			cpu0 := srv.cpu(b)
			if phase != "idle" {
				wg.Go(func() { sent[phase] += flood(ctx, phase) })
				time.Sleep(200 * time.Millisecond) // the flood under way before the first poll
			}
			p50, p99 := poll(polls)
			cancel()
			wg.Wait()
			serverCPU[phase] += srv.cpu(b) - cpu0
			got[phase].p50, got[phase].p99 = append(got[phase].p50, p50), append(got[phase].p99, p99)
		}
	}
	median := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	idle, baseline := median(got["idle"].p50), median(got["poll"].p50)
	for _, phase := range []string{"idle", "poll", "listen", "upload"} {
		f := got[phase]
		b.ReportMetric(median(f.p50), phase+"-p50-ms")
		b.ReportMetric(median(f.p99), phase+"-p99-ms")
		if phase != "idle" {
			b.ReportMetric(median(f.p50)/idle, phase+"/idle-p50")
		}
		if phase == "listen" || phase == "upload" {
			b.ReportMetric(median(f.p50)/baseline, phase+"/poll-flood-p50")
		}
		b.Logf("%s: tasks/get p50 %.3f ms (runs %v), p99 %.3f ms; flood requests sent %d %v; server CPU %v",
			phase, median(f.p50), f.p50, median(f.p99), sent[phase], codes[phase], serverCPU[phase])
	}
}
