package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// ---- completion lag: from "done at the provider" to "terminal result written to the client" ----

// lagScaleEnv scales every duration of BenchmarkCompletionLag (the jobs'
// lengths and the models' expected durations): darkroom's runner runs on
// the wall clock, so the jobs run for real. 1 is real time (about 4
// minutes); the default 0.2 runs in about a minute. Lags under a stream,
// a held create or a synchronous call do not scale (they are round
// trips); a polled job's do, so its lag is also given as a share of the
// job's length.
const lagScaleEnv = "DARKROOM_BENCH_LAG_SCALE"

// lagModels are the models measured, one per provider and kind, with
// their job lengths (at scale 1: images of 2–20 s, videos of 30–180 s).
var lagModels = []struct {
	id, prov, kind string
	lengths        []time.Duration
}{
	{"openai-gpt-image-2", "openai", "image", lagLengths(2, 5, 10, 20)},
	{"fal-flux-dev", "fal", "image", lagLengths(2, 5, 10, 20)},
	{"replicate-flux-dev", "replicate", "image", lagLengths(2, 5, 10, 20)},
	{"fal-kling-1.6", "fal", "video", lagLengths(30, 60, 120, 180)},
	{"replicate-kling-1.6", "replicate", "video", lagLengths(30, 60, 120, 180)},
	{"google-omni-1.2-flash", "google", "video", lagLengths(30, 60, 120, 180)},
}

func lagLengths(s ...int) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, n := range s {
		out[i] = time.Duration(n) * time.Second
	}
	return out
}

// lagSample is one job's measure.
type lagSample struct {
	sched, prov, kind, client string
	length                    time.Duration // scaled
	lag                       time.Duration
}

// lagRig is one scheduler's darkroom and the emulator it talks to.
type lagRig struct {
	sched string
	rig   *emuRig
	url   string
}

// BenchmarkCompletionLag (issue 39): the emulator ends jobs at scripted
// instants ([run=D]: images of 2–20 s, videos of 30–180 s, scaled by
// DARKROOM_BENCH_LAG_SCALE) and says when (DoneAt); each job is followed
// by a legacy client holding wait_generation or by a Tasks client holding
// a subscriptions/listen stream, alternately, and its lag is the time from
// the scripted end to the client reading the terminal result. Two
// darkrooms run side by side, each against its own emulator and without a
// public URL: "poll", the scheduler before issue 39 (RunnerConfig.PollOnly),
// and "signal", each provider's own completion signal. Images run first,
// then videos. It prints, per scheduler, provider and kind, the lag's
// p50 and p99 (ms, and as a share of the job's length) and the provider
// requests per job (status, result, stream, create, cancel and list calls;
// output downloads not counted).
func BenchmarkCompletionLag(b *testing.B) {
	scale := 0.2
	if v := os.Getenv(lagScaleEnv); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			b.Fatalf("%s=%q: a number in (0, 1]", lagScaleEnv, v)
		}
		scale = f
	}
	const reps = 2 // jobs per length and client
	models := lagCatalog(b, scale)
	var rigs []*lagRig
	for _, sched := range []string{"poll", "signal"} {
		// Keys of its own: darkroom's outbound rate limits are per key and
		// process, so the two darkrooms must not share them.
		rk, fk, ok, gk := "r8_"+sched, "fal_"+sched, "sk-"+sched, "gemini_"+sched
		rig := startEmulator(b, defaultTiming, func(o *emulator.Options) {
			o.ReplicateToken, o.FalKey, o.OpenAIKey, o.GeminiKey = rk, fk, ok, gk
		})
		s := startServer(b, 0, func(c *config) {
			c.ReplicateToken, c.ReplicateBaseURL = rk, rig.Replicate.URL
			c.replicateWaitBelow = time.Duration(float64(time.Minute) * scale) // a model expected under a minute, scaled
			c.FalKey, c.FalQueueURL, c.FalJWKSURL = fk, rig.Fal.URL, rig.FalJWKSURL()
			c.FalConcurrency = 64
			c.OpenAIKey, c.OpenAIBaseURL = ok, rig.OpenAI.URL
			c.GeminiKey, c.GeminiBaseURL = gk, rig.Google.URL
			c.UnsafeOutputFetch = true
			c.OutputHosts = []string{rig.filesHost()}
			c.ModelsFile = models
			c.PollRate, c.PollBurst = 1e6, 1_000_000
			c.CreateRate, c.CreateBurst = 1e6, 1_000_000
			c.MaxInFlight = 0
			c.MaxListens = 1 << 20 // a listen per Tasks job (a client would hold one for all)
			c.Webhooks = false
			c.pollOnly = sched == "poll"
		})
		rigs = append(rigs, &lagRig{sched: sched, rig: rig, url: s.url})
	}
	var samples []lagSample
	requests := map[string]float64{} // sched/prov/kind → requests per job
	for b.Loop() {
		samples = samples[:0]
		for _, kind := range []string{"image", "video"} {
			before := map[*lagRig]map[string]int{}
			for _, r := range rigs {
				before[r] = lagRequests(r.rig)
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			jobs := map[string]int{}
			for _, r := range rigs {
				for _, m := range lagModels {
					if m.kind != kind {
						continue
					}
					var run []func()
					for _, l := range m.lengths {
						for i := range 2 * reps {
							client := []string{"wait_generation", "listen"}[i%2]
							length := time.Duration(float64(l) * scale).Round(time.Millisecond)
							prompt := fmt.Sprintf("lag %s %s %s %d [run=%s]", r.sched, m.id, l, i, length)
							jobs[r.sched+"/"+m.prov]++
							run = append(run, func() {
								lag, err := lagJob(r, m.prov, m.id, prompt, client)
								if err != nil {
									b.Errorf("%s %s: %v", r.sched, prompt, err)
									return
								}
								mu.Lock()
								samples = append(samples, lagSample{r.sched, m.prov, kind, client, length, lag})
								mu.Unlock()
							})
						}
					}
					// OpenAI's calls are synchronous and darkroom makes at
					// most 4 at once (openai.Config.MaxConcurrentCalls):
					// they go 4 at a time, the others all at once.
					batch := len(run)
					if m.prov == "openai" {
						batch = 4
					}
					wg.Go(func() {
						for len(run) > 0 {
							n := min(batch, len(run))
							var bw sync.WaitGroup
							for _, f := range run[:n] {
								bw.Go(f)
							}
							bw.Wait()
							run = run[n:]
						}
					})
				}
			}
			wg.Wait()
			for _, r := range rigs {
				after := lagRequests(r.rig)
				for prov, n := range after {
					if k := r.sched + "/" + prov; jobs[k] > 0 {
						requests[k+"/"+kind] = float64(n-before[r][prov]) / float64(jobs[k])
					}
				}
			}
		}
	}
	b.StopTimer()
	lagReport(b, scale, samples, requests)
}

// lagCatalog writes the measured models' catalog entries, their expected
// durations scaled.
func lagCatalog(b *testing.B, scale float64) string {
	return writeCatalog(b, func(e *catalog.Entry) bool {
		e.ExpectedSeconds *= scale
		for _, m := range lagModels {
			if m.id == e.ID {
				return true
			}
		}
		return false
	})
}

// lagRequests counts each provider's API requests so far.
func lagRequests(rig *emuRig) map[string]int {
	out := map[string]int{}
	for _, prov := range []string{"replicate", "fal", "openai", "google"} {
		for _, op := range []emulator.Op{emulator.OpCreate, emulator.OpStatus, emulator.OpResult, emulator.OpCancel, emulator.OpList, emulator.OpStream} {
			out[prov] += rig.Count(prov, op)
		}
	}
	return out
}

// lagJob runs one generation and returns the time from its scripted end
// at the provider to the client's reading of its terminal result.
func lagJob(r *lagRig, prov, model, prompt, client string) (time.Duration, error) {
	hc := &http.Client{Timeout: 5 * time.Minute}
	caps := map[string]any{}
	if client == "listen" {
		caps = withTasks()
	}
	gen, err := rpcDo(hc, r.url, "", caps, "tools/call", map[string]any{"name": "generate", "arguments": map[string]any{"modelId": model, "prompt": prompt}})
	if err != nil || gen.Error != nil {
		return 0, fmt.Errorf("generate: %v %+v", err, gen.Error)
	}
	var seen time.Time
	var status, msg string
	if client == "listen" {
		id, _ := gen.Result["taskId"].(string)
		if id == "" {
			return 0, fmt.Errorf("no task: %v", gen.Result)
		}
		if seen, status, err = lagListen(hc, r.url, id); err != nil {
			return 0, err
		}
	} else {
		sc, _ := gen.Result["structuredContent"].(map[string]any)
		id, _ := sc["generationId"].(string)
		if id == "" {
			return 0, fmt.Errorf("no generation: %v", gen.Result)
		}
		for status == "" || status == "queued" || status == "running" {
			w, err := rpcDo(hc, r.url, "", caps, "tools/call", map[string]any{"name": "wait_generation", "arguments": map[string]any{"generationId": id, "timeoutSeconds": 55}})
			if err != nil || w.Error != nil {
				return 0, fmt.Errorf("wait_generation: %v %+v", err, w.Error)
			}
			seen = time.Now()
			sc, _ := w.Result["structuredContent"].(map[string]any)
			status, _ = sc["status"].(string)
			msg, _ = sc["statusMessage"].(string)
		}
	}
	if status != "completed" {
		return 0, fmt.Errorf("ended %s: %s", status, msg)
	}
	done, ok := r.rig.DoneAt(prov, prompt)
	if !ok {
		return 0, fmt.Errorf("the emulator has no job for %q", prompt)
	}
	return seen.Sub(done), nil
}

// lagListen holds a subscriptions/listen stream on task id until its
// terminal notification, and returns when it was read and the status.
func lagListen(hc *http.Client, base, id string) (time.Time, string, error) {
	for range 20 {
		at, st, err := lagListenOnce(hc, base, id)
		if err != errListenEnded {
			return at, st, err
		}
		// The stream ended without a terminal notification (the task may
		// have ended before the listen began): a client reads the task,
		// and listens again while it runs.
		r, err := rpcDo(hc, base, "", withTasks(), "tasks/get", map[string]any{"taskId": id})
		if err != nil || r.Error != nil {
			return time.Time{}, "", fmt.Errorf("tasks/get: %v %+v", err, r.Error)
		}
		switch st, _ := r.Result["status"].(string); st {
		case "completed", "failed", "cancelled":
			return time.Now(), st, nil
		}
	}
	return time.Time{}, "", errListenEnded
}

var errListenEnded = fmt.Errorf("listen stream ended without the task's end")

func lagListenOnce(hc *http.Client, base, id string) (time.Time, string, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": map[string]any{
		"_meta":         modernMeta(withTasks()),
		"notifications": map[string]any{"taskIds": []string{id}},
	}})
	req, _ := http.NewRequest("POST", base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := hc.Do(req)
	if err != nil {
		return time.Time{}, "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if json.Unmarshal([]byte(d), &m) != nil || m.Method != "notifications/tasks" {
			continue
		}
		switch st, _ := m.Params["status"].(string); st {
		case "completed", "failed", "cancelled":
			return time.Now(), st, nil
		}
	}
	if sc.Err() != nil {
		return time.Time{}, "", sc.Err()
	}
	return time.Time{}, "", errListenEnded
}

// lagReport prints the table: per scheduler, provider and kind, p50 and
// p99 of the lag (ms, and the p99 as a share of the job's length) and the
// requests per job; then the lag per job length.
func lagReport(b *testing.B, scale float64, samples []lagSample, requests map[string]float64) {
	type key struct{ sched, prov, kind string }
	groups := map[key][]lagSample{}
	for _, s := range samples {
		k := key{s.sched, s.prov, s.kind}
		groups[k] = append(groups[k], s)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "completion lag, no public URL, durations ×%g (jobs: images %s, videos %s)\n", scale,
		lagSpan(lagModels[0].lengths, scale), lagSpan(lagModels[3].lengths, scale))
	fmt.Fprintf(&out, "%-10s %-6s %-7s %5s %10s %10s %9s %9s %10s\n", "provider", "kind", "sched", "jobs", "p50 ms", "p99 ms", "p50 %len", "p99 %len", "req/job")
	for _, m := range lagModels {
		for _, sched := range []string{"poll", "signal"} {
			g := groups[key{sched, m.prov, m.kind}]
			if len(g) == 0 {
				continue
			}
			lags := make([]time.Duration, len(g))
			shares := make([]float64, len(g))
			for i, s := range g {
				lags[i] = s.lag
				shares[i] = 100 * float64(s.lag) / float64(s.length)
			}
			slices.Sort(lags)
			slices.Sort(shares)
			p50, p99 := pct(lags, 0.5), pct(lags, 0.99)
			fmt.Fprintf(&out, "%-10s %-6s %-7s %5d %10.0f %10.0f %8.1f%% %8.1f%% %10.2f\n", m.prov, m.kind, sched, len(g),
				p50, p99, pctF(shares, 0.5), pctF(shares, 0.99), requests[sched+"/"+m.prov+"/"+m.kind])
			b.ReportMetric(p99, fmt.Sprintf("p99-ms/%s-%s-%s", m.prov, m.kind, sched))
		}
	}
	fmt.Fprintf(&out, "lag p99 (ms) per job length:\n")
	for _, m := range lagModels {
		for _, sched := range []string{"poll", "signal"} {
			fmt.Fprintf(&out, "  %-10s %-6s %-7s", m.prov, m.kind, sched)
			for _, l := range m.lengths {
				length := time.Duration(float64(l) * scale).Round(time.Millisecond)
				var lags []time.Duration
				for _, s := range groups[key{sched, m.prov, m.kind}] {
					if s.length == length {
						lags = append(lags, s.lag)
					}
				}
				slices.Sort(lags)
				fmt.Fprintf(&out, "  %s: %6.0f", length, pct(lags, 0.99))
			}
			out.WriteString("\n")
		}
	}
	// Printed whole (a benchmark's log is cut to its first lines).
	fmt.Print(out.String())
}

func lagSpan(ls []time.Duration, scale float64) string {
	return fmt.Sprintf("%s–%s", time.Duration(float64(ls[0])*scale).Round(time.Millisecond), time.Duration(float64(ls[len(ls)-1])*scale).Round(time.Millisecond))
}

// pctF is the nearest-rank percentile q of sorted.
func pctF(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
