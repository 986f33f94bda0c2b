package main

// TestSoak: a soak under faults (make soak runs it for 20 minutes; the
// normal suite for 2). Three darkroom serve replicas on a PostgreSQL of
// the test's own, behind HAProxy, with the test S3 server behind a TCP
// proxy of the test's (soakProxy, so an S3 cut is this proxy refusing,
// not the shared server stopping), the provider emulator's Replicate and
// fal (webhooks delivered through the load balancer) and the local
// provider. Goroutine clients mix creates (images, videos, masked edits of
// earlier outputs, image-to-video with upload_input), polls on both paths
// (tasks/get, get_generation), subscriptions/listen, wait_generation,
// cancels, a caller on a daily budget and a hostile caller (over its poll
// and create rates, oversized bodies). Faults come in turn, one per
// interval: kill -9 of a replica, a PostgreSQL restart, S3 cut for 20 s,
// the providers answering 500 for 30 s, a webhook storm of replayed
// deliveries. The report (soak.csv, soak.png) goes to DARKROOM_SOAK_REPORT.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/soakchart"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// soakProxy is a TCP proxy the test controls: cut, it refuses (closes)
// every connection and drops the ones open.
type soakProxy struct {
	ln     net.Listener
	target atomic.Value // string
	cut    atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startSoakProxy(t *testing.T, target string) *soakProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &soakProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.target.Store(target)
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			to, _ := p.target.Load().(string)
			if p.cut.Load() || to == "" {
				_ = c.Close()
				continue
			}
			p.wg.Go(func() { p.pipe(c, to) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

func (p *soakProxy) addr() string { return p.ln.Addr().String() }

func (p *soakProxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		if p.cut.Load() {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *soakProxy) pipe(c net.Conn, to string) {
	defer c.Close()
	d, err := net.DialTimeout("tcp", to, 2*time.Second)
	if err != nil {
		return
	}
	defer d.Close()
	if !p.track(c, true) || !p.track(d, true) {
		return
	}
	defer p.track(c, false)
	defer p.track(d, false)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(d, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, d); done <- struct{}{} }()
	<-done
}

// setCut cuts (or restores) the proxy; cutting closes the open connections.
func (p *soakProxy) setCut(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut.Store(on)
	if on {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}

// soakPG is a PostgreSQL of the soak's own (scripts/pg-test-server.sh
// with its own state folder), so restarting it disturbs no other test.
type soakPG struct {
	script, state, url string
}

func startSoakPG(t *testing.T) *soakPG {
	t.Helper()
	if os.Getenv("DARKROOM_TEST_DATABASE_URL") == "" {
		if os.Getenv("DARKROOM_TEST_REQUIRE_PG") != "" {
			t.Fatal("DARKROOM_TEST_DATABASE_URL is not set: start scripts/pg-test-server.sh")
		}
		t.Skip("no PostgreSQL: start scripts/pg-test-server.sh and source its env file")
	}
	// The server runs as the postgres user, who cannot enter t.TempDir's
	// private parent: the state folder is a sibling in the temp folder.
	state, err := os.MkdirTemp("", "darkroom-soak-pg-")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("../../scripts/pg-test-server.sh")
	pg := &soakPG{script: script, state: state}
	out, err := pg.run("start")
	if err != nil {
		t.Fatalf("the soak's PostgreSQL did not start: %v %s", err, stderrOf(err))
	}
	t.Cleanup(func() { _, _ = pg.run("stop"); _ = os.RemoveAll(state) })
	env, err := os.ReadFile(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(env)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "export DARKROOM_TEST_DATABASE_URL="); ok {
			pg.url = v
		}
	}
	if pg.url == "" {
		t.Fatalf("no URL in %s", env)
	}
	return pg
}

func (pg *soakPG) run(op string) ([]byte, error) {
	cmd := exec.Command(pg.script, op)
	cmd.Env = append(os.Environ(), "DARKROOM_PG_STATE="+pg.state)
	return cmd.Output()
}

// soakMethods are the methods whose latency the report gives.
var soakMethods = []string{"generate", "tasks/get", "get_generation", "wait_generation", "cancel_generation", "subscriptions/listen", "upload_input"}

type soakBucket struct {
	lat    map[string][]time.Duration
	errs   map[string]int
	faults []string
	rss    [3]float64 // MiB; NaN: no sample
	gor    [3]float64
	heap   [3]float64 // MiB of Go heap in use: RSS growing without it is the runtime's, not ours
}

// soakRec is one accepted generation (or task), as the clients saw it.
type soakRec struct {
	key, model, prompt string // key: "gen:ID" or "task:ID"
	genID, taskID      string
	owner              string // the API key's name
	credits            int64
	accepted           time.Time
	terminal           string
	terminalAt         time.Time
	message            string
}

type soakFault struct {
	kind, note        string
	start, end        time.Time
	recovered, bound  time.Duration
	ok                bool
	bucket            int
	readiness, probes time.Duration
}

// soak is one run's shared state.
type soak struct {
	t       *testing.T
	lb      string
	start   time.Time
	every   time.Duration // the report's interval
	loadEnd time.Time
	drainBy time.Time

	mu         sync.Mutex
	buckets    []*soakBucket
	recs       map[string]*soakRec
	violations []string
	samples    map[string]int // kinds of error already logged
	faults     []*soakFault
	faultWG    sync.WaitGroup
	// awaited are the ids a running recovery waits for: a generation in
	// flight across two faults is the first one's to recover, within its
	// bound, not the next one's (faults come every minute, a PostgreSQL
	// restart's bound is longer).
	awaited map[string]bool
}

func (s *soak) bucket(at time.Time) *soakBucket {
	i := max(0, int(at.Sub(s.start)/s.every))
	for len(s.buckets) <= i {
		b := &soakBucket{lat: map[string][]time.Duration{}, errs: map[string]int{}}
		for r := range 3 {
			b.rss[r], b.gor[r], b.heap[r] = math.NaN(), math.NaN(), math.NaN()
		}
		s.buckets = append(s.buckets, b)
	}
	return s.buckets[i]
}

func (s *soak) observe(method string, d time.Duration, kind string, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucket(time.Now())
	if kind == "" {
		b.lat[method] = append(b.lat[method], d)
		return
	}
	b.errs[kind]++
	if s.samples[kind] < 3 {
		s.samples[kind]++
		s.t.Logf("%s %s: %s (%s)", time.Since(s.start).Round(time.Second), method, kind, detail)
	}
}

func (s *soak) violate(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

func (s *soak) accept(r *soakRec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.accepted = time.Now()
	s.recs[r.key] = r
}

// see records a status seen for key; a terminal status, once seen, must
// never change.
func (s *soak) see(key, status, message string) bool {
	terminal := status == "completed" || status == "failed" || status == "cancelled"
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs[key]
	if r == nil {
		return terminal
	}
	if r.terminal != "" && r.terminal != status {
		s.violations = append(s.violations, fmt.Sprintf("%s was %s, now %s", key, r.terminal, status))
	}
	if terminal && r.terminal == "" {
		r.terminal, r.terminalAt, r.message = status, time.Now(), message
	}
	return terminal
}

// pending lists the ids in flight that no running recovery awaits yet,
// and marks them awaited (release unmarks them). The hostile caller's are
// left out: its own flood keeps its polls refused (the point of it), so
// when it sees a generation end says nothing about the server's recovery.
func (s *soak) pending() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.awaited == nil {
		s.awaited = map[string]bool{}
	}
	var out []string
	for k, r := range s.recs {
		if r.terminal == "" && !s.awaited[k] && r.owner != "hostile" {
			out = append(out, k)
			s.awaited[k] = true
		}
	}
	return out
}

// release ends a recovery's wait for ids.
func (s *soak) release(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range ids {
		delete(s.awaited, k)
	}
}

func (s *soak) allTerminal(keys []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if s.recs[k].terminal == "" {
			return false
		}
	}
	return true
}

// classify names what went wrong with a reply ("" when nothing did).
func classify(r rpcReply, err error) (kind, detail string) {
	switch {
	case err != nil:
		return "transport", err.Error()
	case r.Status == http.StatusTooManyRequests || (r.Error != nil && r.Error.Code == -31429):
		return "refused_429", ""
	case r.Status >= 400:
		return fmt.Sprintf("http_%d", r.Status), ""
	case r.Error != nil:
		return fmt.Sprintf("rpc_%d", r.Error.Code), r.Error.Message
	case r.Result["isError"] == true:
		msg := fmt.Sprint(r.Result["content"])
		if sc, _ := r.Result["structuredContent"].(map[string]any); sc["status"] == "failed" {
			return "generation_failed", msg
		}
		if strings.Contains(msg, "balance") || strings.Contains(msg, "budget") {
			return "budget_refused", msg
		}
		return "tool_error", msg
	}
	return "", ""
}

// soakClient is one caller (an API key) with its own connections.
type soakClient struct {
	s     *soak
	name  string
	token string
	hc    *http.Client
	tasks bool
}

func (c *soakClient) caps() map[string]any {
	if c.tasks {
		return withTasks()
	}
	return map[string]any{}
}

// do is one request, timed and classified into the report.
func (c *soakClient) do(method string, params map[string]any) (rpcReply, string) {
	t0 := time.Now()
	r, err := rpcDo(c.hc, c.s.lb, c.token, c.caps(), method, params)
	label := method
	if method == "tools/call" {
		label, _ = params["name"].(string)
	}
	kind, detail := classify(r, err)
	c.s.observe(label, time.Since(t0), kind, detail)
	return r, kind
}

func (c *soakClient) tool(name string, args map[string]any) (rpcReply, string) {
	return c.do("tools/call", map[string]any{"name": name, "arguments": args})
}

func structured(r rpcReply) map[string]any {
	sc, _ := r.Result["structuredContent"].(map[string]any)
	return sc
}

// retryable kinds: the request may not have reached a replica, or its
// reply was lost; a create retried with its idempotency key is one create.
func retryable(kind string) bool {
	return kind == "transport" || strings.HasPrefix(kind, "http_5") || strings.HasPrefix(kind, "rpc_-326")
}

// create starts a generation with an idempotency key, retrying while the
// fleet is unreachable; it returns the reply of the attempt answered.
func (c *soakClient) create(args map[string]any) (rpcReply, string) {
	args["idempotencyKey"] = "soak-" + generation.NewID()[:20]
	for {
		r, kind := c.tool("generate", args)
		if !retryable(kind) || time.Now().After(c.s.drainBy) {
			return r, kind
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// follow polls a legacy generation until terminal (get_generation, or
// wait_generation when wait).
func (c *soakClient) follow(key, id string, wait bool) {
	for time.Now().Before(c.s.drainBy) {
		var r rpcReply
		var kind string
		if wait {
			r, kind = c.tool("wait_generation", map[string]any{"generationId": id, "timeoutSeconds": 20})
		} else {
			r, kind = c.tool("get_generation", map[string]any{"generationId": id})
		}
		// A failed generation's reply is a tool error with its status.
		if sc := structured(r); sc["status"] != nil && !retryable(kind) {
			st, _ := sc["status"].(string)
			msg, _ := sc["statusMessage"].(string)
			if c.s.see(key, st, msg) {
				return
			}
		}
		if !wait || kind != "" {
			time.Sleep(250 * time.Millisecond)
		}
	}
}

// followTask polls tasks/get until terminal, honouring pollIntervalMs.
func (c *soakClient) followTask(key, id string) {
	for time.Now().Before(c.s.drainBy) {
		r, kind := c.do("tasks/get", map[string]any{"taskId": id})
		ms := 250.0
		if kind == "" {
			st, _ := r.Result["status"].(string)
			c.taskSeen(key, st, r.Result)
			if st == "completed" || st == "failed" || st == "cancelled" {
				return
			}
			if v, ok := r.Result["pollIntervalMs"].(float64); ok {
				ms = min(max(v, 100), 500)
			}
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

// taskSeen records a task's status and, when it names it, its generation.
func (c *soakClient) taskSeen(key, st string, task map[string]any) {
	res, _ := task["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	msg, _ := sc["statusMessage"].(string)
	if id, _ := sc["generationId"].(string); id != "" {
		c.s.mu.Lock()
		if r := c.s.recs[key]; r != nil && r.genID == "" {
			r.genID = id
		}
		c.s.mu.Unlock()
	}
	c.s.see(key, st, msg)
}

// listen follows a task on subscriptions/listen until its terminal
// notification; false when the stream ended first (the caller polls).
func (c *soakClient) listen(key, id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := rpcRequest(c.s.lb, c.token, c.caps(), "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
	t0 := time.Now()
	resp, err := c.hc.Do(req.WithContext(ctx))
	if err != nil {
		c.s.observe("subscriptions/listen", 0, "transport", err.Error())
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		kind := fmt.Sprintf("http_%d", resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests {
			kind = "refused_429"
		}
		c.s.observe("subscriptions/listen", 0, kind, "")
		return false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	acked := false
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			ID     any            `json:"id"`
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if json.Unmarshal([]byte(d), &m) != nil {
			continue
		}
		if !acked {
			acked = true
			c.s.observe("subscriptions/listen", time.Since(t0), "", "")
		}
		if m.ID != nil {
			return false
		}
		if m.Method == "notifications/tasks" {
			st, _ := m.Params["status"].(string)
			c.taskSeen(key, st, m.Params)
			if st == "completed" || st == "failed" || st == "cancelled" {
				return true
			}
		}
	}
	return false
}

var soakSeq atomic.Int64

func soakPrompt(what string) string {
	return fmt.Sprintf("soak %d %s", soakSeq.Add(1), what)
}

// taskCycle: a Tasks client creates and follows on tasks/get or listen.
func (c *soakClient) taskCycle(model string, listen bool) {
	p := soakPrompt(model)
	args := map[string]any{"modelId": model, "prompt": p}
	if strings.Contains(model, "motion") {
		args["durationSeconds"] = 2
	}
	r, kind := c.create(args)
	id, _ := r.Result["taskId"].(string)
	if kind != "" || id == "" {
		return
	}
	key := "task:" + id
	c.s.accept(&soakRec{key: key, taskID: id, model: model, prompt: p, owner: c.name})
	if listen && c.listen(key, id) {
		return
	}
	c.followTask(key, id)
}

// legacyCycle: a tool-only client creates and follows the generation.
func (c *soakClient) legacyCycle(model string, wait bool) *soakRec {
	p := soakPrompt(model)
	args := map[string]any{"modelId": model, "prompt": p}
	if strings.Contains(model, "motion") {
		args["durationSeconds"] = 2
	}
	r, kind := c.create(args)
	sc := structured(r)
	id, _ := sc["generationId"].(string)
	if kind != "" || id == "" {
		return nil
	}
	credits, _ := sc["credits"].(float64)
	rec := &soakRec{key: "gen:" + id, genID: id, model: model, prompt: p, owner: c.name, credits: int64(credits)}
	c.s.accept(rec)
	c.follow(rec.key, id, wait)
	return rec
}

// cancelCycle: a video cancelled while it runs (or already done).
func (c *soakClient) cancelCycle() {
	p := soakPrompt("local-motion cancel")
	r, kind := c.create(map[string]any{"modelId": "local-motion", "prompt": p, "durationSeconds": 4})
	id, _ := structured(r)["generationId"].(string)
	if kind != "" || id == "" {
		return
	}
	key := "gen:" + id
	c.s.accept(&soakRec{key: key, genID: id, model: "local-motion", prompt: p, owner: c.name})
	time.Sleep(300 * time.Millisecond)
	for time.Now().Before(c.s.drainBy) {
		r, kind := c.tool("cancel_generation", map[string]any{"generationId": id})
		if kind == "" {
			sc := structured(r)
			st, _ := sc["status"].(string)
			msg, _ := sc["statusMessage"].(string)
			if c.s.see(key, st, msg) {
				return
			}
			break
		}
		if !retryable(kind) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.follow(key, id, true)
}

func soakPNG(w, h int) string {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)))
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// editCycle: an image, then a masked edit of its first output by uri.
func (c *soakClient) editCycle() {
	src := c.legacyCycle("local-photo", true)
	if src == nil || src.terminal != "completed" {
		return
	}
	r, kind := c.tool("get_generation", map[string]any{"generationId": src.genID})
	outs, _ := structured(r)["outputs"].([]any)
	if kind != "" || len(outs) == 0 {
		return
	}
	o, _ := outs[0].(map[string]any)
	w, _ := o["width"].(float64)
	h, _ := o["height"].(float64)
	p := soakPrompt("local-edit")
	r, kind = c.create(map[string]any{"modelId": "local-edit", "prompt": p, "inputs": []any{
		map[string]any{"role": "image", "uri": gentools.OutputURI(src.genID, 0)},
		map[string]any{"role": "mask", "image": map[string]any{"data": soakPNG(int(w), int(h)), "mimeType": "image/png"}},
	}})
	id, _ := structured(r)["generationId"].(string)
	if kind != "" || id == "" {
		return
	}
	key := "gen:" + id
	c.s.accept(&soakRec{key: key, genID: id, model: "local-edit", prompt: p, owner: c.name})
	c.follow(key, id, true)
}

// uploadCycle: image-to-video reserved, its input uploaded, then waited.
func (c *soakClient) uploadCycle() {
	p := soakPrompt("local-animate")
	r, kind := c.create(map[string]any{"modelId": "local-animate", "prompt": p, "durationSeconds": 2})
	id, _ := structured(r)["generationId"].(string)
	if kind != "" || id == "" {
		return
	}
	key := "gen:" + id
	c.s.accept(&soakRec{key: key, genID: id, model: "local-animate", prompt: p, owner: c.name})
	img := soakPNG(64, 36)
	for time.Now().Before(c.s.drainBy) {
		r, kind = c.tool("upload_input", map[string]any{"generationId": id, "image": map[string]any{"data": img, "mimeType": "image/png"}})
		if kind == "" {
			break
		}
		// Refused while S3 is cut, say: upload again while it is still
		// reserved (a 10-minute soak once left one reserved for good).
		if g, gk := c.tool("get_generation", map[string]any{"generationId": id}); gk == "" && structured(g)["status"] != "reserved" {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if kind != "" {
		// Refused (e.g. uploaded by an earlier attempt whose reply was
		// lost): the generation goes on or fails; follow it either way.
		_ = r
	}
	c.follow(key, id, true)
}

// hostile polls far over its rate and sends bodies over the cap; it
// returns how many of each it was refused.
func (c *soakClient) hostile(ctx context.Context, refusedPolls, refusedCreates, tooLarge *atomic.Int64) {
	big := bytes.Repeat([]byte("x"), 3<<20)
	for i := 0; ctx.Err() == nil; i++ {
		r, err := rpcDo(c.hc, c.s.lb, c.token, c.caps(), "tasks/get", map[string]any{"taskId": "00000000000000000000000000000000000000000000"})
		if kind, _ := classify(r, err); kind == "refused_429" {
			refusedPolls.Add(1)
		}
		if i%10 == 0 {
			r, err := rpcDo(c.hc, c.s.lb, c.token, map[string]any{}, "tools/call", map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": soakPrompt("hostile")}})
			switch kind, _ := classify(r, err); kind {
			case "refused_429":
				refusedCreates.Add(1)
			case "":
				if id, _ := structured(r)["generationId"].(string); id != "" {
					c.s.accept(&soakRec{key: "gen:" + id, genID: id, model: "local-sketch", owner: c.name})
					go c.follow("gen:"+id, id, true)
				}
			}
		}
		if i%50 == 0 {
			req, _ := http.NewRequest("POST", c.s.lb+"/mcp", bytes.NewReader(big))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+c.token)
			if resp, err := c.hc.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusRequestEntityTooLarge {
					tooLarge.Add(1)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// soakDuration is DARKROOM_SOAK (default 2m: the normal suite's run).
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("DARKROOM_SOAK")
	if v == "" {
		return 2 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Minute {
		t.Fatalf("DARKROOM_SOAK=%q: want a duration of a minute or more", v)
	}
	return d
}

// soakSchedule is when each fault comes: every minute from the first in
// a long run (cycling), at a quarter and a half of a short one (kill -9,
// then the providers' 500s).
func soakSchedule(d time.Duration) (every time.Duration, at []time.Duration, kinds []string) {
	cycle := []string{"kill-9", "pg-restart", "s3-cut", "provider-5xx", "webhook-storm"}
	if d < 5*time.Minute {
		return 15 * time.Second, []time.Duration{d / 4, d / 2, 3 * d / 4}, []string{"kill-9", "provider-5xx", "pg-restart"}
	}
	for i := 1; time.Duration(i)*time.Minute < d; i++ {
		at = append(at, time.Duration(i)*time.Minute)
		kinds = append(kinds, cycle[(i-1)%len(cycle)])
	}
	return time.Minute, at, kinds
}

func TestSoakSchedule(t *testing.T) {
	every, at, kinds := soakSchedule(2 * time.Minute)
	if every != 15*time.Second || !slices.Equal(at, []time.Duration{30 * time.Second, time.Minute, 90 * time.Second}) || !slices.Equal(kinds, []string{"kill-9", "provider-5xx", "pg-restart"}) {
		t.Fatalf("2m: %v %v %v", every, at, kinds)
	}
	every, at, kinds = soakSchedule(20 * time.Minute)
	if every != time.Minute || len(at) != 19 || kinds[0] != "kill-9" || kinds[1] != "pg-restart" || kinds[4] != "webhook-storm" || kinds[5] != "kill-9" {
		t.Fatalf("20m: %v %v %v", every, at, kinds)
	}
}

func soakMetrics(hc *http.Client, base, token string) (goroutines, rss, heap float64, err error) {
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, 0, 0, fmt.Errorf("metrics: %s", resp.Status)
	}
	goroutines, rss, heap = math.NaN(), math.NaN(), math.NaN()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "go_goroutines":
			goroutines = v
		case "process_resident_memory_bytes":
			rss = v / (1 << 20)
		case "go_memstats_heap_inuse_bytes":
			heap = v / (1 << 20)
		}
	}
	return goroutines, rss, heap, nil
}

// procRSS reads VmRSS (MiB) from /proc/PID/status.
func procRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return math.NaN()
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return math.NaN()
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)]
}

func TestSoak(t *testing.T) {
	if onPostgres() {
		t.Skip("engine-independent: runs in the default pass")
	}
	dur := soakDuration(t)
	every, faultAt, faultKinds := soakSchedule(dur)
	pg := startSoakPG(t)
	s3 := s3Config(t, "soak-"+generation.NewID()[:12])
	s3proxy := startSoakProxy(t, strings.TrimPrefix(s3.Endpoint, "http://"))
	public := startSoakProxy(t, "") // the load balancer, once it is up
	// The vendors retry a refused webhook (fal 10 times over 2 h): a
	// delivery an outage refused comes again, here within seconds.
	rig := startEmulator(t, emuTiming{fast: defaultTiming.fast, slowRun: defaultTiming.fast, slowQueue: defaultTiming.fast},
		func(o *emulator.Options) {
			o.WebhookRetries = []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second}
		})
	shared := t.TempDir()
	const lease = 3 * time.Second
	const metricsToken = "soak-metrics-token"
	budget := int64(dur.Seconds() / 3) // local-sketch costs 1: reached in the first third
	keys := []string{"load=soak-load-secret", "budget=soak-budget-secret;budget=" + strconv.FormatInt(budget, 10),
		"hostile=soak-hostile-secret;rate=2;burst=2;createRate=0.2;createBurst=1"}
	env := []string{
		"DARKROOM_DATABASE_URL=" + pg.url, "DARKROOM_RUNNER_LEASE=" + lease.String(),
		"DARKROOM_LOCAL_LATENCY=0.2", "DARKROOM_LOCAL_DIR=" + shared,
		"DARKROOM_S3_BUCKET=" + s3.Bucket, "DARKROOM_S3_ENDPOINT=http://" + s3proxy.addr(), "DARKROOM_S3_PATH_STYLE=true",
		"DARKROOM_S3_PREFIX=outputs", "DARKROOM_CREATE_BUCKET=true",
		"AWS_ACCESS_KEY_ID=" + envOr("DARKROOM_TEST_S3_ACCESS_KEY", "testkey"),
		"AWS_SECRET_ACCESS_KEY=" + envOr("DARKROOM_TEST_S3_SECRET_KEY", "testsecret"),
		"DARKROOM_TRUSTED_PROXIES=127.0.0.1", "DARKROOM_METRICS_ADDR=off", "DARKROOM_METRICS_TOKEN=" + metricsToken,
		"DARKROOM_API_KEYS=" + strings.Join(keys, ","), "DARKROOM_MAX_BODY_BYTES=1048576",
		"DARKROOM_POLL_RATE=1000", "DARKROOM_POLL_BURST=1000", "DARKROOM_CREATE_RATE=1000", "DARKROOM_CREATE_BURST=1000",
		"DARKROOM_MAX_IN_FLIGHT=0", "DARKROOM_PUBLIC_URL=http://" + public.addr(),
		"DARKROOM_REPLICATE_API_TOKEN=r8_test", "DARKROOM_REPLICATE_BASE_URL=" + rig.Replicate.URL,
		"DARKROOM_REPLICATE_WEBHOOK_SECRET=" + emulator.DefaultWebhookSecret,
		"DARKROOM_FAL_KEY=fal_test", "DARKROOM_FAL_QUEUE_URL=" + rig.Fal.URL, "DARKROOM_FAL_WEBHOOK_JWKS_URL=" + rig.FalJWKSURL(),
		"DARKROOM_FAL_MAX_CONCURRENT=16", "DARKROOM_UNSAFE_OUTPUT_FETCH=true", "DARKROOM_OUTPUT_HOSTS=" + rig.filesHost(),
		"DARKROOM_GEMINI_API_KEY=", "GEMINI_API_KEY=", "DARKROOM_OPENAI_API_KEY=", "OPENAI_API_KEY=",
	}
	t0 := time.Now()
	var repMu sync.Mutex
	replicas := make([]*proc, 3)
	var dirs, backends []string
	for i := range 3 {
		d := t.TempDir()
		replicas[i] = startProcess(t, d, env...)
		dirs = append(dirs, d)
		backends = append(backends, strings.TrimPrefix(replicas[i].url, "http://"))
	}
	lb, _ := startHAProxy(t, backends...)
	public.target.Store(strings.TrimPrefix(lb, "http://"))
	t.Logf("soak for %v: 3 replicas, haproxy, PostgreSQL of its own, S3 behind a proxy, up in %v", dur, time.Since(t0))

	s := &soak{t: t, lb: lb, every: every, recs: map[string]*soakRec{}, samples: map[string]int{}}
	s.start = time.Now()
	s.loadEnd = s.start.Add(dur)
	s.drainBy = s.loadEnd.Add(2 * time.Minute)
	client := func(name string, tasks bool) *soakClient {
		return &soakClient{s: s, name: name, token: "soak-" + name + "-secret", hc: &http.Client{Timeout: 90 * time.Second}, tasks: tasks}
	}
	load, cancelLoad := context.WithDeadline(context.Background(), s.loadEnd)
	defer cancelLoad()
	var wg sync.WaitGroup
	worker := func(pause time.Duration, cycle func(i int)) {
		wg.Go(func() {
			for i := 0; load.Err() == nil; i++ {
				cycle(i)
				time.Sleep(pause)
			}
		})
	}
	models := []string{"replicate-flux-schnell", "fal-flux-schnell", "local-sketch", "local-motion"}
	for w := range 2 {
		c := client("load", true)
		worker(300*time.Millisecond, func(i int) { c.taskCycle(models[(i+w)%len(models)], false) })
	}
	lc := client("load", true)
	worker(300*time.Millisecond, func(i int) { lc.taskCycle(models[(i+1)%len(models)], true) })
	gc := client("load", false)
	worker(300*time.Millisecond, func(i int) { gc.legacyCycle(models[i%len(models)], false) })
	wc := client("load", false)
	worker(300*time.Millisecond, func(i int) { wc.legacyCycle(models[(i+2)%len(models)], true) })
	cc := client("load", false)
	worker(time.Second, func(int) { cc.cancelCycle() })
	ec := client("load", false)
	worker(500*time.Millisecond, func(int) { ec.editCycle() })
	uc := client("load", false)
	worker(time.Second, func(int) { uc.uploadCycle() })
	bc := client("budget", false)
	worker(time.Second, func(int) { bc.legacyCycle("local-sketch", true) })
	// A legacy (2025-11-25) session client: generate, then wait_generation.
	wg.Go(func() {
		var cs *mcp.ClientSession
		for load.Err() == nil {
			if cs == nil {
				c := mcp.NewClient(&mcp.Implementation{Name: "soak-legacy", Version: "1"}, nil)
				hc := &http.Client{Timeout: 90 * time.Second, Transport: bearer{"soak-load-secret"}}
				var err error
				cs, err = c.Connect(load, &mcp.StreamableClientTransport{Endpoint: lb + "/mcp", HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
				if err != nil {
					s.observe("initialize", 0, "transport", err.Error())
					cs = nil
					time.Sleep(time.Second)
					continue
				}
			}
			p := soakPrompt("legacy session")
			t1 := time.Now()
			res, err := cs.CallTool(load, &mcp.CallToolParams{Name: "generate", Arguments: map[string]any{"modelId": "local-sketch", "prompt": p}})
			if err != nil || res.IsError {
				s.observe("generate", 0, "session", fmt.Sprint(err))
				_ = cs.Close()
				cs = nil
				continue
			}
			s.observe("generate", time.Since(t1), "", "")
			sc, _ := res.StructuredContent.(map[string]any)
			id, _ := sc["generationId"].(string)
			if id == "" {
				continue
			}
			s.accept(&soakRec{key: "gen:" + id, genID: id, model: "local-sketch", prompt: p, owner: "load"})
			(&soakClient{s: s, name: "load", token: "soak-load-secret", hc: &http.Client{Timeout: 90 * time.Second}}).follow("gen:"+id, id, true)
			time.Sleep(500 * time.Millisecond)
		}
		if cs != nil {
			_ = cs.Close()
		}
	})
	var refusedPolls, refusedCreates, tooLarge atomic.Int64
	hc := client("hostile", true)
	wg.Go(func() { hc.hostile(load, &refusedPolls, &refusedCreates, &tooLarge) })

	// Sampling: every interval, each replica's RSS and goroutines.
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		mc := &http.Client{Timeout: 5 * time.Second}
		for i := 1; ; i++ {
			at := s.start.Add(time.Duration(i)*every - time.Second)
			if at.After(s.loadEnd) {
				return
			}
			time.Sleep(time.Until(at))
			for r := range 3 {
				repMu.Lock()
				p := replicas[r]
				repMu.Unlock()
				g, rss, heap, err := soakMetrics(mc, p.url, metricsToken)
				if err != nil {
					rss = procRSS(p.cmd.Process.Pid)
				}
				s.mu.Lock()
				b := s.bucket(at)
				b.rss[r], b.gor[r], b.heap[r] = rss, g, heap
				if err != nil {
					b.gor[r] = math.NaN()
				}
				s.mu.Unlock()
			}
		}
	}()

	// recovery measures a fault's recovery from from: the generations in
	// flight then all terminal, and a probe create of probeModel through
	// the balancer completed.
	recovery := func(f *soakFault, from time.Time, pendingAt []string, probeModel string) {
		defer s.faultWG.Done()
		defer s.release(pendingAt)
		deadline := from.Add(f.bound + 30*time.Second)
		probe := client("load", false)
		var probed time.Duration
		for time.Now().Before(deadline) {
			if rec := probe.legacyCycle(probeModel, true); rec != nil && rec.terminal == "completed" {
				probed = time.Since(from)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		for !s.allTerminal(pendingAt) && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		f.probes = probed
		if probed == 0 || !s.allTerminalLocked(pendingAt) {
			f.recovered, f.ok = -1, false
			f.note += fmt.Sprintf("; not recovered by %v (probe %v)", f.bound+30*time.Second, probed)
			return
		}
		var last time.Duration
		for _, k := range pendingAt {
			last = max(last, s.recs[k].terminalAt.Sub(from))
		}
		f.recovered = max(last, probed)
		f.ok = f.recovered <= f.bound
		f.note += fmt.Sprintf("; %d in flight all terminal %v after, probe %v", len(pendingAt), last.Round(100*time.Millisecond), probed.Round(100*time.Millisecond))
	}
	readiness := func(f *soakFault) time.Duration {
		rc := &http.Client{Timeout: 2 * time.Second}
		from := time.Now()
		for time.Since(from) < f.bound {
			ready := 0
			for r := range 3 {
				repMu.Lock()
				u := replicas[r].url
				repMu.Unlock()
				if resp, err := rc.Get(u + "/readyz"); err == nil {
					resp.Body.Close()
					if resp.StatusCode == 200 {
						ready++
					}
				}
			}
			if ready == 3 {
				return time.Since(from)
			}
			time.Sleep(200 * time.Millisecond)
		}
		return -1
	}
	addr0 := strings.TrimPrefix(replicas[0].url, "http://")
	go func() {
		for i, at := range faultAt {
			time.Sleep(time.Until(s.start.Add(at)))
			f := &soakFault{kind: faultKinds[i], start: time.Now(), bucket: int(at / every)}
			s.mu.Lock()
			s.bucket(f.start).faults = append(s.bucket(f.start).faults, f.kind)
			s.faults = append(s.faults, f)
			s.mu.Unlock()
			t.Logf("%v: fault %s", at, f.kind)
			probe := "local-sketch"
			switch f.kind {
			case "kill-9":
				// The generations in flight at the kill are taken over
				// when their leases expire; r0 restarts on its address.
				f.bound = lease + 27*time.Second
				pendingAt := s.pending()
				repMu.Lock()
				p := replicas[0]
				repMu.Unlock()
				_ = p.cmd.Process.Signal(syscall.SIGKILL)
				_ = p.cmd.Wait()
				f.end = time.Now()
				np := startProcessAt(t, addr0, dirs[0], env...)
				repMu.Lock()
				replicas[0] = np
				repMu.Unlock()
				f.note = fmt.Sprintf("r0 restarted in %v", time.Since(f.end).Round(100*time.Millisecond))
				s.faultWG.Add(1)
				go recovery(f, f.end, pendingAt, probe)
				continue
			case "pg-restart":
				// Writes are refused for 5 s, past the 3 s lease: steps stop,
				// and their rows are due again when their leases expire. A
				// job a provider made while its record was refused is
				// recorded once writes succeed; a webhook refused meanwhile
				// comes again (the vendors retry).
				f.bound = 45 * time.Second
				if _, err := pg.run("pause"); err != nil {
					s.violate("pg pause: %v %s", err, stderrOf(err))
				}
				time.Sleep(5 * time.Second)
				if _, err := pg.run("resume"); err != nil {
					s.violate("pg resume: %v %s", err, stderrOf(err))
				}
				f.end = time.Now()
				f.readiness = readiness(f)
				f.note = fmt.Sprintf("down 5 s; all replicas ready %v after", f.readiness.Round(100*time.Millisecond))
			case "s3-cut":
				f.bound = 45 * time.Second
				s3proxy.setCut(true)
				time.Sleep(20 * time.Second)
				s3proxy.setCut(false)
				f.end = time.Now()
				f.note = "S3 refused for 20 s"
			case "provider-5xx":
				// The runner backs off while the providers fail: the last
				// retries come 30-40 s after they answer again.
				f.bound = 90 * time.Second
				probe = "replicate-flux-schnell"
				for _, prov := range []string{"replicate", "fal"} {
					for _, op := range []emulator.Op{emulator.OpCreate, emulator.OpStatus, emulator.OpResult} {
						rig.Inject(emulator.Rule{Provider: prov, Op: op, Fault: emulator.Fault500})
					}
				}
				time.Sleep(30 * time.Second)
				rig.ClearFaults()
				f.end = time.Now()
				f.note = fmt.Sprintf("Replicate and fal answered 500 for 30 s (%d creates)", rig.Count("replicate", emulator.OpCreate)+rig.Count("fal", emulator.OpCreate))
			case "webhook-storm":
				f.bound = 30 * time.Second
				ds := rig.Deliveries()
				if len(ds) > 200 {
					ds = ds[len(ds)-200:]
				}
				codes := map[int]int{}
				var cmu sync.Mutex
				var sw sync.WaitGroup
				sem := make(chan struct{}, 8)
				stormEnd := time.Now().Add(20 * time.Second)
				base := len(rig.Deliveries()) - len(ds)
				for rep := range 5 {
					for j := range ds {
						if time.Now().After(stormEnd) {
							break
						}
						sem <- struct{}{}
						sw.Go(func() {
							defer func() { <-sem }()
							c := rig.Redeliver(base + j)
							cmu.Lock()
							codes[c]++
							cmu.Unlock()
						})
					}
					_ = rep
				}
				sw.Wait()
				f.end = time.Now()
				f.note = fmt.Sprintf("%d deliveries replayed up to 5 times: answers %v", len(ds), codes)
			}
			s.faultWG.Add(1)
			go recovery(f, f.end, s.pending(), probe)
		}
	}()

	wg.Wait()
	<-sampleDone
	s.faultWG.Wait()
	t.Logf("load over %v after the start; drained at %v", dur, time.Since(s.start).Round(time.Second))

	// The checks.
	checkers := map[string]*soakClient{} // each id is its owner's to see
	for _, name := range []string{"load", "budget", "hostile"} {
		checkers[name] = client(name, true)
		checkers[name].hc.Timeout = 30 * time.Second
	}
	s.mu.Lock()
	recs := make([]*soakRec, 0, len(s.recs))
	for _, r := range s.recs {
		recs = append(recs, r)
	}
	s.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].accepted.Before(recs[j].accepted) })
	status := map[string]int{}
	lost := 0
	for _, r := range recs {
		var st, msg, inner string // inner: a task's generation status in its result
		checker := checkers[r.owner]
		for try := 0; try < 5; try++ {
			var reply rpcReply
			var kind string
			if r.taskID != "" {
				reply, kind = checker.do("tasks/get", map[string]any{"taskId": r.taskID})
				st, _ = reply.Result["status"].(string)
				res, _ := reply.Result["result"].(map[string]any)
				sc, _ := res["structuredContent"].(map[string]any)
				inner, _ = sc["status"].(string)
			} else {
				reply, kind = checker.tool("get_generation", map[string]any{"generationId": r.genID})
				st, _ = structured(reply)["status"].(string)
				msg, _ = structured(reply)["statusMessage"].(string)
			}
			if !retryable(kind) && st != "" {
				break
			}
			time.Sleep(time.Second)
		}
		if st == "" {
			lost++
			s.violate("%s (accepted %v) does not resolve through the balancer", r.key, r.accepted.Sub(s.start).Round(time.Second))
			continue
		}
		if r.taskID != "" && r.genID != "" && inner != "" {
			// A task completes with the tool's result, a failed
			// generation's included (isError): the result's status is
			// the generation's.
			reply, _ := checker.tool("get_generation", map[string]any{"generationId": r.genID})
			if gst, _ := structured(reply)["status"].(string); gst != inner {
				s.violate("%s: task %s with a %s result, its generation %s %s", r.key, st, inner, r.genID, gst)
			}
		}
		if r.terminal == "" {
			s.violate("%s never seen terminal by its client (now %s)", r.key, st)
			s.see(r.key, st, msg)
		} else if r.terminal != st {
			s.violate("%s was %s, now %s", r.key, r.terminal, st)
		}
		status[r.model+" "+st]++
	}
	// One provider job per generation, unless its message says it was
	// resubmitted (a kill between the provider's reply and the record).
	byPrompt := map[string]*soakRec{}
	for _, r := range recs {
		if r.prompt != "" {
			byPrompt[r.prompt] = r
		}
	}
	dups := 0
	for _, prov := range []string{"replicate", "fal"} {
		for prompt, n := range rig.JobsByPrompt(prov) {
			if n > 1 {
				r := byPrompt[prompt]
				if r != nil && strings.Contains(r.message, "resubmit") {
					continue
				}
				dups++
				s.violate("%s: %d %s jobs for %q", keyOf(r), n, prov, prompt)
			}
		}
	}
	// The budget: what was spent is the charges of the accepted creates
	// not refunded.
	var want int64
	budgetRecs := 0
	for _, r := range recs {
		if r.owner == "budget" {
			budgetRecs++
			if r.terminal == "completed" || (r.terminal == "failed" && !strings.Contains(r.message, "refund")) {
				want += r.credits
			}
		}
	}
	bcheck := client("budget", false)
	cr, kind := bcheck.tool("get_credits", nil)
	spent, _ := structured(cr)["spent"].(float64)
	if kind != "" || int64(spent) != want || int64(spent) > budget {
		s.violate("budget: spent %v (%s), want %d of %d", spent, kind, want, budget)
	}
	if refusedPolls.Load() == 0 || refusedCreates.Load() == 0 || tooLarge.Load() == 0 {
		s.violate("hostile caller: %d polls and %d creates refused, %d bodies too large: want some of each", refusedPolls.Load(), refusedCreates.Load(), tooLarge.Load())
	}
	// Faults recovered within their bounds.
	for _, f := range s.faults {
		if !f.ok {
			s.violate("fault %s at %v: recovery %v, bound %v (%s)", f.kind, f.start.Sub(s.start).Round(time.Second), f.recovered, f.bound, f.note)
		}
	}
	// Flat RSS and goroutines: r1 and r2 (never killed). One sample an
	// interval swings with the garbage collector (±20% seen), so medians:
	// of the last 3 intervals against those around the end of warm-up
	// (minutes 2-4 in a long run, within +10%; in a short one the 2
	// intervals before the first fault, leniently within +50%).
	s.mu.Lock()
	last := min(len(s.buckets), int(dur/every)) // the load's intervals
	lo, hi, tol := 1, 4, 0.10
	if dur < 5*time.Minute {
		hi, tol = int(faultAt[0]/every), 0.50
		lo = max(0, hi-2)
	}
	median := func(from, to int, v func(*soakBucket) float64) float64 {
		var xs []float64
		for _, bk := range s.buckets[max(0, from):min(to, last)] {
			if x := v(bk); !math.IsNaN(x) {
				xs = append(xs, x)
			}
		}
		if len(xs) == 0 {
			return math.NaN()
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	for r := 1; r < 3; r++ {
		rss := func(bk *soakBucket) float64 { return bk.rss[r] }
		gor := func(bk *soakBucket) float64 { return bk.gor[r] }
		if a, b := median(lo, hi, rss), median(last-3, last, rss); !(b <= a*(1+tol)+8) {
			s.violations = append(s.violations, fmt.Sprintf("r%d RSS %.1f MiB at the end, %.1f at warm-up (medians): beyond +%.0f%% (+8 MiB)", r, b, a, 100*tol))
		}
		if a, b := median(lo, hi, gor), median(last-3, last, gor); !(b <= a*(1+tol)+20) {
			s.violations = append(s.violations, fmt.Sprintf("r%d goroutines %.0f at the end, %.0f at warm-up (medians): beyond +%.0f%% (+20)", r, b, a, 100*tol))
		}
	}
	s.mu.Unlock()

	dir := os.Getenv("DARKROOM_SOAK_REPORT")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	csv := s.writeReport(t, dir)
	t.Logf("report in %s:\n%s", dir, csv)
	t.Logf("%d accepted (%d lost, %d duplicate provider jobs); outcomes %v", len(recs), lost, dups, status)
	t.Logf("budget caller: %d accepted, spent %v of %d; hostile: %d polls and %d creates refused, %d bodies too large",
		budgetRecs, spent, budget, refusedPolls.Load(), refusedCreates.Load(), tooLarge.Load())
	for _, f := range s.faults {
		t.Logf("fault %s at %v: recovered in %v (bound %v): %s", f.kind, f.start.Sub(s.start).Round(time.Second), f.recovered.Round(100*time.Millisecond), f.bound, f.note)
	}
	t.Logf("jobs at the emulator: replicate %d, fal %d; webhooks delivered %d", rig.Jobs("replicate"), rig.Jobs("fal"), len(rig.Deliveries()))
	if len(s.violations) > 0 {
		t.Fatalf("%d violations:\n%s", len(s.violations), strings.Join(s.violations, "\n"))
	}
}

func keyOf(r *soakRec) string {
	if r == nil {
		return "?"
	}
	return r.key
}

func (s *soak) allTerminalLocked(keys []string) bool {
	for _, k := range keys {
		if s.recs[k].terminal == "" {
			return false
		}
	}
	return true
}

// bearer adds an API key to every request (the go-sdk client's).
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// writeReport writes soak.csv and soak.png into dir and returns the CSV.
func (s *soak) writeReport(t *testing.T, dir string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	b.WriteString("end_s,fault")
	for r := range 3 {
		fmt.Fprintf(&b, ",r%d_rss_mib,r%d_goroutines,r%d_heap_mib", r, r, r)
	}
	for _, m := range soakMethods {
		fmt.Fprintf(&b, ",%s_n,%s_p50_ms,%s_p99_ms", m, m, m)
	}
	b.WriteString(",errors\n")
	// The load's intervals only (the drain and the checks come after).
	n := min(len(s.buckets), int(s.loadEnd.Sub(s.start)/s.every))
	labels := make([]string, n)
	rss := make([][]float64, 3)
	gor := make([][]float64, 3)
	p99 := map[string][]float64{}
	var marks []soakchart.Mark
	for i, bk := range s.buckets[:n] {
		end := time.Duration(i+1) * s.every
		labels[i] = fmt.Sprintf("%d:%02d", int(end.Minutes()), int(end.Seconds())%60)
		fmt.Fprintf(&b, "%.0f,%s", end.Seconds(), strings.Join(bk.faults, "+"))
		for r := range 3 {
			fmt.Fprintf(&b, ",%.1f,%.0f,%.1f", bk.rss[r], bk.gor[r], bk.heap[r])
			rss[r] = append(rss[r], bk.rss[r])
			gor[r] = append(gor[r], bk.gor[r])
		}
		for _, m := range soakMethods {
			l := bk.lat[m]
			p50, p := percentile(l, 0.5), percentile(l, 0.99)
			fmt.Fprintf(&b, ",%d,%.1f,%.1f", len(l), float64(p50.Microseconds())/1000, float64(p.Microseconds())/1000)
			v := math.NaN()
			if len(l) > 0 {
				v = float64(p.Microseconds()) / 1000
			}
			p99[m] = append(p99[m], v)
		}
		kinds := make([]string, 0, len(bk.errs))
		for k, c := range bk.errs {
			kinds = append(kinds, fmt.Sprintf("%s:%d", k, c))
		}
		sort.Strings(kinds)
		fmt.Fprintf(&b, ",%s\n", strings.Join(kinds, " "))
		for _, f := range bk.faults {
			// A fault starts at the beginning of its interval's previous
			// point: x is in points, point i the end of interval i.
			marks = append(marks, soakchart.Mark{X: float64(i) - 1 + 0.05, Label: f})
		}
	}
	csv := b.String()
	if err := os.WriteFile(filepath.Join(dir, "soak.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	series := func(vals [][]float64) []soakchart.Series {
		var out []soakchart.Series
		for r, v := range vals {
			out = append(out, soakchart.Series{Name: fmt.Sprintf("r%d", r), Values: v})
		}
		return out
	}
	var lat []soakchart.Series
	for _, m := range soakMethods {
		if m != "wait_generation" && m != "subscriptions/listen" { // held by design: in the CSV
			lat = append(lat, soakchart.Series{Name: m, Values: p99[m]})
		}
	}
	chart := soakchart.Chart{
		Title:  fmt.Sprintf("darkroom soak: 3 replicas behind HAProxy, %v, one point per %v; faults in red", time.Duration(n)*s.every, s.every),
		Labels: labels,
		Panels: []soakchart.Panel{
			{Title: "RSS per replica (MiB)", Series: series(rss)},
			{Title: "goroutines per replica", Series: series(gor)},
			{Title: "p99 latency per method (ms; wait_generation and listen, held by design, are in the CSV)", Series: lat},
		},
		Marks: marks,
	}
	f, err := os.Create(filepath.Join(dir, "soak.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := chart.Encode(f); err != nil {
		t.Fatal(errors.Join(err, f.Close()))
	}
	return csv
}

// TestSoakProxy: the S3 proxy passes bytes, refuses and drops while cut,
// and passes again once restored.
func TestSoakProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	p := startSoakProxy(t, ln.Addr().String())
	echo := func(c net.Conn) error {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		b := make([]byte, 4)
		if _, err := io.ReadFull(c, b); err != nil {
			return err
		}
		if string(b) != "ping" {
			return fmt.Errorf("echoed %q", b)
		}
		return nil
	}
	open, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := echo(open); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.setCut(true)
	if echo(open) == nil {
		t.Fatal("an open connection survived the cut")
	}
	if c, err := net.Dial("tcp", p.addr()); err == nil {
		if echo(c) == nil {
			t.Fatal("a new connection passed while cut")
		}
		c.Close()
	}
	p.setCut(false)
	c, err := net.Dial("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echo(c); err != nil {
		t.Fatalf("after the cut: %v", err)
	}
}
