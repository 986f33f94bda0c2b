package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/storage/sqlite"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// logged is darkroom serve as a child process whose stderr (JSON log
// lines) the test keeps.
type logged struct {
	cmd    *exec.Cmd
	url    string
	mu     sync.Mutex
	lines  []map[string]any
	raw    bytes.Buffer
	exited chan struct{}
	err    error
}

func startLogged(t *testing.T, dataDir string, env ...string) *logged {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--data", dataDir)
	cmd.Env = append(os.Environ(), append([]string{"DARKROOM_METRICS_ADDR=off"}, env...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &logged{cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line map[string]any
			p.mu.Lock()
			p.raw.Write(append(sc.Bytes(), '\n'))
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				p.lines = append(p.lines, line)
				if line["msg"] == "darkroom serving" {
					addr <- strings.TrimSuffix(line["addr"].(string), "/mcp")
				}
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		<-scanned
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.exited })
	select {
	case a := <-addr:
		p.url = a
	case <-p.exited:
		t.Fatalf("darkroom exited at start: %s", p.raw.String())
	case <-time.After(30 * time.Second):
		t.Fatal("darkroom did not start")
	}
	return p
}

func (p *logged) messages(msg string) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, l := range p.lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// rpcPost sends one JSON-RPC request on a fresh connection and decodes
// the JSON-RPC response (JSON or the last SSE data line).
func rpcPost(c *http.Client, url, method, name string, params map[string]any, caps map[string]any) (status int, result map[string]any, err error) {
	code, body, err := postRaw(c, url+"/mcp", rpcBody(1, method, params, caps), rpcHeaders(method, name, ""))
	if err != nil {
		return 0, nil, err
	}
	var m struct {
		Result map[string]any `json:"result"`
		Error  any            `json:"error"`
	}
	if code == 200 {
		if err := json.Unmarshal(lastData(body), &m); err != nil {
			return code, nil, fmt.Errorf("reply cut short (%d bytes): %w", len(body), err)
		}
		if m.Error != nil {
			return code, nil, fmt.Errorf("JSON-RPC error: %v", m.Error)
		}
	}
	return code, m.Result, nil
}

func tasksCaps() map[string]any {
	return map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
}

type reply struct {
	prompt, genID, taskID string
	timedOut              bool
}

// idOf reads a generate reply: a task, or the generation's structured
// content.
func idOf(prompt string, res map[string]any) (reply, error) {
	r := reply{prompt: prompt}
	if res["resultType"] == "task" {
		r.taskID, _ = res["taskId"].(string)
	} else if sc, ok := res["structuredContent"].(map[string]any); ok {
		r.genID, _ = sc["generationId"].(string)
		r.timedOut, _ = sc["timedOut"].(bool)
	}
	if r.taskID == "" && r.genID == "" {
		return r, fmt.Errorf("generate %q: no id in %v", prompt, res)
	}
	return r, nil
}

// unreached reports a request that failed on the way: refused (the
// listener is closed), or reset or closed unanswered (a connection still
// in the kernel's accept queue when the listener closed: never accepted).
// That none of these was accepted is proven from the server side: none
// left a generation, and the server cut no request.
func unreached(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// TestSIGTERMDrains sends SIGTERM while clients create generations (both
// paths), wait on them and listen: every request the server accepted is
// answered, every answered id is there after a restart, nothing was
// created without an answer, no lease is left, the listen stream ends
// cleanly, and darkroom exits 0 within the grace period.
func TestSIGTERMDrains(t *testing.T) {
	const grace = 6 * time.Second
	data := t.TempDir()
	env := []string{"DARKROOM_LOCAL_LATENCY=1", "DARKROOM_SHUTDOWN_GRACE=" + grace.String(), "DARKROOM_MAX_IN_FLIGHT=0",
		"DARKROOM_CREATE_RATE=100000", "DARKROOM_CREATE_BURST=100000", "DARKROOM_POLL_RATE=100000", "DARKROOM_POLL_BURST=100000"}
	p := startLogged(t, data, env...)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	var mu sync.Mutex
	var replies []reply
	var failures []error
	unanswered := map[string]bool{} // prompts whose request got no answer
	record := func(prompt string, res map[string]any, code int, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil && unreached(err):
			unanswered[prompt] = true
		case err != nil:
			unanswered[prompt] = true
			failures = append(failures, fmt.Errorf("%s: %w", prompt, err))
		case code != 200:
			failures = append(failures, fmt.Errorf("%s: HTTP %d", prompt, code))
		default:
			r, err := idOf(prompt, res)
			if err != nil {
				failures = append(failures, err)
				return
			}
			replies = append(replies, r)
		}
	}
	generate := func(prompt string, task bool, extra map[string]any) (int, map[string]any, error) {
		args := map[string]any{"modelId": "local-sketch", "prompt": prompt}
		for k, v := range extra {
			args[k] = v
		}
		caps := map[string]any{}
		if task {
			caps = tasksCaps()
		}
		return rpcPost(c, p.url, "tools/call", "generate", map[string]any{"name": "generate", "arguments": args}, caps)
	}

	// A listen stream on a long task, and bounded waits in flight.
	code, res, err := generate("listened", true, map[string]any{"modelId": "local-motion"})
	if err != nil || code != 200 {
		t.Fatalf("listened task: %d %v", code, err)
	}
	listened, _ := idOf("listened", res)
	replies = append(replies, listened)
	streamEnded := make(chan error, 1)
	{
		body := rpcBody(9, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{listened.taskID}}}, tasksCaps())
		req, _ := http.NewRequest(http.MethodPost, p.url+"/mcp", bytes.NewReader(body))
		for k, v := range rpcHeaders("subscriptions/listen", "", "") {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("listen: %v", err)
		}
		go func() {
			defer resp.Body.Close()
			_, err := io.Copy(io.Discard, resp.Body) // nil at a clean end of the stream
			streamEnded <- err
		}()
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			prompt := fmt.Sprintf("waiter %d", i)
			code, res, err := generate(prompt, false, map[string]any{"modelId": "local-motion", "wait": true, "waitSeconds": 120})
			record(prompt, res, code, err)
		})
	}
	// Creations on both paths until the server is gone.
	answered := make(chan struct{}, 1<<16)
	stop := make(chan struct{})
	for w := range 8 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				prompt := fmt.Sprintf("load %d-%d", w, n)
				code, res, err := generate(prompt, n%2 == 0, nil)
				record(prompt, res, code, err)
				if err != nil {
					return // the server stopped accepting
				}
				answered <- struct{}{}
			}
		})
	}
	for range 60 {
		select {
		case <-answered:
		case <-time.After(30 * time.Second):
			t.Fatal("load got no answers")
		}
	}
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(grace + 10*time.Second):
		t.Fatal("darkroom did not exit after SIGTERM")
	}
	took := time.Since(sent)
	close(stop)
	wg.Wait()
	if p.err != nil {
		t.Fatalf("exit: %v\n%s", p.err, p.raw.String())
	}
	if took > grace {
		t.Errorf("exit took %v, beyond the %v grace period", took, grace)
	}
	select {
	case err := <-streamEnded:
		if err != nil {
			t.Errorf("listen stream did not end cleanly: %v", err)
		}
	case <-time.After(time.Second):
		t.Error("listen stream still open after exit")
	}
	for _, f := range failures {
		t.Error(f)
	}
	waiters := 0
	for _, r := range replies {
		if strings.HasPrefix(r.prompt, "waiter") {
			waiters++
			if !r.timedOut {
				t.Errorf("%s: a bounded wait at shutdown should answer timedOut, got %+v", r.prompt, r)
			}
		}
	}
	if waiters != 3 {
		t.Errorf("%d of 3 bounded waits were answered", waiters)
	}
	stopped := p.messages("stopped; live generations resume at the next start")
	if len(p.messages("shutting down")) != 1 || len(stopped) != 1 {
		t.Fatalf("shutdown not logged:\n%s", p.raw.String())
	}
	if cut := stopped[0]["requestsCut"]; cut != float64(0) {
		t.Errorf("the server cut %v accepted requests", cut)
	}

	// The store after exit: exactly the answered creations, no lease.
	db, err := sqlite.Open(context.Background(), filepath.Join(data, "darkroom.db"))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{} // prompt -> generation id
	rows, err := db.Read.Query(`SELECT prompt, id FROM generations`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var prompt, id string
		_ = rows.Scan(&prompt, &id)
		stored[prompt] = id
	}
	rows.Close()
	var leased int
	_ = db.Read.QueryRow(`SELECT COUNT(*) FROM generations WHERE lease_until > 0`).Scan(&leased)
	_ = db.Close()
	if leased != 0 {
		t.Errorf("%d leases left after the drain", leased)
	}
	for _, r := range replies {
		if _, ok := stored[r.prompt]; !ok {
			t.Errorf("answered %q (%s%s) is not in the store", r.prompt, r.genID, r.taskID)
		}
	}
	for prompt := range unanswered {
		if id, ok := stored[prompt]; ok {
			t.Errorf("%q was created (%s) but never answered: an accepted request was lost", prompt, id)
		}
	}
	if len(stored) != len(replies) {
		t.Errorf("%d generations stored, %d answered", len(stored), len(replies))
	}
	t.Logf("%d answered (%d before SIGTERM), %d unreached after it, exit %v after SIGTERM", len(replies), 60, len(unanswered), took.Round(time.Millisecond))

	// After a restart every answered id resolves.
	p2 := startLogged(t, data, env...)
	for _, r := range replies {
		if r.taskID != "" {
			code, res, err := rpcPost(c, p2.url, "tasks/get", r.taskID, map[string]any{"taskId": r.taskID}, tasksCaps())
			if err != nil || code != 200 || res["taskId"] != r.taskID {
				t.Errorf("tasks/get %s after restart: %d %v %v", r.taskID, code, err, res)
			}
			continue
		}
		code, res, err := rpcPost(c, p2.url, "tools/call", "get_generation", map[string]any{"name": "get_generation", "arguments": map[string]any{"generationId": r.genID}}, map[string]any{})
		sc, _ := res["structuredContent"].(map[string]any)
		if err != nil || code != 200 || sc["generationId"] != r.genID {
			t.Errorf("get_generation %s after restart: %d %v %v", r.genID, code, err, res)
		}
	}
}

// TestLogs: at info, the banner says what runs (and no secret), each
// lifecycle event is one line with its ids, and neither requests nor
// go-sdk's sessions are logged; at debug, each request is.
func TestLogs(t *testing.T) {
	const secret = "s3cret-key-never-logged-0123456789"
	env := []string{"DARKROOM_LOCAL_LATENCY=0", "DARKROOM_API_KEYS=alice=" + secret, "DARKROOM_METRICS_TOKEN=metrics-token-never-logged"}
	for _, level := range []string{"info", "debug"} {
		t.Run(level, func(t *testing.T) {
			data := t.TempDir()
			p := startLogged(t, data, append(env, "DARKROOM_LOG_LEVEL="+level)...)
			c := &http.Client{}
			gen := func(prompt string, task bool) string {
				caps := map[string]any{}
				if task {
					caps = tasksCaps()
				}
				args := map[string]any{"modelId": "local-sketch", "prompt": prompt, "wait": !task, "waitSeconds": 30}
				code, body, err := postRaw(c, p.url+"/mcp", rpcBody(1, "tools/call", map[string]any{"name": "generate", "arguments": args}, caps),
					rpcHeaders("tools/call", "generate", secret))
				if err != nil || code != 200 {
					t.Fatalf("generate: %d %v %s", code, err, body)
				}
				var m struct{ Result map[string]any }
				_ = json.Unmarshal(lastData(body), &m)
				r, err := idOf(prompt, m.Result)
				if err != nil {
					t.Fatal(err)
				}
				return r.genID + r.taskID
			}
			done, failed, task := gen("a quiet harbour", false), gen("a storm [fail]", false), gen("a task", true)
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			<-p.exited
			if p.err != nil {
				t.Fatalf("exit: %v", p.err)
			}
			raw := p.raw.String()
			for _, s := range []string{secret, "metrics-token-never-logged"} {
				if strings.Contains(raw, s) {
					t.Fatalf("a secret is in the log:\n%s", raw)
				}
			}
			b := p.messages("darkroom serving")[0]
			abs, _ := filepath.Abs(filepath.Join(data, "darkroom.db"))
			for key, want := range map[string]string{"version": "dev", "addr": "/mcp", "auth": "1 API key", "keys": "DARKROOM_API_KEYS",
				"store": abs, "blobs": "local folder /", "providers": "local (5 models)", "metrics": "/metrics with the metrics token"} {
				if v, _ := b[key].(string); !strings.Contains(v, want) {
					t.Errorf("banner %s = %q, want it to contain %q", key, v, want)
				}
			}
			if lim, _ := b["limits"].(map[string]any); lim["createBurst"] != float64(10) || lim["maxInFlight"] != float64(4) {
				t.Errorf("banner limits: %v", b["limits"])
			}
			byGen := func(msg, id string) int {
				n := 0
				for _, l := range p.messages(msg) {
					if l["generation"] == id {
						n++
					}
				}
				return n
			}
			for _, c := range []struct{ msg, id string }{
				{"generation created", done}, {"generation submitted", done}, {"generation completed", done},
				{"generation created", failed}, {"generation failed", failed},
			} {
				if n := byGen(c.msg, c.id); n != 1 {
					t.Errorf("%q lines for %s: %d, want 1", c.msg, c.id, n)
				}
			}
			tasked := 0
			for _, l := range p.messages("generation created") {
				if l["task"] == task && l["path"] == "task" {
					tasked++
				}
			}
			if tasked != 1 {
				t.Errorf("no creation line names task %s", task)
			}
			requests := len(p.messages("request"))
			for _, l := range p.lines {
				msg, _ := l["msg"].(string)
				if strings.Contains(msg, "session") || strings.Contains(msg, "connecting") {
					if l["level"] != "DEBUG" {
						t.Errorf("go-sdk chatter at %v: %v", l["level"], l)
					}
				}
			}
			if level == "info" && requests != 0 || level == "debug" && requests < 3 {
				t.Errorf("%d request lines at %s", requests, level)
			}
		})
	}
}
