// Package imagetest checks the darkroom container image and the compose
// fleet with a real container engine. The tests skip unless
// DARKROOM_IMAGE names a built image (scripts/image.sh test, make
// image-test) or DARKROOM_FLEET names a running fleet (scripts/fleet.sh,
// make fleet-test); DARKROOM_ENGINE is docker or podman (default podman).
package imagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func engine() string {
	if e := os.Getenv("DARKROOM_ENGINE"); e != "" {
		return e
	}
	return "podman"
}

func init() {
	// Podman on these machines needs runc and lower rlimits: the
	// containers.conf scripts/engine.sh writes, when run by hand.
	if engine() == "podman" && os.Getenv("CONTAINERS_CONF") == "" {
		if home, err := os.UserHomeDir(); err == nil {
			conf := home + "/.cache/darkroom/containers.conf"
			if _, err := os.Stat(conf); err == nil {
				os.Setenv("CONTAINERS_CONF", conf)
			}
		}
	}
}

// eng runs the engine and returns its stdout; the error carries stderr.
func eng(args ...string) (string, error) {
	cmd := exec.Command(engine(), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w: %s", engine(), strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), err
}

// logsOf is a container's log, stdout and stderr (darkroom logs to stderr).
func logsOf(name string) string {
	b, _ := exec.Command(engine(), "logs", name).CombinedOutput()
	return string(b)
}

func mustEng(t testing.TB, args ...string) string {
	t.Helper()
	out, err := eng(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freePort is a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// bearer adds an API key to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t testing.TB, base, token, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "imagetest", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token}}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", base, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type genView struct {
	GenerationID  string `json:"generationId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	TimedOut      *bool  `json:"timedOut"`
	Outputs       []struct {
		URL    string `json:"url"`
		SHA256 string `json:"sha256"`
		Bytes  int64  `json:"bytes"`
	} `json:"outputs"`
}

func callTool(cs *mcp.ClientSession, tool string, args map[string]any, out any) error {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return err
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		return fmt.Errorf("%s: tool error %s", tool, b)
	}
	if out != nil && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s: decode %s: %w", tool, b, err)
		}
	}
	return nil
}

func call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any, out any) {
	t.Helper()
	if err := callTool(cs, tool, args, out); err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
}

// waitDone waits on a generation until it ends (wait_generation, again
// while it answers timedOut).
func waitDone(t testing.TB, cs *mcp.ClientSession, id string) genView {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var w genView
		call(t, cs, "wait_generation", map[string]any{"generationId": id, "timeoutSeconds": 30}, &w)
		switch w.Status {
		case "completed", "failed", "cancelled":
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("generation %s still %s", id, w.Status)
		}
	}
}

// download GETs a signed link and checks it is under base and its bytes
// match the digest the server gave.
func download(t testing.TB, base, link, sha string) int {
	t.Helper()
	if !strings.HasPrefix(link, base+"/") {
		t.Fatalf("link %s is not under the public URL %s", link, base)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", link, resp.StatusCode, b)
	}
	if sum := sha256.Sum256(b); sha != "" && hex.EncodeToString(sum[:]) != sha {
		t.Fatalf("GET %s: %d bytes whose sha256 is not %s", link, len(b), sha)
	}
	return len(b)
}

func status(url string) int {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// eventually polls cond every 100 ms until it holds; why, if given, says
// what it last saw, for the failure.
func eventually(t testing.TB, timeout time.Duration, cond func() bool, what string, why ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			last := ""
			for _, w := range why {
				last += " (last: " + w() + ")"
			}
			t.Fatalf("timed out after %v waiting for %s%s", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
