package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestKeepAliveThroughHAProxy: a subscriptions/listen stream on a live
// task and a held wait_generation through HAProxy, whose idle timeouts
// (timeout server and client) cut a connection with nothing on it. With
// the keep-alive below the proxy's timeout both outlive it and get their
// answer; above it the proxy cuts both (so the test can fail).
//
// In production the relation is HAProxy's timeout server 30s against
// DARKROOM_STREAM_KEEPALIVE's default 15s, with waits held up to 55 s and
// listen streams for a task's whole life. Here it is scaled down so the
// test takes seconds: a 3 s proxy timeout, a keep-alive of 1 s (survives)
// or 5 s (cut), and waits held 5 s (DARKROOM_MAX_WAIT). The only real time
// in it is the proxy's: the wait's own cap sets when the task is ended.
func TestKeepAliveThroughHAProxy(t *testing.T) {
	if onPostgres() {
		t.Skip("engine-independent: runs in the default pass")
	}
	const proxyTimeout = 3 * time.Second
	cases := []struct {
		keepAlive string
		survives  bool
	}{
		{"1s", true},
		{"5s", false},
	}
	for _, c := range cases {
		t.Run("keepalive="+c.keepAlive, func(t *testing.T) {
			t.Parallel()
			p := startProcess(t, t.TempDir(), "DARKROOM_STREAM_KEEPALIVE="+c.keepAlive, "DARKROOM_MAX_WAIT=5s",
				"DARKROOM_METRICS_ADDR=off", "DARKROOM_TRUSTED_PROXIES=127.0.0.1")
			lb, _ := startHAProxyTimeout(t, proxyTimeout, strings.TrimPrefix(p.url, "http://"))

			// An image-to-video task without its input image stays working
			// (reserved) until it is cancelled.
			rc := &rpcClient{t: t, url: lb, caps: withTasks()}
			r := rc.tool("generate", map[string]any{"modelId": "local-animate", "prompt": "held"})
			taskID, _ := r.Result["taskId"].(string)
			if taskID == "" {
				t.Fatalf("generate: %+v %v", r.Error, r.Result)
			}
			legacy := &rpcClient{t: t, url: lb, caps: map[string]any{}}
			g := legacy.tool("generate", map[string]any{"modelId": "local-animate", "prompt": "waited"})
			genID, _ := g.Result["structuredContent"].(map[string]any)["generationId"].(string)
			if genID == "" {
				t.Fatalf("legacy generate: %+v %v", g.Error, g.Result)
			}

			events := listenThrough(t, lb, taskID)
			if ev, ok := <-events; !ok || !strings.Contains(ev, "notifications/subscriptions/acknowledged") {
				t.Fatalf("listen acknowledgement: %q %v", ev, ok)
			}

			// Held 5 s, past the proxy's 3 s.
			t0 := time.Now()
			w := legacy.tool("wait_generation", map[string]any{"generationId": genID, "timeoutSeconds": 30})
			held := time.Since(t0)
			sc, _ := w.Result["structuredContent"].(map[string]any)
			waited := w.Status == http.StatusOK && sc["timedOut"] == true
			t.Logf("wait_generation after %v: HTTP %d, answered %v", held.Round(time.Millisecond), w.Status, waited)
			if waited != c.survives {
				t.Fatalf("wait_generation answered: %v, want %v (HTTP %d, %+v)", waited, c.survives, w.Status, w.Error)
			}

			// The listen has been open as long: its task ends now.
			if cr := rc.call("tasks/cancel", map[string]any{"taskId": taskID}); cr.Error != nil {
				t.Fatalf("tasks/cancel: %+v", cr.Error)
			}
			var cancelled, closed bool
			for ev := range events {
				cancelled = cancelled || (strings.Contains(ev, `"notifications/tasks"`) && strings.Contains(ev, `"cancelled"`))
				closed = closed || strings.Contains(ev, `"resultType":"complete"`)
			}
			t.Logf("listen: heard the cancel %v, closed with its result %v", cancelled, closed)
			if (cancelled && closed) != c.survives {
				t.Fatalf("listen survived: %v, want %v", cancelled && closed, c.survives)
			}
		})
	}
}

// listenThrough opens a subscriptions/listen stream on taskID and sends
// each SSE event's data on the channel, closing it when the stream ends.
func listenThrough(t *testing.T, base, taskID string) <-chan string {
	t.Helper()
	body := rpcBody(rpcSeq.Add(1), "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{taskID}}}, withTasks())
	req, _ := http.NewRequest("POST", base+"/mcp", bytes.NewReader(body))
	for k, v := range rpcHeaders("subscriptions/listen", "", "") {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("listen: HTTP %d", resp.StatusCode)
	}
	out := make(chan string, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Valid([]byte(d)) {
				out <- d
			}
		}
	}()
	return out
}
