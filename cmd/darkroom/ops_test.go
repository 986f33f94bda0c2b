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
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape GETs /metrics through h (a real HTTP round trip) and parses the
// Prometheus text format.
func scrape(t *testing.T, h http.Handler, token string) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %s (%s)", resp.Status, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value sums the series of name whose labels include want: a counter's or
// gauge's value, a histogram's sample count.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	total := 0.0
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total
}

type series struct {
	name   string
	labels map[string]string
	want   float64
}

func checkSeries(t *testing.T, fams map[string]*dto.MetricFamily, want []series) {
	t.Helper()
	for _, s := range want {
		if got := value(fams, s.name, s.labels); got != s.want {
			t.Errorf("%s%v = %v, want %v", s.name, s.labels, got, s.want)
		}
	}
}

// scrapeSettled scrapes until every series in want has its value, or for
// at most 5 s: a request is counted when its handler returns, which can be
// just after the client has read the reply.
func scrapeSettled(t *testing.T, h http.Handler, want []series) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		fams := scrape(t, h, "")
		settled := true
		for _, s := range want {
			settled = settled && value(fams, s.name, s.labels) == s.want
		}
		if settled || time.Now().After(deadline) {
			return fams
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func l(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestMetricsAfterScriptedRun: a completed (Replicate, with its webhooks),
// a completed task, a failed, a cancelled and a rate-limited request, a
// replayed and a forged webhook; the counters moved by exactly that.
func TestMetricsAfterScriptedRun(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := providerServer(t, rig, true, func(c *config) { c.CreateRate, c.CreateBurst = 1e-6, 4 })
	cs := connect(t, s.url, "2026-07-28")
	tc := &rpcClient{t: t, url: s.url, caps: withTasks()}
	bytesPut := int64(0)
	outputs := func(g genView) {
		for _, o := range g.Outputs {
			bytesPut += o.Bytes
		}
		// Each output's inline preview is stored beside it.
		if rec, err := s.app.svc.Get(context.Background(), "local", g.GenerationID); err == nil {
			for _, o := range rec.Outputs {
				if o.Preview != nil {
					bytesPut += o.Preview.Bytes
				}
			}
		}
	}

	// Completed at Replicate, its end told by webhook.
	var rep genView
	call(t, cs, "generate", map[string]any{"modelId": "replicate-flux-schnell", "prompt": "a lighthouse", "wait": true, "waitSeconds": 60}, &rep)
	if rep.Status != "completed" {
		t.Fatalf("replicate: %+v", rep)
	}
	outputs(rep)
	// Every delivery about the job, up to its last ("succeeded").
	row := generationRow(t, s, rep.GenerationID)
	var deliveries []tapped
	for {
		d := awaitDelivery(t, rig, row.ProviderJobID)
		deliveries = append(deliveries, d)
		if bytes.Contains(d.Body, []byte(`"succeeded"`)) {
			break
		}
	}
	// A replay of the last delivery, then a forged one.
	last := deliveries[len(deliveries)-1]
	post := func(h http.Header, body []byte) int {
		req, _ := http.NewRequest("POST", s.url+"/webhooks/replicate", bytes.NewReader(body))
		req.Header = h.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(last.Header, last.Body); code != 200 {
		t.Fatalf("replayed delivery: %d", code)
	}
	forged := last.Header.Clone()
	forged.Set("Webhook-Id", "msg_forged")
	if code := post(forged, []byte(`{"id":"x","status":"succeeded"}`)); code != 401 {
		t.Fatalf("forged delivery: %d", code)
	}

	// Completed locally, as a task.
	r := tc.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "a task"})
	if r.Error != nil || r.Result["resultType"] != "task" {
		t.Fatalf("generate (task): %+v %v", r.Error, r.Result)
	}
	var tg genView
	call(t, cs, "wait_generation", map[string]any{"generationId": taskGeneration(t, s, r.Result["taskId"].(string)), "timeoutSeconds": 30}, &tg)
	if tg.Status != "completed" {
		t.Fatalf("task generation: %+v", tg)
	}
	outputs(tg)
	// Failed by the provider: a tool error.
	var failed genView
	if res := call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "a storm [fail]", "wait": true, "waitSeconds": 30}, &failed); !res.IsError {
		t.Fatalf("[fail]: not a tool error: %s", text(res))
	}
	// Cancelled while reserved for its input image: credits refunded.
	var res genView
	call(t, cs, "generate", map[string]any{"modelId": "local-animate", "prompt": "a wave"}, &res)
	var cancelled genView
	call(t, cs, "cancel_generation", map[string]any{"generationId": res.GenerationID}, &cancelled)
	if cancelled.Status != "cancelled" {
		t.Fatalf("cancel: %+v", cancelled)
	}
	// Over the creation burst (4): 429.
	if r := tc.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "one too many"}); r.Status != 429 {
		t.Fatalf("fifth generate: %d", r.Status)
	}

	call2 := func(tool, outcome string) map[string]string {
		return l("transport", "http", "method", "tools/call", "tool", tool, "outcome", outcome)
	}
	want := []series{
		{"darkroom_requests_total", call2("generate", "ok"), 3}, // replicate, task, reserved
		{"darkroom_requests_total", call2("generate", "tool_error"), 1},
		{"darkroom_requests_total", call2("generate", "http_429"), 1},
		{"darkroom_requests_total", call2("cancel_generation", "ok"), 1},
		{"darkroom_requests_total", call2("wait_generation", "ok"), 1},
		{"darkroom_request_duration_seconds", call2("generate", "ok"), 3},
		{"darkroom_rate_limited_total", l("class", "create"), 1},
		{"darkroom_rate_limited_total", nil, 1},
		{"darkroom_generations_created_total", l("model", "replicate-flux-schnell", "provider", "replicate", "path", "generationId"), 1},
		{"darkroom_generations_created_total", l("model", "local-sketch", "path", "task"), 1},
		{"darkroom_generations_created_total", l("model", "local-sketch", "path", "generationId"), 1},
		{"darkroom_generations_created_total", l("model", "local-animate", "path", "generationId"), 1},
		{"darkroom_generations_created_total", nil, 4},
		{"darkroom_generations_finished_total", l("provider", "replicate", "status", "completed"), 1},
		{"darkroom_generations_finished_total", l("model", "local-sketch", "status", "completed"), 1},
		{"darkroom_generations_finished_total", l("model", "local-sketch", "status", "failed", "error_kind", "provider"), 1},
		{"darkroom_generations_finished_total", l("model", "local-animate", "status", "cancelled"), 1},
		{"darkroom_generations_finished_total", nil, 4},
		{"darkroom_generation_time_to_finish_seconds", nil, 4},
		{"darkroom_generation_time_to_submit_seconds", l("provider", "replicate"), 1},
		{"darkroom_generation_time_to_submit_seconds", l("provider", "local"), 2},
		{"darkroom_generations_active", nil, 0},
		{"darkroom_credits_refunded_total", l("model", "local-animate"), 20},
		{"darkroom_credits_refunded_total", nil, 20},
		{"darkroom_provider_calls_total", l("provider", "replicate", "operation", "submit", "outcome", "ok"), 1},
		{"darkroom_provider_calls_total", l("provider", "replicate", "operation", "open_output", "outcome", "ok"), 1},
		{"darkroom_provider_calls_total", l("provider", "local", "operation", "submit", "outcome", "ok"), 2},
		{"darkroom_provider_calls_total", l("operation", "cancel"), 0},
		{"darkroom_webhook_deliveries_total", l("provider", "replicate", "verdict", "duplicate"), 1},
		{"darkroom_webhook_deliveries_total", l("provider", "replicate", "verdict", "refused"), 1},
		{"darkroom_webhook_deliveries_total", l("provider", "replicate"), float64(len(deliveries) + 2)},
		{"darkroom_blob_bytes_total", l("operation", "put"), float64(bytesPut)},
		{"darkroom_storage_errors_total", nil, 0},
		{"darkroom_listen_streams", nil, 0},
		{"darkroom_waiters", nil, 0},
		{"darkroom_runner_queue_depth", nil, 0},
		{"darkroom_store_scrape_ok", nil, 1},
	}
	fams := scrapeSettled(t, s.app.metricsHandler(), want)
	checkSeries(t, fams, want)
	// Accepted or (had the safety poll ended it first) ignored: every
	// delivery the emulator made, each once.
	if a := value(fams, "darkroom_webhook_deliveries_total", l("verdict", "accepted")); a < 1 {
		t.Errorf("accepted deliveries = %v, want at least 1", a)
	}
	charged := value(fams, "darkroom_credits_charged_total", nil)
	if want := float64(rep.Credits + tg.Credits + failed.Credits + res.Credits); charged != want {
		t.Errorf("credits charged = %v, want %v", charged, want)
	}
	for _, name := range []string{"darkroom_store_commit_batch_size", "darkroom_store_commit_duration_seconds", "darkroom_task_cache_misses_total", "go_goroutines", "process_cpu_seconds_total"} {
		if value(fams, name, nil) <= 0 {
			t.Errorf("%s did not move", name)
		}
	}
	// Bounded labels: no id, prompt or principal anywhere.
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, lb := range m.Label {
				v := lb.GetValue()
				if v == rep.GenerationID || v == "local" && lb.GetName() == "principal" || strings.Contains(v, "lighthouse") || len(v) >= 32 {
					t.Errorf("%s has an unbounded label %s=%q", name, lb.GetName(), v)
				}
			}
		}
	}
}

// TestMetricsNeedTheirToken: /metrics is not on the MCP listener unless a
// metrics token is set, and then only with it (an API key is not it).
func TestMetricsNeedTheirToken(t *testing.T) {
	cases := []struct {
		name, token, bearer string
		want                int
	}{
		{"no token configured", "", "", 404},
		{"no token configured, any bearer", "", "anything", 404},
		{"token configured, none sent", "m3trics", "", 401},
		{"token configured, wrong one", "m3trics", "m3tric", 401},
		{"token configured, sent", "m3trics", "m3trics", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := startServer(t, 0, func(cfg *config) { cfg.MetricsToken = c.token })
			req, _ := http.NewRequest("GET", s.url+"/metrics", nil)
			if c.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+c.bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("GET /metrics on the MCP listener: %d, want %d", resp.StatusCode, c.want)
			}
			if got := bytes.Contains(body, []byte("darkroom_generations_active")); got != (c.want == 200) {
				t.Fatalf("metrics in the body: %v", got)
			}
			// The metrics listener asks for the same token.
			mh := httptest.NewServer(s.app.metricsHandler())
			defer mh.Close()
			req, _ = http.NewRequest("GET", mh.URL+"/metrics", nil)
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if want := map[bool]int{true: 401, false: 200}[c.token != ""]; resp.StatusCode != want {
				t.Fatalf("metrics listener without a bearer: %d, want %d", resp.StatusCode, want)
			}
		})
	}
}

func TestListenMetrics(t *testing.T) {
	cases := []struct {
		addr, token string
		listens     bool
		err         string
	}{
		{"", "", false, ""},
		{"127.0.0.1:0", "", true, ""},
		{"[::1]:0", "", true, ""},
		{"localhost:0", "", true, ""},
		{"0.0.0.0:0", "", false, "DARKROOM_METRICS_TOKEN"},
		{":0", "", false, "DARKROOM_METRICS_TOKEN"},
		{"0.0.0.0:0", "t", true, ""},
		{"nonsense", "", false, "DARKROOM_METRICS_ADDR"},
	}
	for _, c := range cases {
		t.Run(c.addr+"/"+c.token, func(t *testing.T) {
			ln, err := listenMetrics(&config{MetricsAddr: c.addr, MetricsToken: c.token}, nil)
			if ln != nil {
				ln.Close()
			}
			if (ln != nil) != c.listens || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("listener %v, err %v; want listener %v, err containing %q", ln != nil, err, c.listens, c.err)
			}
		})
	}
	// The default address, taken: metrics are off, darkroom still starts.
	hold, err := net.Listen("tcp", defaultMetricsAddr)
	if err != nil {
		t.Skipf("default metrics address busy already: %v", err)
	}
	defer hold.Close()
	ln, err := listenMetrics(&config{MetricsAddr: defaultMetricsAddr}, slog.New(slog.DiscardHandler))
	if ln != nil || err != nil {
		t.Fatalf("default address taken: listener %v, err %v", ln != nil, err)
	}
}

// readyz GETs /readyz, returning the status and the checks. The body
// names no path, host, address or error text, whatever failed: a failing
// check is only a category.
func readyz(t *testing.T, url string, secrets ...string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	if (resp.StatusCode == 200) != (body.Status == "ready") {
		t.Fatalf("readyz: %d with status %q", resp.StatusCode, body.Status)
	}
	categories := map[string]bool{"ok": true, "missing": true, "not writable": true, "unreachable": true, "timeout": true,
		"failing": true, "not running": true, "draining": true, "credentials refused": true, "withdrawn": true}
	for name, v := range body.Checks {
		if !categories[v] {
			t.Errorf("readyz check %s = %q: not a category", name, v)
		}
	}
	for _, s := range append(secrets, "127.0.0.1", "localhost", "/") {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("readyz body names %q: %s", s, raw)
		}
	}
	return resp.StatusCode, body.Checks
}

func wantReady(t *testing.T, url string, code int, failing, category string, secrets ...string) {
	t.Helper()
	got, checks := readyz(t, url, secrets...)
	if got != code {
		t.Fatalf("readyz: %d, want %d (%v)", got, code, checks)
	}
	for _, name := range []string{"store", "blobs", "runner", "server"} {
		want := "ok"
		if name == failing {
			want = category
		}
		if checks[name] != want {
			t.Fatalf("readyz check %s = %q, want %q (%v)", name, checks[name], want, checks)
		}
	}
}

// TestReadyzLocalBlobs: the local output folder gone, or not a folder it
// can write, is 503 naming blob storage and the category, never the
// folder; back, 200. Draining is 503 too.
func TestReadyzLocalBlobs(t *testing.T) {
	s := startServer(t, 0)
	wantReady(t, s.url, 200, "", "")
	dir := filepath.Join(s.app.cfg.DataDir, "files")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	wantReady(t, s.url, 503, "blobs", "missing", s.app.cfg.DataDir)
	// A file where the folder was: nothing can be written under it (as
	// root, unlike a folder without write permission).
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wantReady(t, s.url, 503, "blobs", "not writable", s.app.cfg.DataDir)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	wantReady(t, s.url, 200, "", "")
	s.app.draining.Store(true)
	wantReady(t, s.url, 503, "server", "draining")
}

// TestReadyzS3Outage: darkroom's S3 behind a TCP proxy; the proxy stopped
// (S3 unreachable) is 503 naming neither bucket nor address, started
// again 200.
func TestReadyzS3Outage(t *testing.T) {
	bucket := "ready-" + generation.NewID()[:12]
	s3cfg := s3Config(t, bucket)
	p := startProxy(t, strings.TrimPrefix(s3cfg.Endpoint, "http://"))
	s3cfg.Endpoint = "http://" + p.addr
	s := startServer(t, 0, func(c *config) { c.S3 = s3cfg; c.CreateBucket = true })
	wantReady(t, s.url, 200, "", "")
	p.stop()
	readyBecomes(t, s.url, 503, bucket, p.addr)
	wantReady(t, s.url, 503, "blobs", "unreachable", bucket, p.addr)
	p.start(t)
	readyBecomes(t, s.url, 200, bucket, p.addr)
	wantReady(t, s.url, 200, "", "")
}

// TestReadyzDatabaseDown: PostgreSQL behind a TCP proxy; the proxy
// stopped is 503 naming the store's category, never the DSN or its host.
func TestReadyzDatabaseDown(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, u.Host)
	u.Host = p.addr
	s := startServer(t, 0, func(c *config) { c.DatabaseURL = u.String() })
	wantReady(t, s.url, 200, "", "")
	p.stop()
	_, port, _ := net.SplitHostPort(p.addr)
	secrets := []string{strings.TrimPrefix(u.Path, "/"), ":" + port, u.User.Username()}
	readyBecomes(t, s.url, 503, secrets...)
	wantReady(t, s.url, 503, "store", "unreachable", secrets...)
	p.start(t)
	readyBecomes(t, s.url, 200, secrets...)
	wantReady(t, s.url, 200, "", "")
}

// readyBecomes waits, bounded, until /readyz answers code: a backend's
// connections die with its proxy, and the first check after it comes
// back may still meet one (the next dials anew).
func readyBecomes(t *testing.T, url string, code int, secrets ...string) {
	t.Helper()
	eventually(t, 10*time.Second, func() bool { got, _ := readyz(t, url, secrets...); return got == code },
		fmt.Sprintf("/readyz to answer %d", code))
}

// proxy forwards TCP to target; stop closes the listener and every
// connection (the backend is unreachable), start listens again on the
// same address.
type proxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
	wg           sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start(t *testing.T) {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[b] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(b, c); b.Close() }()
			go func() { _, _ = io.Copy(c, b); c.Close() }()
		}
	})
}

func (p *proxy) stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
	p.wg.Wait()
}

// TestHealthcheckCommand: `darkroom healthcheck` against a running server
// (liveness and readiness), and against nothing.
func TestHealthcheckCommand(t *testing.T) {
	s := startServer(t, 0)
	addr := strings.TrimPrefix(s.url, "http://")
	_, port, _ := net.SplitHostPort(addr)
	cases := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"liveness", []string{"--addr", addr}, 0, "/healthz: ok"},
		{"readiness", []string{"--addr", addr, "--ready"}, 0, `"status":"ready"`},
		{"unspecified host", []string{"--addr", "0.0.0.0:" + port}, 0, "127.0.0.1:" + port + "/healthz"},
		{"nothing there", []string{"--addr", "127.0.0.1:1"}, 1, ""},
		{"port 0", []string{"--addr", "127.0.0.1:0"}, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"healthcheck"}, c.args...), &out, &errOut)
			if code != c.code || !strings.Contains(out.String(), c.out) {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, c.code, out.String(), errOut.String())
			}
		})
	}
	s.app.draining.Store(true)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"healthcheck", "--addr", addr, "--ready"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "503") {
		t.Fatalf("readiness while draining: exit %d, stderr %q", code, errOut.String())
	}
}

// TestBannerRedactsDatabasePassword: the start-up line names the
// PostgreSQL database without its password.
func TestBannerRedactsDatabasePassword(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://darkroom:hunter2@db:5432/darkroom?sslmode=disable", "postgres://darkroom:xxxxx@db:5432/darkroom?sslmode=disable"},
		{"postgres://db/darkroom", "postgres://db/darkroom"},
		{"postgres://%zz", "(unparsable URL)"},
	} {
		if got := redactURL(tc.in); got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestMetricsLabelledFromBody: requests are counted under what their body
// asks for, whatever Mcp-Method and Mcp-Name claim (a legacy-era request's
// headers are not checked against its body), and a 429 under the class the
// method is charged as (resources/read is a poll).
func TestMetricsLabelledFromBody(t *testing.T) {
	s := startServer(t, 0, func(c *config) { c.PollRate, c.PollBurst = 1e-6, 1 })
	lie := map[string]string{"Mcp-Method": "tasks/get", "Mcp-Name": "tsk_x"}
	for i := range 3 {
		if code, body := postAs(t, s.url, "", rawPost{headers: lie, body: genLegacy(i + 1)}); code != 200 {
			t.Fatalf("generate %d: %d %s", i, code, body)
		}
	}
	read := `{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"darkroom://nothing"}}`
	postAs(t, s.url, "", rawPost{body: read}) // the poll burst's one token
	if code, body := postAs(t, s.url, "", rawPost{body: read}); code != 429 {
		t.Fatalf("second resources/read: %d %s, want 429", code, body)
	}
	want := []series{
		{"darkroom_requests_total", l("method", "tools/call", "tool", "generate", "outcome", "ok"), 3},
		{"darkroom_requests_total", l("method", "tasks/get"), 0},
		{"darkroom_requests_total", l("method", "resources/read", "outcome", "http_429"), 1},
		{"darkroom_rate_limited_total", l("class", "poll"), 1},
		{"darkroom_rate_limited_total", l("class", "other"), 0},
	}
	checkSeries(t, scrapeSettled(t, s.app.metricsHandler(), want), want)
}

// TestMetricsGuessGuardAndHost: with a metrics token, wrong tokens on
// /metrics (either listener) draw from the same per-address guess budget
// as wrong keys on /mcp, and /metrics answers only a loopback Host on a
// loopback listener, as /mcp does.
func TestMetricsGuessGuardAndHost(t *testing.T) {
	const burst = 3
	for _, listener := range []string{"main", "metrics"} {
		t.Run(listener, func(t *testing.T) {
			clearSettingsEnv(t)
			cfg, err := parseConfig("test", nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg.DataDir, cfg.LocalLatency, cfg.MetricsToken = t.TempDir(), 0, "m3trics"
			key, err := auth.NewAPIKey("alice", []byte("alice-valid-secret"), auth.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Auth = auth.Config{Keys: []auth.APIKey{key}}
			a, err := build(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.close() })
			a.limits.PreAuth.Rate, a.limits.PreAuth.Burst = 1e-9, burst // no refill within the test
			main := httptest.NewServer(a.handler())
			defer main.Close()
			metricsURL := main.URL
			if listener == "metrics" {
				ms := httptest.NewServer(a.metricsHandler())
				defer ms.Close()
				metricsURL = ms.URL
			}
			get := func(token, host string) int {
				req, _ := http.NewRequest("GET", metricsURL+"/metrics", nil)
				req.Header.Set("Authorization", "Bearer "+token)
				if host != "" {
					req.Host = host
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if code := get("m3trics", "rebound.example:80"); code != http.StatusForbidden {
				t.Fatalf("right token, foreign Host: %d, want 403", code)
			}
			for i := range burst {
				if code := get(fmt.Sprintf("guess-%d", i), ""); code != http.StatusUnauthorized {
					t.Fatalf("wrong token %d: %d, want 401", i, code)
				}
			}
			if code := get("guess-last", ""); code != http.StatusTooManyRequests {
				t.Fatalf("wrong token past the budget: %d, want 429", code)
			}
			if code := get("m3trics", ""); code != http.StatusOK {
				t.Fatalf("right token after the guesses: %d, want 200", code)
			}
			// The same budget: a wrong API key on /mcp is refused too.
			if code, _ := postAs(t, main.URL, "wrong-key", rawPost{body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}); code != http.StatusTooManyRequests {
				t.Fatalf("wrong key on /mcp after the metrics guesses: %d, want 429", code)
			}
		})
	}
}
