package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startHAProxy puts HAProxy (scripts/haproxy.sh: round-robin, no
// stickiness, /readyz checks) in front of backends and returns its base
// URL and state folder; stopped by PID when t ends. It skips when haproxy
// cannot be started, unless DARKROOM_TEST_REQUIRE_PG is set (CI).
func startHAProxy(t *testing.T, backends ...string) (string, string) {
	t.Helper()
	return startHAProxyTimeout(t, 0, backends...)
}

// startHAProxyTimeout is startHAProxy with its client and server idle
// timeout set (0: the script's default, 5 minutes).
func startHAProxyTimeout(t *testing.T, timeout time.Duration, backends ...string) (string, string) {
	t.Helper()
	state := t.TempDir()
	script, _ := filepath.Abs("../../scripts/haproxy.sh")
	cmd := exec.Command(script, append([]string{"start", state}, backends...)...)
	if timeout > 0 {
		cmd.Env = append(os.Environ(), fmt.Sprintf("HAPROXY_TIMEOUT=%dms", timeout.Milliseconds()))
	}
	out, err := cmd.Output()
	if err != nil {
		msg := fmt.Sprintf("haproxy did not start: %v %s", err, stderrOf(err))
		if os.Getenv("DARKROOM_TEST_REQUIRE_PG") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { _ = exec.Command(script, "stop", state).Run() })
	return "http://" + strings.TrimSpace(string(out)), state
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// haproxySessions reads each server's total sessions (stot) from the
// HAProxy stats socket.
func haproxySessions(t *testing.T, state string) map[string]int {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(state, "stats.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("show stat\n"))
	out := map[string]int{}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) > 7 && f[0] == "darkroom" && strings.HasPrefix(f[1], "r") {
			out[f[1]], _ = strconv.Atoi(f[7])
		}
	}
	return out
}

// TestFleetBehindHAProxy: three replica processes on one PostgreSQL
// database, one S3 bucket and one local-provider folder, behind HAProxy
// round-robin, so consecutive requests land on different replicas. Through
// the load balancer: a task to completion, a legacy generate +
// wait_generation, a cancel, an idempotency key repeated; then one replica
// is killed -9 mid-video and the video still completes with exactly one
// provider job, and every id replied resolves. Needs PostgreSQL, the test
// S3 server and haproxy (scripts/test.sh starts the first two); runs in
// the SQLite-engine pass only (it sets its own database).
// replicaEnv is the environment of replicas sharing one PostgreSQL
// (dbURL), a bucket of the test S3 server (named from prefix) and the
// local provider's folder (shared, as a real provider is), behind a
// load balancer on this host. A live replica renews its leases while it
// steps (every lease/3); a killed one's are taken over 3 s after its last
// renewal. latency is DARKROOM_LOCAL_LATENCY.
func replicaEnv(t *testing.T, dbURL, prefix, latency, shared string) []string {
	t.Helper()
	s3 := s3Config(t, prefix+"-"+generation.NewID()[:12])
	return []string{
		"DARKROOM_DATABASE_URL=" + dbURL, "DARKROOM_RUNNER_LEASE=3s",
		"DARKROOM_LOCAL_LATENCY=" + latency, "DARKROOM_LOCAL_DIR=" + shared,
		"DARKROOM_S3_BUCKET=" + s3.Bucket, "DARKROOM_S3_ENDPOINT=" + s3.Endpoint, "DARKROOM_S3_PATH_STYLE=true",
		"DARKROOM_S3_PREFIX=outputs", "DARKROOM_CREATE_BUCKET=true",
		"AWS_ACCESS_KEY_ID=" + envOr("DARKROOM_TEST_S3_ACCESS_KEY", "testkey"),
		"AWS_SECRET_ACCESS_KEY=" + envOr("DARKROOM_TEST_S3_SECRET_KEY", "testsecret"),
		"DARKROOM_TRUSTED_PROXIES=127.0.0.1", "DARKROOM_METRICS_ADDR=off", "DARKROOM_POLL_RATE=50",
	}
}

func TestFleetBehindHAProxy(t *testing.T) {
	if onPostgres() {
		t.Skip("engine-independent: runs in the default pass")
	}
	dbURL := pgtest.URL(t)
	shared := t.TempDir()
	env := replicaEnv(t, dbURL, "fleet", "0.2", shared)
	t0 := time.Now()
	var replicas []*proc
	var dirs, backends []string
	for range 3 {
		d := t.TempDir()
		p := startProcess(t, d, env...)
		replicas, dirs = append(replicas, p), append(dirs, d)
		backends = append(backends, strings.TrimPrefix(p.url, "http://"))
	}
	lb, state := startHAProxy(t, backends...)
	t.Logf("3 replicas and haproxy up in %v", time.Since(t0))
	var ids []string // every generation id replied through the LB

	// A 2026-07-28 client with the Tasks extension: tasks/get until completed.
	rc := &rpcClient{t: t, url: lb, caps: withTasks()}
	r := rc.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "a fleet task"})
	taskID, _ := r.Result["taskId"].(string)
	if r.Result["resultType"] != "task" || taskID == "" {
		t.Fatalf("task generate: %+v %v", r.Error, r.Result)
	}
	if done := rc.waitTask(taskID); done["status"] != "completed" {
		t.Fatalf("task through the LB: %v", done)
	} else {
		sc := done["result"].(map[string]any)["structuredContent"].(map[string]any)
		ids = append(ids, sc["generationId"].(string))
		url := sc["outputs"].([]any)[0].(map[string]any)["url"].(string)
		if code, _ := httpGet(t, url); code != 200 {
			t.Fatalf("output link of the task: %d", code)
		}
	}

	// A legacy client: generate, then wait_generation (on whichever replica).
	legacy := connect(t, lb, "2025-11-25")
	var g, w genView
	call(t, legacy, "generate", map[string]any{"modelId": "local-sketch", "prompt": "a legacy one"}, &g)
	call(t, legacy, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 30}, &w)
	if w.Status != "completed" {
		t.Fatalf("legacy wait_generation: %+v", w)
	}
	ids = append(ids, g.GenerationID)

	cs := connect(t, lb, "2026-07-28")
	// Cancel a running video.
	var v, c genView
	call(t, cs, "generate", map[string]any{"modelId": "local-motion", "prompt": "cancel me"}, &v)
	call(t, cs, "cancel_generation", map[string]any{"generationId": v.GenerationID}, &c)
	if c.Status != "cancelled" {
		call(t, cs, "wait_generation", map[string]any{"generationId": v.GenerationID, "timeoutSeconds": 30}, &c)
		if c.Status != "cancelled" {
			t.Fatalf("cancel through the LB ended %s (%s)", c.Status, c.StatusMessage)
		}
	}
	ids = append(ids, v.GenerationID)

	// One idempotency key, repeated: one generation.
	args := map[string]any{"modelId": "local-sketch", "prompt": "once", "idempotencyKey": "fleet-k1"}
	var a, b, b2 genView
	call(t, cs, "generate", args, &a)
	call(t, cs, "generate", args, &b)
	call(t, cs, "generate", args, &b2)
	if a.GenerationID == "" || a.GenerationID != b.GenerationID || b.GenerationID != b2.GenerationID {
		t.Fatalf("idempotent generate through the LB: %q %q %q", a.GenerationID, b.GenerationID, b2.GenerationID)
	}
	ids = append(ids, a.GenerationID)
	// Its provider job exists before the video's job count is taken.
	var aw genView
	call(t, cs, "wait_generation", map[string]any{"generationId": a.GenerationID, "timeoutSeconds": 30}, &aw)
	if aw.Status != "completed" {
		t.Fatalf("idempotent generate ended %s (%s)", aw.Status, aw.StatusMessage)
	}

	// kill -9 one replica while a video is at the provider.
	before := jobFiles(t, shared)
	var k genView
	call(t, cs, "generate", map[string]any{"modelId": "local-motion", "prompt": "survive a kill"}, &k)
	ids = append(ids, k.GenerationID)
	eventually(t, 20*time.Second, func() bool { return jobFiles(t, shared) != before }, "a provider job")
	if err := replicas[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = replicas[0].cmd.Wait()
	tk := time.Now()
	var kw genView
	for kw.Status != "completed" {
		// A wait the balancer had already sent to the killed replica fails
		// (a POST that reached a replica is not replayed): the client waits
		// again, as any client of a fleet would, on a fresh session.
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait_generation",
			Arguments: map[string]any{"generationId": k.GenerationID, "timeoutSeconds": 30}})
		if err != nil {
			if time.Since(tk) > 45*time.Second {
				t.Fatalf("after the kill: %v", err)
			}
			t.Logf("a wait failed at the kill (%v): waiting again", err)
			cs = connect(t, lb, "2026-07-28")
			continue
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &kw); err != nil {
			t.Fatal(err)
		}
		if kw.Status == "failed" || kw.Status == "cancelled" || time.Since(tk) > 45*time.Second {
			t.Fatalf("after the kill: %s (%s)", kw.Status, kw.StatusMessage)
		}
	}
	t.Logf("video completed %v after the kill", time.Since(tk))
	jobs := jobFiles(t, shared)
	for _, d := range dirs {
		jobs += jobFiles(t, d)
	}
	// Provider jobs: the task's image, the legacy image, the idempotent
	// image and the killed-over video, one each, and the cancelled video's
	// unless the cancel reached it before its submit.
	if jobs < 4 || jobs > 5 || jobFiles(t, shared)-before != 1 {
		t.Fatalf("provider jobs = %d (the video's %d), want 4 or 5 (exactly 1)", jobs, jobFiles(t, shared)-before)
	}
	for _, id := range ids {
		var got genView
		call(t, cs, "get_generation", map[string]any{"generationId": id}, &got)
		if got.GenerationID != id || (got.Status != "completed" && got.Status != "cancelled") {
			t.Fatalf("get_generation %s through the LB: %+v", id, got)
		}
	}
	if got := rc.call("tasks/get", map[string]any{"taskId": taskID}); got.Result["status"] != "completed" {
		t.Fatalf("tasks/get %s after the kill: %+v %v", taskID, got.Error, got.Result)
	}
	sessions := haproxySessions(t, state)
	for _, s := range []string{"r0", "r1", "r2"} {
		if sessions[s] == 0 {
			t.Fatalf("replica %s took no requests: %v (not round-robin?)", s, sessions)
		}
	}
	t.Logf("requests per replica %v; %v in all", sessions, time.Since(t0))
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// TestPollLimitAcrossReplicas: one caller polls flat out through HAProxy
// (round-robin, no stickiness) in front of three replicas on one
// PostgreSQL. Each replica's bucket holds a third of the configured rate
// (the live count comes from the replicas' heartbeats), so the caller is
// admitted the configured rate in all, within ±25%, not three times it;
// pinned to one replica (a sticky balancer) it gets a third.
func TestPollLimitAcrossReplicas(t *testing.T) {
	if onPostgres() {
		t.Skip("engine-independent: runs in the default pass")
	}
	// Each replica's bucket holds a second of its share: a stall of the
	// shared machine shorter than that wastes no tokens (with a fifth of
	// a second, one starved run admitted 22 of 30 per second).
	const rate, burst, secs = 30.0, 30, 4
	shared := sharedDatabase(t)
	limits := func(c *config) { c.PollRate, c.PollBurst = rate, burst }
	var servers []*testServer
	var backends []string
	for range 3 {
		s := startServer(t, 0, shared, limits)
		servers = append(servers, s)
		backends = append(backends, strings.TrimPrefix(s.url, "http://"))
	}
	lb, state := startHAProxy(t, backends...)
	// Heartbeats every 2 s.
	eventually(t, 15*time.Second, func() bool {
		for _, s := range servers {
			if s.app.replicaSplit.N() != 3 {
				return false
			}
		}
		return true
	}, "every replica to count 3 live replicas")
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"00000000000000000000000000000000000000000000",` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`)
	poll := func(hc *http.Client, base string) (int, error) {
		req, _ := http.NewRequest("POST", base+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tasks/get")
		req.Header.Set("Mcp-Name", "00000000000000000000000000000000000000000000")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// flatOut polls base from 4 connections for secs seconds.
	var whyMu sync.Mutex
	why := map[string]int{} // what each failed request got
	fail := func(reason string) {
		whyMu.Lock()
		why[reason]++
		whyMu.Unlock()
	}
	flatOut := func(base string, secs int) (admitted, refused, failed int64) {
		var a, r, f atomic.Int64
		end := time.Now().Add(time.Duration(secs) * time.Second)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				hc := &http.Client{Timeout: 5 * time.Second}
				for time.Now().Before(end) {
					code, err := poll(hc, base)
					switch {
					case err != nil:
						f.Add(1)
						fail(err.Error())
					case code == http.StatusTooManyRequests:
						r.Add(1)
					case code == http.StatusOK:
						a.Add(1)
					default:
						f.Add(1)
						fail(http.StatusText(code))
					}
				}
			})
		}
		wg.Wait()
		return a.Load(), r.Load(), f.Load()
	}
	admitted, refused, failed := flatOut(lb, secs)
	got := float64(admitted-3*((burst+2)/3)) / secs
	t.Logf("flat out for %d s through HAProxy to 3 replicas: %d admitted (%.1f/s beyond the burst, configured %.0f/s), %d refused, %d failed; requests per replica %v",
		secs, admitted, got, rate, refused, failed, haproxySessions(t, state))
	if failed > 0 || refused == 0 {
		log, _ := os.ReadFile(filepath.Join(state, "log"))
		t.Fatalf("%d failed (%v), %d refused: want none failed and the limit reached; haproxy said:\n%s", failed, why, refused, log)
	}
	if got < 0.75*rate || got > 1.25*rate {
		t.Fatalf("admitted %.1f/s across 3 replicas, want %.0f/s ±25%%", got, rate)
	}
	// A sticky balancer: the same caller pinned to one replica (its bucket
	// drained above) gets that replica's share, rate/3: stricter.
	admitted, refused, failed = flatOut(servers[0].url, secs)
	pinned := float64(admitted) / secs
	t.Logf("pinned to one replica: %d admitted (%.1f/s, a third of %.0f/s), %d refused, %d failed", admitted, pinned, rate, refused, failed)
	if failed > 0 || pinned < 0.75*rate/3 || pinned > 1.25*rate/3+float64((burst+2)/3)/secs {
		t.Fatalf("pinned to one replica: %.1f/s admitted, %d failed (%v), want %.0f/s ±25%% and none failed", pinned, failed, why, rate/3)
	}
}
