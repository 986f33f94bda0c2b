package main

// Performance figures for `make bench` (go test -run '^$' -bench . -benchtime 1x).
//
// Each benchmark does a fixed amount of work in one b.N iteration and
// reports rates, latencies and ratios with b.ReportMetric; ratios compare
// two setups measured side by side in the same run, on the same machine.
// Load generators that must not share the server's CPU accounting run in a
// child process (this test binary re-executed, see TestLoadgenChild).

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/sqlite"
	"github.com/darkroom-mcp/darkroom/storage/sqlite/sqlitedb"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const benchVersion = "2026-07-28"

// startBenchServer is startServer for benchmarks: limits raised so that
// load is never answered 429, the background loops (runner, sweeper) only
// when asked, and an optional wrapper around the handler.
func startBenchServer(tb testing.TB, latency float64, background bool, wrap func(http.Handler) http.Handler, opts ...func(*config)) *testServer {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewUnstartedServer(nil)
	cfg, err := parseConfig("bench", nil)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.DataDir = tb.TempDir()
	cfg.PublicURL = "http://" + srv.Listener.Addr().String()
	cfg.LocalLatency = latency
	cfg.MaxInputBytes = 1 << 20
	cfg.PollRate, cfg.PollBurst = 1e6, 1_000_000
	cfg.CreateRate, cfg.CreateBurst = 1e6, 1_000_000
	for _, o := range opts {
		o(cfg)
	}
	a, err := build(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	h := a.handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv.Config.Handler = h
	srv.Start()
	var done <-chan struct{}
	if background {
		done = a.background(ctx)
	} else {
		c := make(chan struct{})
		close(c)
		done = c
	}
	tb.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		<-done
		_ = a.close()
	})
	return &testServer{app: a, url: srv.URL}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pct is the nearest-rank percentile of sorted durations, in ms.
func pct(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	i = min(max(i, 0), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Millisecond)
}

func sortedDurations(d []time.Duration) []time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d
}

// hideNsPerOp drops the default ns/op column: one iteration of a fixed
// workload says nothing per op.
func hideNsPerOp(b *testing.B) { b.ReportMetric(0, "ns/op") }

// rpcBody is a JSON-RPC request with 2026-07-28 _meta.
func rpcBody(id int64, method string, params map[string]any, caps map[string]any) []byte {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    benchVersion,
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return b
}

func rpcHeaders(method, name, token string) map[string]string {
	h := map[string]string{
		"Content-Type":         "application/json",
		"Accept":               "application/json, text/event-stream",
		"MCP-Protocol-Version": benchVersion,
		"Mcp-Method":           method,
	}
	if name != "" {
		h["Mcp-Name"] = name
	}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return h
}

func benchClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: 0, DisableCompression: true}}
}

func postRaw(c *http.Client, url string, body []byte, headers map[string]string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// polledGenerate is the generate call the poll benchmarks poll the result
// of: a long local-motion generation, which stays in flight.
var polledGenerate = map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-motion", "prompt": "polled"}}

// createdID is the id a generate answer names: its task's for a Tasks
// client (a CreateTaskResult), else its generation's; "" for neither.
func createdID(resp []byte) string {
	var r struct {
		Result struct {
			TaskID            string `json:"taskId"`
			StructuredContent struct {
				GenerationID string `json:"generationId"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	_ = json.Unmarshal(lastData(resp), &r)
	if r.Result.TaskID != "" {
		return r.Result.TaskID
	}
	return r.Result.StructuredContent.GenerationID
}

// createPolled sends polledGenerate to url as a client declaring caps,
// and returns createdID of the answer.
func createPolled(tb testing.TB, hc *http.Client, url string, caps map[string]any, token string) string {
	tb.Helper()
	code, resp, err := postRaw(hc, url, rpcBody(1, "tools/call", polledGenerate, caps), rpcHeaders("tools/call", "generate", token))
	id := createdID(resp)
	if err != nil || code != 200 || id == "" {
		tb.Fatalf("generate: %d %v %s", code, err, resp)
	}
	return id
}

// lastData returns the JSON of an SSE body's last data line, or the body.
func lastData(b []byte) []byte {
	if !bytes.Contains(b, []byte("data: ")) {
		return b
	}
	var last []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			last = d
		}
	}
	return last
}

// ---- load generator in a child process ----

type loadSpec struct {
	URL         string
	Concurrency int
	Warmup      time.Duration
	Duration    time.Duration
	Headers     map[string]string
	Body        []byte
	Expect      string // substring every good response contains
	Out         string // result file
}

type loadResult struct {
	Total     int // requests completed, warm-up included
	Measured  int // requests completed in the measured window
	Errors    int
	Locked    int // responses or errors mentioning "database is locked"
	ErrSample string
	Elapsed   time.Duration
	P50, P99  float64 // ms, measured window
}

const loadgenEnv = "DARKROOM_BENCH_LOADGEN"

// TestLoadgenChild is the load generator, run only as a child of a
// benchmark (it skips otherwise).
func TestLoadgenChild(t *testing.T) {
	raw := os.Getenv(loadgenEnv)
	if raw == "" {
		t.Skip("load generator for benchmarks; runs only as their child process")
	}
	var s loadSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	res := runLoad(s)
	b, _ := json.Marshal(res)
	if err := os.WriteFile(s.Out, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func runLoad(s loadSpec) loadResult {
	c := benchClient(2 * s.Concurrency)
	start := time.Now()
	measureFrom := start.Add(s.Warmup)
	end := measureFrom.Add(s.Duration)
	var mu sync.Mutex
	var res loadResult
	var lats []time.Duration
	var wg sync.WaitGroup
	for range s.Concurrency {
		wg.Go(func() {
			var mine []time.Duration
			var total, measured, errs, locked int
			var sample string
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				code, body, err := postRaw(c, s.URL, s.Body, s.Headers)
				d := time.Since(t0)
				total++
				bad := err != nil || code != 200 || !bytes.Contains(body, []byte(s.Expect))
				if bad {
					errs++
					msg := fmt.Sprintf("%d %v %.300s", code, err, body)
					if strings.Contains(msg, "database is locked") {
						locked++
					}
					if sample == "" {
						sample = msg
					}
				}
				if !t0.Before(measureFrom) {
					measured++
					mine = append(mine, d)
				}
			}
			mu.Lock()
			res.Total += total
			res.Measured += measured
			res.Errors += errs
			res.Locked += locked
			if res.ErrSample == "" {
				res.ErrSample = sample
			}
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(measureFrom)
	lats = sortedDurations(lats)
	res.P50, res.P99 = pct(lats, 0.50), pct(lats, 0.99)
	return res
}

// loadFromChild runs s in a child process and returns its result and the
// CPU this process (the servers) spent meanwhile.
func loadFromChild(tb testing.TB, s loadSpec) (loadResult, time.Duration) {
	tb.Helper()
	s.Out = filepath.Join(tb.TempDir(), "load.json")
	spec, _ := json.Marshal(s)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadgenChild$", "-test.bench=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), loadgenEnv+"="+string(spec))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cpu0 := cpuTime()
	if err := cmd.Run(); err != nil {
		tb.Fatalf("load generator: %v\n%s", err, out.String())
	}
	cpu := cpuTime() - cpu0
	b, err := os.ReadFile(s.Out)
	if err != nil {
		tb.Fatalf("load generator wrote no result: %v\n%s", err, out.String())
	}
	var r loadResult
	if err := json.Unmarshal(b, &r); err != nil {
		tb.Fatal(err)
	}
	return r, cpu
}

// ---- 1. wake-up latency of wait_generation over HTTP ----

func sdkSession(tb testing.TB, url string) *mcp.ClientSession {
	tb.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: benchVersion})
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { _ = cs.Close() })
	return cs
}

func sdkStructured(res *mcp.CallToolResult) map[string]any {
	var m map[string]any
	if res != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// BenchmarkWakeup: a wait_generation parked on a reserved generation; from
// another session, cancel_generation. Reported: time from just before the
// cancel call to the wait's return, over 200 samples.
func BenchmarkWakeup(b *testing.B) {
	const samples = 200
	arrived := make(chan struct{}, 1)
	// Tell the benchmark when a wait_generation request reaches the server.
	wrap := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if bytes.Contains(body, []byte(`"wait_generation"`)) {
					select {
					case arrived <- struct{}{}:
					default:
					}
				}
			}
			next.ServeHTTP(w, r)
		})
	}
	s := startBenchServer(b, 1, true, wrap)
	waiter, actor := sdkSession(b, s.url), sdkSession(b, s.url)
	ctx := context.Background()
	// When each change was committed and published (the hub runs its
	// subscribers right after commit).
	var pubMu sync.Mutex
	published := map[string]time.Time{}
	s.app.svc.Hub().Subscribe(func(id string) {
		now := time.Now()
		pubMu.Lock()
		if _, ok := published[id]; !ok {
			published[id] = now
		}
		pubMu.Unlock()
	})
	var lats, cancelRTT, fromCommit []time.Duration
	hideNsPerOp(b)
	for range b.N {
		lats, cancelRTT, fromCommit = lats[:0], cancelRTT[:0], fromCommit[:0]
		for range samples {
			res, err := actor.CallTool(ctx, &mcp.CallToolParams{Name: "generate", Arguments: map[string]any{"modelId": "local-animate", "prompt": "waves"}})
			if err != nil || res.IsError {
				b.Fatalf("generate: %v %+v", err, res)
			}
			id, _ := sdkStructured(res)["generationId"].(string)
			if id == "" {
				b.Fatalf("generate returned no generationId: %+v", res)
			}
			done := make(chan time.Time, 1)
			go func() {
				r, err := waiter.CallTool(ctx, &mcp.CallToolParams{Name: "wait_generation", Arguments: map[string]any{"generationId": id, "timeoutSeconds": 30}})
				now := time.Now()
				if err != nil || sdkStructured(r)["status"] != "cancelled" {
					b.Errorf("wait_generation: %v %+v", err, r)
				}
				done <- now
			}()
			<-arrived
			t0 := time.Now()
			if _, err := actor.CallTool(ctx, &mcp.CallToolParams{Name: "cancel_generation", Arguments: map[string]any{"generationId": id}}); err != nil {
				b.Fatal(err)
			}
			cancelRTT = append(cancelRTT, time.Since(t0))
			returned := <-done
			lats = append(lats, returned.Sub(t0))
			pubMu.Lock()
			committed, ok := published[id]
			pubMu.Unlock()
			if !ok {
				b.Fatal("the cancel was never published")
			}
			fromCommit = append(fromCommit, returned.Sub(committed))
		}
	}
	l, c, fc := sortedDurations(lats), sortedDurations(cancelRTT), sortedDurations(fromCommit)
	b.ReportMetric(pct(fc, 0.50), "commit_to_return_p50_ms")
	b.ReportMetric(pct(fc, 0.99), "commit_to_return_p99_ms")
	b.ReportMetric(pct(l, 0.50), "wake_p50_ms")
	b.ReportMetric(pct(l, 0.99), "wake_p99_ms")
	b.ReportMetric(pct(l, 1), "wake_max_ms")
	b.ReportMetric(pct(c, 0.50), "cancel_call_p50_ms")
	b.ReportMetric(samples, "samples")
}

// ---- 2. throughput and memory ----

func generateWait(c *http.Client, url string, i int) error {
	body := rpcBody(int64(i), "tools/call", map[string]any{"name": "generate", "arguments": map[string]any{
		"modelId": "local-sketch", "prompt": fmt.Sprintf("throughput %d", i), "wait": true, "waitSeconds": 120,
	}}, map[string]any{})
	code, resp, err := postRaw(c, url+"/mcp", body, rpcHeaders("tools/call", "generate", ""))
	if err != nil {
		return err
	}
	if code != 200 || !bytes.Contains(resp, []byte(`"status":"completed"`)) {
		return fmt.Errorf("generate wait:true: %d %.300s", code, resp)
	}
	return nil
}

// BenchmarkThroughput: generate with wait:true until completed, on the
// local provider at latency 0 (rendering a 1024x576 PNG dominates), one
// caller and 16 concurrent callers (one principal). The in-flight cap is
// lifted except in the last case, which keeps the default (4).
func BenchmarkThroughput(b *testing.B) {
	cases := []struct {
		name    string
		callers int
		each    int
		cap     int
	}{
		{"sequential", 1, 20, 0},
		{"c16", 16, 6, 0},
		{"c16_default_cap4", 16, 6, 4},
	}
	hideNsPerOp(b)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			s := startBenchServer(b, 0, true, nil, func(cfg *config) { cfg.MaxInFlight = c.cap })
			hc := benchClient(c.callers)
			if err := generateWait(hc, s.url, -1); err != nil { // warm-up
				b.Fatal(err)
			}
			hideNsPerOp(b)
			var elapsed, cpu time.Duration
			for range b.N {
				var errs atomic.Int32
				var wg sync.WaitGroup
				t0, cpu0 := time.Now(), cpuTime()
				for w := range c.callers {
					wg.Go(func() {
						for i := range c.each {
							if err := generateWait(hc, s.url, w*1000+i); err != nil {
								if errs.Add(1) == 1 {
									b.Error(err)
								}
							}
						}
					})
				}
				wg.Wait()
				elapsed, cpu = time.Since(t0), cpuTime()-cpu0
			}
			n := c.callers * c.each
			b.ReportMetric(cpu.Seconds()/elapsed.Seconds()/float64(runtime.GOMAXPROCS(0)), "cpu_busy_fraction")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(n), "cpu_ms/generation")
			b.ReportMetric(float64(n)/elapsed.Seconds(), "generations/s")
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(c.each), "ms/generation_per_caller")
		})
	}
}

func rssKB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return f
		}
	}
	return 0
}

// BenchmarkMemory10k: 10,000 generations created through the service (32
// concurrent creators, runner stopped so that nothing renders); heap in
// use after GC, before and after, and the process's RSS.
func BenchmarkMemory10k(b *testing.B) {
	const n, workers = 10_000, 32
	s := startBenchServer(b, 1, false, nil)
	ctx := context.Background()
	hideNsPerOp(b)
	var before, after runtime.MemStats
	var elapsed time.Duration
	for range b.N {
		runtime.GC()
		runtime.ReadMemStats(&before)
		var next atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		for range workers {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > n {
						return
					}
					_, _, err := s.app.svc.Create(ctx, "local", generation.CreateRequest{ModelID: "local-sketch", Prompt: fmt.Sprintf("memory %d", i)})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed = time.Since(t0)
		runtime.GC()
		runtime.ReadMemStats(&after)
	}
	var stored int
	_ = s.app.db.(*sqlite.DB).Read.QueryRow("SELECT COUNT(*) FROM generations").Scan(&stored)
	if stored < n {
		b.Fatalf("%d generations stored, want %d", stored, n)
	}
	b.ReportMetric(float64(after.HeapInuse)/(1<<20), "heap_inuse_after_MB")
	b.ReportMetric((float64(after.HeapInuse)-float64(before.HeapInuse))/(1<<20), "heap_inuse_growth_MB")
	b.ReportMetric(rssKB()/1024, "rss_MB")
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(ru.Maxrss)/1024, "process_peak_rss_MB")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "creates/s")
}

// ---- 3. tasks/get against a constant net/http handler: see BenchmarkPollPaths (bench_poll_test.go) ----

// ---- 4. durable creation vs a bare SQLite insert loop ----

// sqliteBaseline inserts one row per autocommit on a single connection
// with WAL and synchronous=FULL for d, and returns rows/s and the count of
// "database is locked" errors.
func sqliteBaseline(tb testing.TB, path string, d time.Duration) (float64, int) {
	tb.Helper()
	conn, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	if _, err := conn.Exec(`CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, owner TEXT, model TEXT, prompt TEXT,
		status TEXT, credits INTEGER, charged INTEGER, progress REAL, created TEXT, token BLOB)`); err != nil {
		tb.Fatal(err)
	}
	stmt, err := conn.Prepare("INSERT INTO rows (owner, model, prompt, status, credits, charged, progress, created, token) VALUES (?,?,?,?,?,?,?,?,?)")
	if err != nil {
		tb.Fatal(err)
	}
	defer stmt.Close()
	token := make([]byte, 16)
	n, locked := 0, 0
	t0 := time.Now()
	for time.Since(t0) < d {
		_, err := stmt.Exec("local", "local-sketch", "a durable insert of about the size of a generation row", "queued", 1, 1, 0.0, time.Now().UTC().Format(time.RFC3339Nano), token)
		if err != nil {
			if strings.Contains(err.Error(), "locked") {
				locked++
				continue
			}
			tb.Fatal(err)
		}
		n++
	}
	return float64(n) / time.Since(t0).Seconds(), locked
}

// schemaBaseline makes creations in darkroom's own schema (a generation
// row and its task row, one transaction) one fsync each on a single
// synchronous=FULL connection: what group commit is measured against when
// the rows are the same.
func schemaBaseline(tb testing.TB, path string, d time.Duration) float64 {
	tb.Helper()
	mig, err := sqlite.Open(context.Background(), path) // applies the schema
	if err != nil {
		tb.Fatal(err)
	}
	_ = mig.Close()
	conn, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	conn.SetMaxOpenConns(1)
	q, err := sqlitedb.Prepare(context.Background(), conn)
	if err != nil {
		tb.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	n := 0
	t0 := time.Now()
	for time.Since(t0) < d {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			tb.Fatal(err)
		}
		id, now := generation.NewID(), time.Now().UnixMilli()
		qt := q.WithTx(tx)
		err = qt.InsertGeneration(ctx, sqlitedb.InsertGenerationParams{ID: id, Owner: "local", ModelID: "local-sketch", Provider: "local",
			Kind: "image", Prompt: "durable baseline", Params: `{"aspectRatio":"16:9"}`, Credits: 1, Charged: 1, Status: "queued",
			StatusMessage: "queued", CreatedAt: now, UpdatedAt: now, NextCheckAt: sql.NullInt64{Int64: now, Valid: true}})
		if err == nil {
			err = qt.InsertTask(ctx, sqlitedb.InsertTaskParams{TaskID: generation.NewID(), Owner: "local", Ref: "generation:" + id,
				Status: "working", CreatedAt: now, LastUpdatedAt: now, TtlMs: sql.NullInt64{Int64: 3600000, Valid: true},
				PollIntervalMs: 1000, ExpiresAt: sql.NullInt64{Int64: now + 3600000, Valid: true}, InputRequests: "{}", ClientCaps: "{}"})
		}
		if err != nil {
			_ = tx.Rollback()
			tb.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			tb.Fatal(err)
		}
		n++
	}
	return float64(n) / time.Since(t0).Seconds()
}

// serviceCreates creates generations with their task rows in-process
// (the tool handler's transaction, without HTTP and go-sdk) from conc
// goroutines of one caller for d, and returns creations per second.
func serviceCreates(tb testing.TB, a *app, conc int, d time.Duration) float64 {
	return createLoop(tb, a, conc, d, func(int) string { return "local" })
}

// createLoop is serviceCreates with goroutine w's caller owner(w).
func createLoop(tb testing.TB, a *app, conc int, d time.Duration, owner func(w int) string) float64 {
	tb.Helper()
	var n atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range conc {
		owner := owner(w)
		wg.Go(func() {
			for time.Since(t0) < d {
				_, _, err := a.svc.Create(context.Background(), owner, generation.CreateRequest{
					ModelID: "local-sketch", Prompt: "durable in-process",
					InTx: func(ctx context.Context, tx generation.Tx, g *generation.Generation) error {
						return a.tasks.Store().Create(ctx, tx.(tasks.Tx), &tasks.Task{Owner: owner, Ref: "generation:" + g.ID, TTL: time.Hour})
					},
				})
				if err != nil {
					tb.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(t0).Seconds()
}

// BenchmarkDurableCreate: tools/call generate answered with a
// CreateTaskResult (generation and task rows committed, fsynced, before
// the reply) from 32 concurrent clients in a child process, against two
// single-connection synchronous=FULL baselines on other files of the same
// disk, all interleaved in one run (2 s each, twice):
//
//   - same_rows: darkroom's own creation (a generation row and its task
//     row, with their indexes) committed one per fsync: the insert rate
//     the group-commit writer is measured against;
//   - anchor_row: one 10-column row per autocommit into an unindexed
//     table, the spec's perf-anchor loop (lighter: one row, one B-tree).
//
// The runner is stopped so that only creation is measured. For
// attribution: the same creation in-process (service + task row, no HTTP)
// from 32 goroutines, server CPU per HTTP creation, and the creation rate
// the server's CPU alone would sustain on this machine's cores (the load
// generator shares them here; real clients do not).
func BenchmarkDurableCreate(b *testing.B) {
	const conc = 32
	s := startBenchServer(b, 1, false, nil)
	caps := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	body := rpcBody(3, "tools/call", map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": "durable"}}, caps)
	spec := loadSpec{URL: s.url + "/mcp", Concurrency: conc, Warmup: 300 * time.Millisecond, Duration: 2 * time.Second,
		Headers: rpcHeaders("tools/call", "generate", ""), Body: body, Expect: `"resultType":"task"`}
	anchorPath := filepath.Join(b.TempDir(), "anchor.db")
	rowsPath := filepath.Join(b.TempDir(), "same-rows.db")
	var darkReqs, darkTotal, darkErrs, darkLocked, anchorLocked int
	var darkSecs float64
	var darkCPU time.Duration
	var anchorRates, rowsRates, svcRates []float64
	var errSample string
	hideNsPerOp(b)
	baselines := func() {
		r, l := sqliteBaseline(b, anchorPath, 2*time.Second)
		anchorRates, anchorLocked = append(anchorRates, r), anchorLocked+l
		rowsRates = append(rowsRates, schemaBaseline(b, rowsPath, 2*time.Second))
		svcRates = append(svcRates, serviceCreates(b, s.app, conc, 2*time.Second))
	}
	for range b.N {
		for round := range 2 {
			if round == 0 {
				baselines()
			}
			res, cpu := loadFromChild(b, spec)
			darkReqs += res.Measured
			darkTotal += res.Total
			darkSecs += res.Elapsed.Seconds()
			darkCPU += cpu
			darkErrs += res.Errors
			darkLocked += res.Locked
			if errSample == "" {
				errSample = res.ErrSample
			}
			if round == 1 {
				baselines()
			}
		}
	}
	if darkErrs > 0 {
		b.Errorf("%d failed creations, e.g. %s", darkErrs, errSample)
	}
	var stored int
	_ = s.app.db.(*sqlite.DB).Read.QueryRow("SELECT COUNT(*) FROM tasks").Scan(&stored)
	avg := func(v []float64) float64 {
		var t float64
		for _, x := range v {
			t += x
		}
		return t / float64(len(v))
	}
	dr, ar, rr, sr := float64(darkReqs)/darkSecs, avg(anchorRates), avg(rowsRates), avg(svcRates)
	cpuPer := float64(darkCPU.Microseconds()) / float64(darkTotal)
	b.ReportMetric(dr, "http_creates/s")
	b.ReportMetric(sr, "inprocess_creates/s")
	b.ReportMetric(rr, "same_rows_autocommit_creates/s")
	b.ReportMetric(ar, "anchor_row_autocommit_rows/s")
	b.ReportMetric(dr/rr, "ratio_http_vs_same_rows")
	b.ReportMetric(dr/ar, "ratio_http_vs_anchor_row")
	b.ReportMetric(sr/rr, "ratio_inprocess_vs_same_rows")
	b.ReportMetric(sr/ar, "ratio_inprocess_vs_anchor_row")
	b.ReportMetric(cpuPer, "http_server_cpu_us/create")
	b.ReportMetric(float64(runtime.NumCPU())*1e6/cpuPer, "server_cpu_bound_creates/s")
	b.ReportMetric(float64(darkLocked+anchorLocked), "database_locked_errors")
	b.ReportMetric(float64(darkErrs), "failed_creates")
	b.ReportMetric(float64(stored), "tasks_stored")
}

// ---- 5. notification delivery to 1,000 listen streams ----

type listenStream struct {
	cancelled chan time.Time // when the terminal notification arrived
	ready     chan struct{}  // ack and current state received
}

// openListen subscribes to one task over HTTP and watches for its
// cancelled notification.
func openListen(tb testing.TB, c *http.Client, url, taskID string) *listenStream {
	body := rpcBody(9, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{taskID}}},
		map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}})
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", bytes.NewReader(body))
	for k, v := range rpcHeaders("subscriptions/listen", "", "") {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		tb.Fatalf("listen: %d %s", resp.StatusCode, b)
	}
	ls := &listenStream{cancelled: make(chan time.Time, 1), ready: make(chan struct{})}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		seen := 0
		for sc.Scan() {
			line := sc.Bytes()
			d, ok := bytes.CutPrefix(line, []byte("data: "))
			if !ok {
				continue
			}
			seen++
			if seen == 2 {
				close(ls.ready)
			}
			if bytes.Contains(d, []byte(`"status":"cancelled"`)) {
				ls.cancelled <- time.Now()
				return
			}
		}
	}()
	return ls
}

// reservedTasks creates n generations held for approval, each with its
// task, the way a Tasks client's generate does.
func reservedTasks(tb testing.TB, a *app, n int) (genIDs, taskIDs []string) {
	tb.Helper()
	genIDs, taskIDs = make([]string, n), make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				var task *tasks.Task
				g, _, err := a.svc.Create(context.Background(), "local", generation.CreateRequest{
					ModelID: "local-sketch", Prompt: fmt.Sprintf("notify %d", i), HoldForApproval: true,
					InTx: func(ctx context.Context, tx generation.Tx, g *generation.Generation) error {
						task = &tasks.Task{Owner: "local", Ref: "generation:" + g.ID, TTL: time.Hour, Status: tasks.StatusWorking}
						return a.tasks.Store().Create(ctx, tx.(tasks.Tx), task)
					},
				})
				if err != nil {
					tb.Error(err)
					return
				}
				genIDs[i], taskIDs[i] = g.ID, task.ID
			}
		})
	}
	wg.Wait()
	return genIDs, taskIDs
}

// BenchmarkNotify: 1,000 listen streams over HTTP, one task each. Each
// task's generation is cancelled in-process (the same path as tasks/cancel
// and cancel_generation: commit, hub, tasks broker, SSE). Reported: time
// from just before the cancel to the notification read by the client,
// one change at a time ("seq"), then 1,000 changes from 32 goroutines at
// once ("burst").
func BenchmarkNotify(b *testing.B) {
	const n = 1000
	s := startBenchServer(b, 1, true, nil)
	hc := benchClient(n)
	ctx := context.Background()
	hideNsPerOp(b)
	var seq, burst []time.Duration
	for range b.N {
		for phase := range 2 {
			gens, ids := reservedTasks(b, s.app, n)
			streams := make([]*listenStream, n)
			for i, id := range ids {
				streams[i] = openListen(b, hc, s.url, id)
			}
			for _, ls := range streams {
				select {
				case <-ls.ready:
				case <-time.After(30 * time.Second):
					b.Fatal("a listen stream never acknowledged")
				}
			}
			lats := make([]time.Duration, n)
			change := func(i int) {
				t0 := time.Now()
				if _, out, err := s.app.svc.CancelByID(ctx, gens[i]); err != nil || out != generation.CancelDone {
					b.Errorf("cancel: %v %v", out, err)
					return
				}
				select {
				case at := <-streams[i].cancelled:
					lats[i] = at.Sub(t0)
				case <-time.After(30 * time.Second):
					b.Error("notification never arrived")
				}
			}
			if phase == 0 {
				for i := range n {
					change(i)
				}
				seq = lats
				continue
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					for {
						i := int(next.Add(1)) - 1
						if i >= n {
							return
						}
						change(i)
					}
				})
			}
			wg.Wait()
			burst = lats
		}
	}
	sq, bu := sortedDurations(seq), sortedDurations(burst)
	b.ReportMetric(pct(sq, 0.50), "seq_p50_ms")
	b.ReportMetric(pct(sq, 0.99), "seq_p99_ms")
	b.ReportMetric(pct(bu, 0.50), "burst_p50_ms")
	b.ReportMetric(pct(bu, 0.99), "burst_p99_ms")
	b.ReportMetric(n, "streams")
}

// ---- 6. tasks/get latency vs stored tasks ----

type taskDB struct {
	d   *tasks.Dispatcher
	db  *sqlite.DB
	ids []string
	// spread are 1,000 ids sampled over the whole table, for the read
	// path below the cache.
	spread []string
}

func fillTasks(tb testing.TB, n int) *taskDB {
	tb.Helper()
	d, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "scale.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	store := tasks.NewStore(d.Tasks(), nil)
	// Only the polled ids stay in memory, as in a server: the rest live in
	// the database alone (a 100,000-id slice would tax every GC here).
	td := &taskDB{d: tasks.NewDispatcher(tasks.Options{Store: store}), db: d, ids: make([]string, 0, activeTasks)}
	const batch = 2000
	for start := 0; start < n; start += batch {
		err := d.Tasks().Update(context.Background(), func(ctx context.Context, tx tasks.Tx) error {
			for i := start; i < min(start+batch, n); i++ {
				t := &tasks.Task{Owner: "bench", Ref: "generation:" + generation.NewID(), TTL: 24 * time.Hour,
					ClientCaps: json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}
				if err := store.Create(ctx, tx, t); err != nil {
					return err
				}
				if len(td.ids) < activeTasks {
					td.ids = append(td.ids, t.ID)
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	rows, err := d.Read.Query("SELECT task_id FROM tasks ORDER BY random() LIMIT 1000")
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		td.spread = append(td.spread, id)
	}
	return td
}

// measureUncached reads random tasks of the whole table straight from
// SQLite (the path below the cache) and returns the mean in µs.
func (td *taskDB) measureUncached(tb testing.TB, calls int, rng *rand.Rand) float64 {
	ctx := context.Background()
	t0 := time.Now()
	for range calls {
		if _, err := td.db.Queries.GetTask(ctx, td.spread[rng.IntN(len(td.spread))]); err != nil {
			tb.Fatal(err)
		}
	}
	return float64(time.Since(t0).Microseconds()) / float64(calls)
}

// activeTasks is how many tasks clients are polling at once: the rest of
// the stored tasks are finished ones nobody asks about.
const activeTasks = 1000

func (td *taskDB) measure(tb testing.TB, calls int, rng *rand.Rand) []time.Duration {
	caps := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	lats := make([]time.Duration, 0, calls)
	ctx := context.Background()
	for range calls {
		id := td.ids[rng.IntN(len(td.ids))]
		var req tasks.Request
		_ = json.Unmarshal(rpcBody(1, "tasks/get", map[string]any{"taskId": id}, caps), &req)
		t0 := time.Now()
		_, e := td.d.Call(ctx, "bench", &req, nil)
		lats = append(lats, time.Since(t0))
		if e != nil {
			tb.Fatalf("tasks/get: %v", e)
		}
	}
	return lats
}

// BenchmarkTasksGetScale: tasks/get (dispatcher and SQLite, no HTTP)
// polling the same number of active tasks (1,000) while 1,000 vs 100,000
// tasks are stored, interleaved small/large/large/small, 8 runs of 2,000
// calls each per size: the tasks stored beside the polled ones must not
// slow polling. The ratio compares the median run means, so that one run
// disturbed by a neighbour on this shared machine does not decide it.
func BenchmarkTasksGetScale(b *testing.B) {
	small, large := fillTasks(b, 1_000), fillTasks(b, 100_000)
	rng := rand.New(rand.NewPCG(1, 2))
	hideNsPerOp(b)
	var ls, ll []time.Duration
	var ms, ml []float64 // per-run means, µs
	mean := func(d []time.Duration) float64 {
		var s time.Duration
		for _, x := range d {
			s += x
		}
		return float64(s) / float64(len(d)) / float64(time.Microsecond)
	}
	run := func(td *taskDB, all *[]time.Duration, means *[]float64) {
		l := td.measure(b, 2000, rng)
		*all = append(*all, l...)
		*means = append(*means, mean(l))
	}
	for range b.N {
		small.measure(b, 500, rng) // warm both caches alike
		large.measure(b, 500, rng)
		for range 4 {
			run(small, &ls, &ms)
			run(large, &ll, &ml)
			run(large, &ll, &ml)
			run(small, &ls, &ms)
		}
	}
	var us, ul []float64
	for range 4 {
		us = append(us, small.measureUncached(b, 2000, rng))
		ul = append(ul, large.measureUncached(b, 2000, rng), large.measureUncached(b, 2000, rng))
		us = append(us, small.measureUncached(b, 2000, rng))
	}
	median := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	ss, sl := sortedDurations(ls), sortedDurations(ll)
	b.ReportMetric(mean(ls), "1k_mean_us")
	b.ReportMetric(mean(ll), "100k_mean_us")
	b.ReportMetric(pct(ss, 0.5)*1000, "1k_p50_us")
	b.ReportMetric(pct(sl, 0.5)*1000, "100k_p50_us")
	b.ReportMetric(pct(sl, 0.99)*1000, "100k_p99_us")
	b.ReportMetric(median(ml)/median(ms), "ratio_100k_over_1k")
	b.ReportMetric(pct(sl, 0.5)/pct(ss, 0.5), "p50_ratio_100k_over_1k")
	b.ReportMetric(median(ul)/median(us), "sqlite_read_ratio_100k_over_1k")
}
