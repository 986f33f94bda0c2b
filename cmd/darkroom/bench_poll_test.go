package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// ---- poll paths: plain handler, tasks/get and get_generation, each its own process ----

const (
	benchServerEnv = "DARKROOM_BENCH_SERVER"
	// benchProfileEnv names a directory for the server children's CPU
	// profiles (go tool pprof), when set.
	benchProfileEnv = "DARKROOM_BENCH_PROFILE_DIR"
	benchToken      = "secret-bench-0123456789"
	// benchBeforeEnv names the test binary of an earlier revision
	// (scripts/bench.sh builds it): BenchmarkPollPaths then runs that
	// revision's darkroom beside this one, in the same run.
	benchBeforeEnv = "DARKROOM_BENCH_BEFORE"
)

// serverSpec tells a server child what to serve: "plain" answers Body to
// every request; "darkroom" is darkroom with one API key on Dir.
type serverSpec struct {
	Kind     string
	Dir      string
	Body     []byte
	AddrFile string
	// Keys, when set, replaces the one bench key (DARKROOM_API_KEYS
	// format, overrides included), and the default limits apply.
	Keys string
	// CPUs, when set, pins the child to these CPUs (taskset -c).
	CPUs string
	// LongLived lifts the open-listen bound and serves /metrics beside
	// /mcp (BenchmarkLongLived reads go_goroutines there).
	LongLived bool
	// bin, when set, is the test binary to run instead of this one (an
	// earlier revision's: benchBeforeEnv).
	bin string
}

// TestBenchServerChild is a server for BenchmarkPollPaths, run only as its
// child process (it skips otherwise): it writes its address to AddrFile
// and serves until stdin closes.
func TestBenchServerChild(t *testing.T) {
	raw := os.Getenv(benchServerEnv)
	if raw == "" {
		t.Skip("server for benchmarks; runs only as their child process")
	}
	var s serverSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler
	var timeouts *server.Timeouts
	switch s.Kind {
	case "plain":
		// The plain net/http limit: read the body, answer a constant.
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = r.Body.Read(make([]byte, 4096))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(s.Body)))
			_, _ = w.Write(s.Body)
		})
	case "darkroom":
		cfg, err := parseConfig("bench", nil)
		if err != nil {
			t.Fatal(err)
		}
		keyList := s.Keys
		if keyList == "" {
			keyList = "bench=" + benchToken
			cfg.PollRate, cfg.PollBurst = 1e6, 1_000_000
			cfg.CreateRate, cfg.CreateBurst = 1e6, 1_000_000
			// A run sends more than the default byte burst (32 MiB):
			// the bytes bucket would refuse the last phases.
			cfg.ByteRate, cfg.ByteBurst = 1<<40, 1<<40
		}
		keys, err := auth.ParseKeyList(keyList, "bench")
		if err != nil {
			t.Fatal(err)
		}
		cfg.DataDir, cfg.PublicURL, cfg.Auth = s.Dir, "http://"+ln.Addr().String(), auth.Config{Keys: keys}
		if s.LongLived {
			cfg.MaxListens = 1 << 20
			raiseNoFile(t)
		}
		a, err := build(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer a.close()
		h, timeouts = a.handler(), &cfg.Timeouts
		if s.LongLived {
			mux := http.NewServeMux()
			mux.Handle("/metrics", a.metricsGate())
			mux.Handle("/", h)
			h = mux
		}
	default:
		t.Fatalf("unknown server kind %q", s.Kind)
	}
	srv := &http.Server{Handler: h}
	if timeouts != nil { // darkroom as darkroom serve serves it: its timeouts and connection rules
		srv = server.HTTPServer(h, *timeouts)
	}
	go func() { _ = srv.Serve(ln) }()
	if err := os.WriteFile(s.AddrFile, []byte(ln.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _ = os.Stdin.Read(make([]byte, 1)) // the parent closes stdin to stop us
	_ = srv.Close()
}

// serverChild is a running server child.
type serverChild struct {
	cmd  *exec.Cmd
	url  string
	stop func()
}

func startServerChild(tb testing.TB, s serverSpec) *serverChild {
	tb.Helper()
	s.AddrFile = filepath.Join(tb.TempDir(), "addr")
	spec, _ := json.Marshal(s)
	args := []string{"-test.run=^TestBenchServerChild$", "-test.bench=^$", "-test.count=1"}
	if dir := os.Getenv(benchProfileEnv); dir != "" {
		// Profiling a server under load: one CPU profile per child.
		f, err := os.CreateTemp(dir, s.Kind+"-*.cpu")
		if err != nil {
			tb.Fatal(err)
		}
		_ = f.Close()
		args = append(args, "-test.cpuprofile="+f.Name())
	}
	bin := os.Args[0]
	if s.bin != "" {
		bin = s.bin
	}
	cmd := pinned(s.CPUs, bin, args...)
	cmd.Env = append(os.Environ(), benchServerEnv+"="+string(spec))
	stdin, out := startChild(tb, cmd)
	c := &serverChild{cmd: cmd}
	c.stop = func() { _ = stdin.Close(); _ = cmd.Wait() }
	tb.Cleanup(c.stop)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if b, err := os.ReadFile(s.AddrFile); err == nil && len(b) > 0 {
			c.url = "http://" + string(b) + "/mcp"
			return c
		}
		if time.Now().After(deadline) {
			tb.Fatalf("server child did not start:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startChild starts a benchmark's child process, which runs until its
// stdin closes, its output collected.
func startChild(tb testing.TB, cmd *exec.Cmd) (stdin io.WriteCloser, out *bytes.Buffer) {
	tb.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	return stdin, out
}

// pinned is exec.Command(name, args...) on the given CPUs (taskset -c),
// or on any when cpus is "".
func pinned(cpus, name string, args ...string) *exec.Cmd {
	if cpus == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("taskset", append([]string{"-c", cpus, name}, args...)...)
}

// cpu is the child's user+system CPU so far, from /proc/PID/stat.
func (c *serverChild) cpu(tb testing.TB) time.Duration { return processCPU(tb, c.cmd.Process.Pid) }

// processCPU is a process's user+system CPU so far, from /proc/PID/stat.
func processCPU(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatalf("server CPU: %v", err)
	}
	// Fields after the parenthesised command: state is field 3, utime 14,
	// stime 15 (clock ticks, 100 a second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}

// pollTarget is one side of the comparison.
type pollTarget struct {
	name    string
	srv     *serverChild
	body    []byte
	headers map[string]string
	expect  string
	// per concurrency: req/s, p50, p99, server µs/req, one per run
	rate, p50, p99, cpu map[int][]float64
}

// BenchmarkPollPaths: polling one working generation three ways, each
// server its own process, one load generator (a child process) for all:
// the plain net/http handler answering a constant body of tasks/get's
// size, darkroom tasks/get, and darkroom get_generation for a 2026-07-28
// client without the Tasks extension (API key, limits and header checks
// on both). With benchBeforeEnv set (make bench sets it), an earlier
// revision's tasks/get and get_generation run too, as their own
// processes: before and after in one run. Runs interleave the targets,
// 3 repetitions at 8 and at 32 clients. Reports per target req/s, p50/p99
// (ms) and server CPU per request (µs, from /proc/PID/stat), medians of
// the runs, and the ratios the goals are stated in; the log lists each
// figure's range over the runs.
func BenchmarkPollPaths(b *testing.B) {
	const reps = 3
	concs := []int{8, 32}
	hc := benchClient(1)
	caps := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	// pair is one revision's tasks/get and get_generation, each polling a
	// working generation of its own server.
	pair := func(suffix, bin string) (taskGet, getGen *pollTarget) {
		dark := func() *serverChild {
			return startServerChild(b, serverSpec{Kind: "darkroom", Dir: b.TempDir(), bin: bin})
		}
		tg, gg := dark(), dark()
		tid := createPolled(b, hc, tg.url, caps, benchToken)
		gid := createPolled(b, hc, gg.url, map[string]any{}, benchToken)
		taskGet = &pollTarget{name: "tasks_get" + suffix, srv: tg, body: rpcBody(2, "tasks/get", map[string]any{"taskId": tid}, caps),
			headers: rpcHeaders("tasks/get", tid, benchToken), expect: `"status":"working"`}
		getGen = &pollTarget{name: "get_generation" + suffix, srv: gg,
			body:    rpcBody(2, "tools/call", map[string]any{"name": "get_generation", "arguments": map[string]any{"generationId": gid}}, map[string]any{}),
			headers: rpcHeaders("tools/call", "get_generation", benchToken), expect: `"status":"queued"`}
		if code, r, err := postRaw(hc, getGen.srv.url, getGen.body, getGen.headers); err != nil || code != 200 || !bytes.Contains(r, []byte(getGen.expect)) {
			b.Fatalf("get_generation%s: %d %v %s", suffix, code, err, r)
		}
		return taskGet, getGen
	}
	taskGet, getGen := pair("", "")
	code, sample, err := postRaw(hc, taskGet.srv.url, taskGet.body, taskGet.headers)
	if err != nil || code != 200 || !bytes.Contains(sample, []byte(taskGet.expect)) {
		b.Fatalf("tasks/get: %d %v %s", code, err, sample)
	}
	plain := &pollTarget{name: "plain", srv: startServerChild(b, serverSpec{Kind: "plain", Body: sample}),
		body: taskGet.body, headers: taskGet.headers, expect: `"status":"working"`}
	targets := []*pollTarget{plain, taskGet, getGen}
	type side struct {
		label           string
		taskGet, getGen *pollTarget
	}
	sides := []side{{"", taskGet, getGen}}
	if bin := os.Getenv(benchBeforeEnv); bin != "" {
		tb, gb := pair("_before", bin)
		targets = append(targets, tb, gb)
		sides = append([]side{{" before", tb, gb}}, sides[0])
		sides[1].label = " after"
	}
	for _, t := range targets {
		t.rate, t.p50, t.p99, t.cpu = map[int][]float64{}, map[int][]float64{}, map[int][]float64{}, map[int][]float64{}
	}
	hideNsPerOp(b)
	for range b.N {
		for rep := range reps {
			for _, conc := range concs {
				// Rotate the order each repetition so no target always
				// runs first or last.
				order := slices.Clone(targets)
				for range rep {
					order = append(order[1:], order[0])
				}
				for _, t := range order {
					cpu0 := t.srv.cpu(b)
					r, _ := loadFromChild(b, loadSpec{URL: t.srv.url, Concurrency: conc, Warmup: 300 * time.Millisecond, Duration: 1500 * time.Millisecond,
						Headers: t.headers, Body: t.body, Expect: t.expect})
					cpu := t.srv.cpu(b) - cpu0
					if r.Errors > 0 {
						b.Fatalf("%s: %d errors: %s", t.name, r.Errors, r.ErrSample)
					}
					t.rate[conc] = append(t.rate[conc], float64(r.Measured)/r.Elapsed.Seconds())
					t.p50[conc] = append(t.p50[conc], r.P50)
					t.p99[conc] = append(t.p99[conc], r.P99)
					t.cpu[conc] = append(t.cpu[conc], float64(cpu.Microseconds())/float64(r.Total))
				}
			}
		}
	}
	var log strings.Builder
	fmt.Fprintf(&log, "poll paths, %d runs each (median [min–max]):\n", reps)
	for _, conc := range concs {
		for _, t := range targets {
			fmt.Fprintf(&log, "  c%-2d %-22s %s req/s  p50 %s ms  p99 %s ms  server %s µs/req\n", conc, t.name,
				spread(t.rate[conc], "%.0f"), spread(t.p50[conc], "%.2f"), spread(t.p99[conc], "%.2f"), spread(t.cpu[conc], "%.0f"))
			b.ReportMetric(median(t.rate[conc]), fmt.Sprintf("%s_c%d_req/s", t.name, conc))
			b.ReportMetric(median(t.p99[conc]), fmt.Sprintf("%s_c%d_p99_ms", t.name, conc))
			b.ReportMetric(median(t.cpu[conc]), fmt.Sprintf("%s_c%d_cpu_us/req", t.name, conc))
		}
		// Ratios of runs next to each other (same repetition), each side
		// against the one plain handler.
		for _, sd := range sides {
			thr := ratios(sd.taskGet.rate[conc], plain.rate[conc])
			cpuTG := ratios(sd.taskGet.cpu[conc], plain.cpu[conc])
			cpuGG := ratios(sd.getGen.cpu[conc], sd.taskGet.cpu[conc])
			fmt.Fprintf(&log, "  c%-2d%s ratio tasks/get÷plain req/s %s (goal ≥ 0.8); cpu/req tasks/get÷plain %s (goal ≤ 1.3); get_generation÷tasks/get %s (goal ≤ 1.5)\n",
				conc, sd.label, spread(thr, "%.2f"), spread(cpuTG, "%.2f"), spread(cpuGG, "%.2f"))
			tag := strings.ReplaceAll(strings.TrimSpace(sd.label), " ", "_")
			if tag != "" {
				tag = "_" + tag
			}
			b.ReportMetric(median(thr), fmt.Sprintf("ratio_c%d_tasks_get_vs_plain_req/s%s", conc, tag))
			b.ReportMetric(median(cpuTG), fmt.Sprintf("ratio_c%d_tasks_get_vs_plain_cpu%s", conc, tag))
			b.ReportMetric(median(cpuGG), fmt.Sprintf("ratio_c%d_get_generation_vs_tasks_get_cpu%s", conc, tag))
		}
	}
	b.Log(log.String())
}

func ratios(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] / b[i]
	}
	return out
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func spread(v []float64, format string) string {
	return fmt.Sprintf(format+" ["+format+"–"+format+"]", median(v), slices.Min(v), slices.Max(v))
}
