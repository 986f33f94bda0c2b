package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/tasks"
)

// BenchmarkFairness: one key flat out (one request at a time, as fast as
// answers come) on subscriptions/listen (1,000 task ids a stream) or on
// upload_input (10 MiB images), at the default limits, against a darkroom
// process pinned to the first CPU, the flooding client a child process on
// the second (an attacker's client runs elsewhere), while a second key
// polls tasks/get on its own task, one call at a time, from a child
// process on the second CPU too (so the server's CPU is its own). The baseline flood
// is the cheapest request there is, a tasks/get refused at the door.
// Reports the second key's tasks/get p50 and p99 (ms) idle and under each
// flood, the ratios of the p50s to idle (goal: under 1.2) and to the
// baseline flood, medians of 3 interleaved rounds, and the server's CPU.
func BenchmarkFairness(b *testing.B) {
	const bobKey, malKey = "bob-secret-0123456789", "mallory-secret-0123456789"
	srv := startServerChild(b, serverSpec{Kind: "darkroom", Dir: b.TempDir(), CPUs: serverCPU,
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
		body    []byte
		headers map[string]string
	}{
		"listen": {listen, rpcHeaders("subscriptions/listen", "", malKey)},
		"upload": {upload, rpcHeaders("tools/call", "upload_input", malKey)},
		// The baseline: the cheapest request there is, refused at the door.
		"poll": {rpcBody(5, "tasks/get", map[string]any{"taskId": ids[0]}, ext), rpcHeaders("tasks/get", ids[0], malKey)},
	}
	codes := map[string]map[int]int{"listen": {}, "upload": {}, "poll": {}}
	// flood runs one flood in a child process on the other CPU until ctx
	// ends (the server has the first: the flooding client is another
	// machine's, as an attacker's would be).
	flood := func(ctx context.Context, name string) {
		f := floods[name]
		res := clientFromChild(ctx, b, clientSpec{URL: url, Body: f.body, Headers: f.headers, Listen: name == "listen"}, floodCPU)
		for code, n := range res.Codes {
			codes[name][code] += n
		}
	}
	get := rpcBody(4, "tasks/get", map[string]any{"taskId": bobTask}, ext)
	getHeaders := rpcHeaders("tasks/get", bobTask, bobKey)
	// poll is the second key's n sequential tasks/get, from a child process
	// on the flooding client's CPU: the server keeps its CPU to itself, as
	// a server does whose clients are other machines.
	poll := func(n int) (p50, p99 float64) {
		res := clientFromChild(context.Background(), b, clientSpec{URL: url, Body: get, Headers: getHeaders, Polls: n, Want: `"taskId"`}, floodCPU)
		lat := res.Latencies
		slices.Sort(lat)
		return lat[n/2], lat[n*99/100]
	}
	const polls = 2000
	type figures struct{ p50, p99 []float64 }
	got := map[string]*figures{"idle": {}, "listen": {}, "upload": {}, "poll": {}}
	cpuSpent := map[string]time.Duration{} // the server's, per phase
	for round := 0; round < 3; round++ {
		for _, phase := range []string{"idle", "poll", "listen", "idle", "upload"} {
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(context.Background())
			cpu0 := srv.cpu(b)
			if phase != "idle" {
				wg.Go(func() { flood(ctx, phase) })
				time.Sleep(500 * time.Millisecond) // the flooding child started, its flood under way
			}
			p50, p99 := poll(polls)
			cancel()
			wg.Wait()
			cpuSpent[phase] += srv.cpu(b) - cpu0
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
		b.Logf("%s: tasks/get p50 %.3f ms (runs %v), p99 %.3f ms; flood answers %v; server CPU %v",
			phase, median(f.p50), f.p50, median(f.p99), codes[phase], cpuSpent[phase])
	}
}

// The fairness benchmark's CPUs: the server on the first, the flooding
// client on the second (taskset -c).
const serverCPU, floodCPU = "0", "1"

const clientEnv = "DARKROOM_BENCH_CLIENT"

// clientSpec is one of the benchmark's clients: Body to URL, one request
// at a time, as fast as answers come, Polls times (each answer a 200
// holding Want, its latency kept) or, with Polls 0, a flood until stdin
// closes; an answer is read whole, but an open listen stream (Listen,
// 200) only to its first bytes, then dropped.
type clientSpec struct {
	URL     string
	Body    []byte
	Headers map[string]string
	Listen  bool
	Polls   int
	Want    string
	Out     string
}

type clientResult struct {
	Codes     map[int]int
	Latencies []float64 // ms, one per poll
	Failure   string
}

// TestBenchClientChild is BenchmarkFairness's client, run only as its
// child process (it skips otherwise).
func TestBenchClientChild(t *testing.T) {
	raw := os.Getenv(clientEnv)
	if raw == "" {
		t.Skip("client for BenchmarkFairness; runs only as its child process")
	}
	var s clientSpec
	spec, err := os.ReadFile(raw) // a file: an upload's body is too large for the environment
	if err != nil || json.Unmarshal(spec, &s) != nil {
		t.Fatalf("client spec %s: %v", raw, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = os.Stdin.Read(make([]byte, 1)); cancel() }()
	hc := benchClient(2)
	res := clientResult{Codes: map[int]int{}}
	for i := 0; ctx.Err() == nil && (s.Polls == 0 || i < s.Polls); i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(s.Body))
		for k, v := range s.Headers {
			req.Header.Set(k, v)
		}
		start, code, body := time.Now(), 0, []byte(nil)
		if resp, err := hc.Do(req); err == nil {
			code = resp.StatusCode
			if code == http.StatusOK && s.Listen {
				_, _ = io.ReadFull(resp.Body, make([]byte, 64))
			} else {
				body, _ = io.ReadAll(resp.Body) // the connection is kept, as a client keeps it
			}
			_ = resp.Body.Close()
		}
		res.Codes[code]++
		if s.Polls > 0 {
			if code != http.StatusOK || !bytes.Contains(body, []byte(s.Want)) {
				res.Failure = fmt.Sprintf("poll %d: %d %.300s", i, code, body)
				break
			}
			res.Latencies = append(res.Latencies, float64(time.Since(start).Microseconds())/1000)
		}
	}
	b, _ := json.Marshal(res)
	if err := os.WriteFile(s.Out, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// clientFromChild runs s in a child process on cpus until it is done
// (Polls) or ctx ends (a flood).
func clientFromChild(ctx context.Context, tb testing.TB, s clientSpec, cpus string) clientResult {
	tb.Helper()
	dir := tb.TempDir()
	s.Out = filepath.Join(dir, "client.json")
	spec, _ := json.Marshal(s)
	specFile := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specFile, spec, 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := pinned(cpus, os.Args[0], "-test.run=^TestBenchClientChild$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), clientEnv+"="+specFile)
	stdin, out := startChild(tb, cmd)
	if s.Polls == 0 {
		<-ctx.Done()
		_ = stdin.Close()
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("benchmark client: %v\n%s", err, out.String())
	}
	var r clientResult
	if b, err := os.ReadFile(s.Out); err != nil || json.Unmarshal(b, &r) != nil {
		tb.Fatalf("benchmark client wrote no result: %v\n%s", err, out.String())
	}
	if r.Failure != "" {
		tb.Fatalf("benchmark client: %s", r.Failure)
	}
	return r
}
