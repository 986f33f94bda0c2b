package gentools_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitSession is session with the wait bounds set (0: the defaults), and
// a client that hands every notifications/progress to the returned
// channel.
func (r *rig) waitSession(every, maxWait time.Duration) (*mcp.ClientSession, <-chan *mcp.ProgressNotificationParams) {
	r.t.Helper()
	tools := gentools.New(gentools.Config{
		Service:       r.svc,
		Owner:         func(context.Context, *mcp.CallToolRequest) string { return "alice" },
		ProgressEvery: every,
		MaxWait:       maxWait,
	})
	s := mcp.NewServer(&mcp.Implementation{Name: "darkroom-test", Version: "1"}, nil)
	tools.Register(s, nil)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(context.Background(), st, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	got := make(chan *mcp.ProgressNotificationParams, 1000)
	c := mcp.NewClient(&mcp.Implementation{Name: "gentools-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { got <- req.Params },
	})
	cs, err := c.Connect(context.Background(), ct, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs, got
}

type waited struct {
	res *mcp.CallToolResult
	err error
}

// callAsync calls tool with a progressToken (unless token is nil) and
// delivers the answer on the channel.
func callAsync(cs *mcp.ClientSession, tool string, args map[string]any, token any) <-chan waited {
	done := make(chan waited, 1)
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if token != nil {
		p.SetProgressToken(token)
	}
	go func() {
		res, err := cs.CallTool(context.Background(), p)
		done <- waited{res, err}
	}()
	return done
}

// next is the next progress notification; none within limit fails.
func next(t *testing.T, got <-chan *mcp.ProgressNotificationParams, limit time.Duration) *mcp.ProgressNotificationParams {
	t.Helper()
	select {
	case n := <-got:
		return n
	case <-time.After(limit):
		t.Fatalf("no notifications/progress within %s", limit)
		return nil
	}
}

func answer(t *testing.T, done <-chan waited, tool string) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	var w waited
	select {
	case w = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not answer", tool)
	}
	if w.err != nil || w.res.IsError {
		t.Fatalf("%s: %v %+v", tool, w.err, w.res)
	}
	out, _ := w.res.StructuredContent.(map[string]any)
	return w.res, out
}

// TestWaitAnswersAtTheCap: no wait outlives MaxWait (55 s unless raised),
// with a progressToken or without, whatever timeoutSeconds or waitSeconds
// asks: clients cut a request at 60 s even while progress arrives. It
// answers the latest status with timedOut:true and the hint to call again;
// with a token, progress comes at the start and every 10 s, without one
// none. Time is synctest's: the waits take no wall time.
func TestWaitAnswersAtTheCap(t *testing.T) {
	for _, c := range []struct {
		name    string
		tool    string
		token   any
		maxWait time.Duration // 0: the default
		want    time.Duration
	}{
		{"wait_generation/progress", "wait_generation", "tok", 0, 55 * time.Second},
		{"wait_generation/quiet", "wait_generation", nil, 0, 55 * time.Second},
		{"generate/progress", "generate", 7, 0, 55 * time.Second},
		{"generate/quiet", "generate", nil, 0, 55 * time.Second},
		{"wait_generation/progress/raised", "wait_generation", "tok", 120 * time.Second, 120 * time.Second},
		{"generate/quiet/raised", "generate", nil, 120 * time.Second, 120 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, nil) // no runner: generations stay queued
				cs, got := r.waitSession(0, c.maxWait)
				args := map[string]any{"modelId": "local-sketch", "prompt": "waits", "wait": true, "waitSeconds": 300}
				if c.tool == "wait_generation" {
					args = map[string]any{"generationId": generate(t, cs, sketch("never runs", "")).GenerationID, "timeoutSeconds": 300}
				}
				start := time.Now()
				w := <-callAsync(cs, c.tool, args, c.token)
				took := time.Since(start)
				if w.err != nil || w.res.IsError {
					t.Fatalf("%s: %v %+v", c.tool, w.err, w.res)
				}
				if took != c.want {
					t.Errorf("answered after %s, want %s", took, c.want)
				}
				out, _ := w.res.StructuredContent.(map[string]any)
				if out["timedOut"] != true || out["status"] != "queued" {
					t.Errorf("timedOut=%v status=%v, want true, queued", out["timedOut"], out["status"])
				}
				if !strings.Contains(text(w.res), "call wait_generation again") {
					t.Errorf("no hint to call again: %s", text(w.res))
				}
				// At the start, then every 10 s (one at the very end may race the answer).
				notes, lo, hi := len(got), 0, 0
				if c.token != nil {
					lo, hi = 1+int((c.want-1)/gentools.DefaultProgressEvery), 1+int(c.want/gentools.DefaultProgressEvery)
				}
				if notes < lo || notes > hi {
					t.Errorf("%d progress notifications in %s, want %d..%d", notes, took, lo, hi)
				}
			})
		})
	}
}

// TestWaitKeepAlive: with a progressToken, a wait that sees no change
// still sends notifications/progress every interval (progress always
// increasing, total 100, the status as text), and answers as soon as the
// generation ends.
func TestWaitKeepAlive(t *testing.T) {
	r := newRig(t, nil)
	cs, got := r.waitSession(20*time.Millisecond, time.Hour)
	done := callAsync(cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "kept alive", "wait": true, "waitSeconds": 60}, "tok-1")
	var last float64
	start := time.Now()
	for i := range 6 {
		n := next(t, got, 10*time.Second)
		if n.ProgressToken != "tok-1" || n.Total != 100 || n.Message != "Queued" {
			t.Fatalf("notification %d: %+v", i, n)
		}
		if i > 0 && n.Progress <= last {
			t.Fatalf("progress went from %v to %v: it must increase", last, n.Progress)
		}
		last = n.Progress
	}
	if took := time.Since(start); took < 5*20*time.Millisecond {
		t.Errorf("6 notifications in %s: keep-alives come once an interval, not faster", took)
	}
	var list struct {
		Generations []view `json:"generations"`
	}
	decode(t, "list_generations", call(t, cs, "list_generations", map[string]any{}), &list)
	if len(list.Generations) != 1 {
		t.Fatalf("%d generations, want 1", len(list.Generations))
	}
	call(t, cs, "cancel_generation", map[string]any{"generationId": list.Generations[0].GenerationID})
	_, out := answer(t, done, "generate")
	if out["status"] != "cancelled" || out["timedOut"] != false {
		t.Fatalf("status=%v timedOut=%v, want cancelled, false", out["status"], out["timedOut"])
	}
}

// TestWaitProgressOnChange: with a keep-alive far away, every change of
// the generation still sends a notification at once.
func TestWaitProgressOnChange(t *testing.T) {
	r := newRig(t, nil)
	cs, got := r.waitSession(time.Hour, time.Hour)
	reserved := generate(t, cs, map[string]any{"modelId": "local-animate", "prompt": "a clip"})
	done := callAsync(cs, "wait_generation", map[string]any{"generationId": reserved.GenerationID, "timeoutSeconds": 300}, 7)
	first := next(t, got, 10*time.Second)
	if fmt.Sprint(first.ProgressToken) != "7" {
		t.Errorf("progressToken %#v, want 7", first.ProgressToken)
	}
	if first.Message != "Waiting for an input image: call upload_input with this generationId" {
		t.Fatalf("first notification: %+v", first)
	}
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	call(t, cs, "upload_input", map[string]any{"generationId": reserved.GenerationID, "image": map[string]any{"data": png, "mimeType": "image/png"}})
	if n := next(t, got, 10*time.Second); n.Message != "Queued" || n.Progress <= first.Progress {
		t.Fatalf("after the upload: %+v", n)
	}
	call(t, cs, "cancel_generation", map[string]any{"generationId": reserved.GenerationID})
	if _, out := answer(t, done, "wait_generation"); out["status"] != "cancelled" {
		t.Fatalf("status %v, want cancelled", out["status"])
	}
}
