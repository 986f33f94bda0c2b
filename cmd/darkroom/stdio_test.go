package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// syncBuffer collects a child's stderr while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stdioClient runs `darkroom stdio` on data with args and connects
// go-sdk's client to it; closing the session ends the process.
func stdioClient(t *testing.T, stderr *syncBuffer, data string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"stdio", "--data", data}, args...)...)
	cmd.Env = append(os.Environ(), "DARKROOM_LOCAL_LATENCY=0")
	if u := databaseURL(t, data); u != "" {
		cmd.Env = append(cmd.Env, "DARKROOM_DATABASE_URL="+u)
	}
	if stderr != nil {
		cmd.Stderr = stderr
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "restart-test", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func fetchSHA(t *testing.T, link string) (int, string) {
	t.Helper()
	code, body := httpGet(t, link)
	sum := sha256.Sum256(body)
	return code, hex.EncodeToString(sum[:])
}

// TestStdioLinksOutliveRestart: the files listener keeps its port, so a
// link handed out before the assistant restarts darkroom still answers
// after it, and get_generation on the same data dir finds the
// generation with a working fresh link.
func TestStdioLinksOutliveRestart(t *testing.T) {
	data, addr := t.TempDir(), freeAddr(t)
	cs := stdioClient(t, nil, data, "--addr", addr)
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "before a restart", "wait": true}, &g)
	if g.Status != "completed" || len(g.Outputs) != 1 {
		t.Fatalf("generate: %+v", g)
	}
	link := g.Outputs[0].URL
	if u, _ := url.Parse(link); u.Host != addr {
		t.Fatalf("link %s is not on %s", link, addr)
	}
	if code, sum := fetchSHA(t, link); code != 200 || sum != g.Outputs[0].SHA256 {
		t.Fatalf("before the restart: %d, sha256 %s", code, sum)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}

	cs = stdioClient(t, nil, data, "--addr", addr)
	if code, sum := fetchSHA(t, link); code != 200 || sum != g.Outputs[0].SHA256 {
		t.Fatalf("the old link after the restart: %d, sha256 %s", code, sum)
	}
	var again genView
	res := call(t, cs, "get_generation", map[string]any{"generationId": g.GenerationID}, &again)
	if again.Status != "completed" || len(again.Outputs) != 1 {
		t.Fatalf("get_generation after the restart: %s", text(res))
	}
	if code, sum := fetchSHA(t, again.Outputs[0].URL); code != 200 || sum != g.Outputs[0].SHA256 {
		t.Fatalf("a fresh link after the restart: %d, sha256 %s", code, sum)
	}
}

// TestStdioFilesPortTaken: when the files port is taken, stdio still
// starts, on a free port, says so on stderr, and its links work.
func TestStdioFilesPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var stderr syncBuffer
	cs := stdioClient(t, &stderr, t.TempDir(), "--addr", taken.Addr().String())
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "port taken", "wait": true}, &g)
	if g.Status != "completed" {
		t.Fatalf("generate: %+v", g)
	}
	u, _ := url.Parse(g.Outputs[0].URL)
	if u.Host == taken.Addr().String() {
		t.Fatalf("link %s on the taken port", u)
	}
	if code, sum := fetchSHA(t, g.Outputs[0].URL); code != 200 || sum != g.Outputs[0].SHA256 {
		t.Fatalf("link on the fallback port: %d %s", code, sum)
	}
	if log := stderr.String(); !strings.Contains(log, "files port is taken") || !strings.Contains(log, u.Host) {
		t.Errorf("no log line naming the fallback port %s:\n%s", u.Host, log)
	}
}

// TestStdioHelpNamesThePort: stdio's default files address has a fixed
// port, and -h says which, and what happens when it is taken.
func TestStdioHelpNamesThePort(t *testing.T) {
	t.Setenv("DARKROOM_ADDR", "")
	cfg, err := parseConfig("stdio", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, port, _ := net.SplitHostPort(cfg.Addr); cfg.Addr != stdioFilesAddr || port == "0" {
		t.Errorf("stdio's default files address %q, want a fixed port", cfg.Addr)
	}
	out, _ := exec.Command(binary, "stdio", "-h").CombinedOutput()
	for _, want := range []string{stdioFilesAddr, "a free one is used instead", "restarts"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stdio -h lacks %q:\n%s", want, out)
		}
	}
}

// TestBannersTellTheTruth: each mode's start-up line names only what that
// mode serves. stdio (API keys and a metrics token in its environment,
// which it does not use for MCP) names no probes, no way to require keys
// and no /metrics on its files port, each of which answers 404 there;
// serve names its probes and /metrics on its port, and they answer.
func TestBannersTellTheTruth(t *testing.T) {
	get := func(u, token string) int {
		req, _ := http.NewRequest("GET", u, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const token = "banner-metrics-token"
	t.Run("stdio", func(t *testing.T) {
		t.Setenv("DARKROOM_API_KEYS", "alice=alice-secret-never-used-on-stdio")
		t.Setenv("DARKROOM_METRICS_TOKEN", token)
		t.Setenv("DARKROOM_METRICS_ADDR", "127.0.0.1:0")
		var stderr syncBuffer
		cs := stdioClient(t, &stderr, t.TempDir(), "--addr", freeAddr(t))
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		var b map[string]any
		for line := range strings.Lines(stderr.String()) {
			if strings.Contains(line, `"msg":"darkroom on stdio"`) {
				_ = json.Unmarshal([]byte(line), &b)
			}
		}
		if b == nil {
			t.Fatalf("no banner in:\n%s", stderr.String())
		}
		public, _ := b["publicURL"].(string)
		all, _ := json.Marshal(b)
		for _, absent := range []string{"/healthz", "/readyz", "DARKROOM_API_KEYS", public + "/metrics"} {
			if strings.Contains(string(all), absent) {
				t.Errorf("stdio banner names %q: %s", absent, all)
			}
		}
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			if code := get(public+p, token); code != http.StatusNotFound {
				t.Errorf("stdio %s: %d, want 404 (not served, so not named)", p, code)
			}
		}
		if auth, _ := b["auth"].(string); !strings.Contains(auth, "local principal") {
			t.Errorf("stdio banner auth = %q", auth)
		}
		if files, _ := b["files"].(string); files != public+"/files/" {
			t.Errorf("stdio banner files = %q, want %s/files/", files, public)
		}
		m, _ := b["metrics"].(string)
		if !strings.HasSuffix(m, "/metrics") || get(m, token) != http.StatusOK {
			t.Errorf("stdio banner metrics = %q, want the metrics listener's URL, answering", m)
		}
	})
	t.Run("serve", func(t *testing.T) {
		s := startServer(t, 0, func(c *config) { c.MetricsToken = token })
		var all strings.Builder
		for _, v := range s.app.banner(s.url+"/mcp", nil) {
			fmt.Fprint(&all, v, " ")
		}
		for _, named := range []string{"/healthz", "/readyz", s.url + "/metrics", "DARKROOM_API_KEYS"} {
			if !strings.Contains(all.String(), named) {
				t.Errorf("serve banner does not name %q: %s", named, all.String())
			}
		}
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			if code := get(s.url+p, token); code != http.StatusOK {
				t.Errorf("serve %s: %d, want 200", p, code)
			}
		}
	})
}
