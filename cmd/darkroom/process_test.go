package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// binary is darkroom built once for the process tests.
var binary string

func TestMain(m *testing.M) {
	if os.Getenv(loadgenEnv) != "" || os.Getenv(benchServerEnv) != "" || os.Getenv(clientEnv) != "" || slices.Contains(os.Args[1:], "-test.fuzzworker") {
		os.Exit(m.Run()) // a benchmark's child or a fuzz worker: it needs no darkroom binary
	}
	dir, err := os.MkdirTemp("", "darkroom-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "darkroom")
	// -buildvcs=false: a build from source is "dev" whatever the machine's
	// GOFLAGS say (with VCS stamping Go names a pseudo-version instead).
	out, err := exec.Command("go", "build", "-buildvcs=false", "-o", binary, ".").CombinedOutput()
	if err != nil {
		panic("build darkroom: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is darkroom serve running as a child process.
type proc struct {
	cmd *exec.Cmd
	url string
}

func startProcess(t testing.TB, dataDir string, env ...string) *proc {
	t.Helper()
	return startProcessAt(t, "127.0.0.1:0", dataDir, env...)
}

// startProcessAt is startProcess listening on listen (a replica restarted
// on the address its load balancer knows).
func startProcessAt(t testing.TB, listen, dataDir string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--addr", listen, "--data", dataDir)
	cmd.Env = append(os.Environ(), env...)
	if u := databaseURL(t, dataDir); u != "" && !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "DARKROOM_DATABASE_URL=") }) {
		// A killed replica's leases are taken over when they expire.
		cmd.Env = append(cmd.Env, "DARKROOM_DATABASE_URL="+u, "DARKROOM_RUNNER_LEASE=3s")
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The start-up log line names the address.
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "darkroom serving" {
				addr <- strings.TrimSuffix(line.Addr, "/mcp")
			}
		}
	}()
	select {
	case a := <-addr:
		return &proc{cmd: cmd, url: a}
	case <-time.After(30 * time.Second):
		t.Fatal("darkroom did not start")
	}
	return nil
}

func jobFiles(t *testing.T, dataDir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dataDir, "local-provider", "jobs", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestKillNineResumes kills darkroom mid-generation and restarts it on the
// same data dir: the generation completes and exactly one provider job
// was made.
func TestKillNineResumes(t *testing.T) {
	data := t.TempDir()
	p := startProcess(t, data, "DARKROOM_LOCAL_LATENCY=0.2") // video: about 4 s
	cs := connect(t, p.url, "2026-07-28")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-motion", "prompt": "a train crossing a bridge"}, &g)
	// Wait (event-driven, bounded) until the provider job exists.
	eventually(t, 20*time.Second, func() bool {
		if jobFiles(t, data) != 0 {
			return true
		}
		var w genView
		call(t, cs, "get_generation", map[string]any{"generationId": g.GenerationID}, &w)
		if w.Status == "completed" {
			t.Fatal("completed before the kill; raise the latency")
		}
		return false
	}, "a provider job")
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()

	p2 := startProcess(t, data, "DARKROOM_LOCAL_LATENCY=0.2")
	cs2 := connect(t, p2.url, "2026-07-28")
	var w genView
	call(t, cs2, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 60}, &w)
	if w.Status != "completed" {
		t.Fatalf("after restart: %s (%s)", w.Status, w.StatusMessage)
	}
	if n := jobFiles(t, data); n != 1 {
		t.Fatalf("provider jobs = %d, want exactly 1", n)
	}
}

// TestStdio runs the same flow over stdio, with output links served by the
// files listener that stdio mode starts.
func TestStdio(t *testing.T) {
	cmd := exec.Command(binary, "stdio", "--data", t.TempDir())
	cmd.Env = append(os.Environ(), "DARKROOM_LOCAL_LATENCY=0")
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != len(goldenTools(t)) {
		t.Fatalf("tools/list: %v (%d tools, want %d)", err, len(tools.Tools), len(goldenTools(t)))
	}
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "stdio", "wait": true, "waitSeconds": 30}, &g)
	if g.Status != "completed" {
		t.Fatalf("stdio generate: %+v", g)
	}
	code, body := httpGet(t, g.Outputs[0].URL)
	if code != 200 || len(body) != int(g.Outputs[0].Bytes) {
		t.Fatalf("stdio output link: %d, %d bytes", code, len(body))
	}
}

// stdioPeer drives `darkroom stdio` with raw JSON lines, so the Tasks
// methods (which go-sdk's client does not speak) can be exercised.
type stdioPeer struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

func (p *stdioPeer) send(v map[string]any) {
	p.t.Helper()
	b, _ := json.Marshal(v)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatal(err)
	}
}

// next reads the next message, failing after the deadline.
func (p *stdioPeer) next() map[string]any {
	p.t.Helper()
	if !p.out.Scan() {
		p.t.Fatalf("stdio closed: %v", p.out.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(p.out.Bytes(), &m); err != nil {
		p.t.Fatalf("not JSON on stdout: %q", p.out.Text())
	}
	return m
}

func meta(caps map[string]any) map[string]any {
	return map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
}

// TestStdioTasks: a task over stdio, then subscriptions/listen pushes its
// notifications/tasks on the same channel, tagged with the subscription id.
func TestStdioTasks(t *testing.T) {
	cmd := exec.Command(binary, "stdio", "--data", t.TempDir())
	cmd.Env = append(os.Environ(), "DARKROOM_LOCAL_LATENCY=0.05")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	p := &stdioPeer{t: t, in: in, out: bufio.NewScanner(out)}
	p.out.Buffer(make([]byte, 1<<20), 1<<20)

	p.send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"_meta": meta(withTasks()), "name": "generate", "arguments": map[string]any{"modelId": "local-motion", "prompt": "stdio task", "durationSeconds": 2}}})
	created := p.next()
	res, _ := created["result"].(map[string]any)
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || id == "" {
		t.Fatalf("stdio generate: %v", created)
	}
	p.send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": map[string]any{"_meta": meta(withTasks()), "taskId": id}})
	if got := p.next(); got["result"].(map[string]any)["taskId"] != id {
		t.Fatalf("stdio tasks/get: %v", got)
	}
	p.send(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": map[string]any{
		"_meta": meta(withTasks()), "notifications": map[string]any{"taskIds": []string{id}}}})
	ack := p.next()
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first listen message: %v", ack)
	}
	for {
		m := p.next()
		if m["id"] != nil { // the listen response closes the subscription
			break
		}
		params := m["params"].(map[string]any)
		if m["method"] != "notifications/tasks" || params["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"] != float64(3) {
			t.Fatalf("unexpected message on the listen stream: %v", m)
		}
		if params["status"] == "completed" {
			if params["result"] == nil {
				t.Fatalf("completed notification without result: %v", params)
			}
		}
	}
}
