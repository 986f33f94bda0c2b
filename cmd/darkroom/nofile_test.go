package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOutOfFileDescriptors: darkroom serve under an open-files limit of
// 80, sent more idle connections than that. It says so in one clear log
// line and counts darkroom_accept_errors_total; it does not crash, and it
// serves again once the connections are gone.
func TestOutOfFileDescriptors(t *testing.T) {
	if onPostgres() {
		t.Skip("engine-independent: runs in the default pass")
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit (util-linux)")
	}
	const limit = 80
	cmd := exec.Command(prlimit, "--nofile="+strconv.Itoa(limit)+":"+strconv.Itoa(limit), binary,
		"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--metrics-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DARKROOM_LOCAL_LATENCY=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	type line struct {
		Msg      string `json:"msg"`
		Addr     string `json:"addr"`
		Metrics  string `json:"metrics"`
		Failures int    `json:"failures"`
	}
	lines := make(chan line, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l line
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				select {
				case lines <- l:
				default:
				}
			}
		}
		close(lines)
	}()
	next := func(want string) line {
		t.Helper()
		for l := range lines {
			if strings.Contains(l.Msg, want) {
				return l
			}
		}
		t.Fatalf("darkroom ended before logging %q", want)
		return line{}
	}
	up := next("darkroom serving")
	addr := strings.TrimSuffix(strings.TrimPrefix(up.Addr, "http://"), "/mcp")
	metricsURL := regexp.MustCompile(`http://[0-9.:]+/metrics`).FindString(up.Metrics)

	var conns []net.Conn
	for range limit + 20 {
		c, err := net.Dial("tcp", addr) // the kernel's backlog completes it
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	l := next("out of file descriptors")
	t.Logf("logged %q (failures %d) with %d connections open", l.Msg, l.Failures, len(conns))
	for _, c := range conns {
		_ = c.Close()
	}
	if cmd.ProcessState != nil {
		t.Fatal("darkroom exited")
	}
	// It serves again: net/http retried the accept.
	hc := &http.Client{Timeout: 20 * time.Second}
	resp, err := hc.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the connections closed: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	if metricsURL == "" {
		t.Fatalf("no metrics address in the banner %q", up.Metrics)
	}
	resp, err = hc.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	m := regexp.MustCompile(`(?m)^darkroom_accept_errors_total ([0-9.e+]+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatal("no darkroom_accept_errors_total in /metrics")
	}
	if n, _ := strconv.ParseFloat(string(m[1]), 64); n < 1 {
		t.Fatalf("darkroom_accept_errors_total %s, want at least 1", m[1])
	}
}
