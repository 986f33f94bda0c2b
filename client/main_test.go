package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
)

// darkroomBin is darkroom, built once for every test in TestMain.
var darkroomBin string

func TestMain(m *testing.M) {
	out, err := exec.Command("go", "build", "-o", "tmp/darkroom", "../cmd/darkroom").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build darkroom: %v\n%s", err, out)
		os.Exit(1)
	}
	if darkroomBin, err = filepath.Abs("tmp/darkroom"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// darkroom is `darkroom serve` running as a child process.
type darkroom struct {
	cmd      *exec.Cmd
	base     string // http://127.0.0.1:PORT
	log      *logWriter
	exited   chan struct{}
	killOnce sync.Once
}

func (d *darkroom) endpoint() string { return d.base + "/mcp" }

// logWriter keeps darkroom's stderr and spots the start-up line, which
// names the address.
type logWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	part []byte
	addr chan string
	sent bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(w.part[:i], &line) == nil && line.Msg == "darkroom serving" && !w.sent {
			w.sent = true
			w.addr <- strings.TrimSuffix(line.Addr, "/mcp")
		}
		w.part = w.part[i+1:]
	}
	return len(p), nil
}

func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// The acceptance tests run on the embedded engine, or on PostgreSQL when
// DARKROOM_TEST_ENGINE=postgres (CI runs both): each data directory then
// gets a fresh database of its own, found again when darkroom restarts on
// that directory.
func databaseURL(t *testing.T, dataDir string) string {
	t.Helper()
	if os.Getenv("DARKROOM_TEST_ENGINE") != "postgres" {
		return ""
	}
	return pgtest.URLFor(t, dataDir)
}

// startDarkroom runs darkroom serve on a free loopback port over dataDir,
// with DARKROOM_LOCAL_LATENCY=0.1 (a 2 s video takes about 2 s) unless env
// says otherwise.
func startDarkroom(t *testing.T, dataDir string, env ...string) *darkroom {
	t.Helper()
	cmd := exec.Command(darkroomBin, "serve", "--addr", "127.0.0.1:0", "--data", dataDir)
	cmd.Env = append(append(os.Environ(), "DARKROOM_LOCAL_LATENCY=0.1"), env...)
	if u := databaseURL(t, dataDir); u != "" {
		// A killed process's generations are taken over when its lease
		// expires (on SQLite, at restart): a short lease for TestAcceptanceKill9.
		cmd.Env = append(cmd.Env, "DARKROOM_DATABASE_URL="+u, "DARKROOM_RUNNER_LEASE=3s")
	}
	lw := &logWriter{addr: make(chan string, 1)}
	cmd.Stderr = lw
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &darkroom{cmd: cmd, log: lw, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.kill()
		if t.Failed() {
			t.Logf("darkroom log:\n%s", lw.String())
		}
	})
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case d.base = <-lw.addr:
		return d
	case <-d.exited:
		t.Fatalf("darkroom exited at start:\n%s", lw.String())
	case <-timeout.C:
		t.Fatalf("darkroom did not start:\n%s", lw.String())
	}
	return nil
}

// kill is kill -9, then waiting for the process to be gone.
func (d *darkroom) kill() {
	d.killOnce.Do(func() {
		_ = d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.exited
	})
}

// methodCounter counts the POSTs a client makes, by Mcp-Method.
type methodCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (m *methodCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	m.mu.Lock()
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	m.counts[r.Header.Get("Mcp-Method")]++
	m.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (m *methodCounter) count(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[method]
}

func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// videoArgs asks for a 2-second local video.
func videoArgs(prompt string) map[string]any {
	return map[string]any{"modelId": "local-motion", "prompt": prompt, "durationSeconds": 2}
}

type generationView struct {
	GenerationID string `json:"generationId"`
	Status       string `json:"status"`
	Outputs      []struct {
		URL      string `json:"url"`
		MimeType string `json:"mimeType"`
		Bytes    int64  `json:"bytes"`
		SHA256   string `json:"sha256"`
	} `json:"outputs"`
}

// checkOutput checks that a CallToolResult is a completed generation whose
// first output downloads with the advertised sha256 and size.
func checkOutput(t *testing.T, result json.RawMessage) {
	t.Helper()
	o := &Outcome{Result: result}
	if o.IsError() {
		t.Fatalf("tool error: %s", result)
	}
	var g generationView
	if err := o.StructuredContent(&g); err != nil {
		t.Fatalf("structuredContent: %v in %s", err, result)
	}
	if g.Status != "completed" || len(g.Outputs) == 0 {
		t.Fatalf("generation %s is %s with %d outputs", g.GenerationID, g.Status, len(g.Outputs))
	}
	out := g.Outputs[0]
	resp, err := http.Get(out.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", out.URL, resp.StatusCode, err)
	}
	sum := sha256.Sum256(body)
	if got := hex.EncodeToString(sum[:]); got != out.SHA256 || int64(len(body)) != out.Bytes {
		t.Fatalf("output: sha256 %s (%d bytes), advertised %s (%d bytes)", got, len(body), out.SHA256, out.Bytes)
	}
}
