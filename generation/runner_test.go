package generation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// startRunner runs a runner over e's service until the test ends.
func startRunner(t *testing.T, e *testEnv) *Runner {
	t.Helper()
	return startRunnerWith(t, e, RunnerConfig{})
}

func startRunnerWith(t *testing.T, e *testEnv, cfg RunnerConfig) *Runner {
	t.Helper()
	r := NewRunner(e.svc, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runner: %v", err)
		}
	})
	return r
}

func (e *testEnv) waitDone(id string) *Generation {
	e.t.Helper()
	g, timedOut, err := e.svc.Wait(context.Background(), "alice", id, waitLimit)
	if err != nil || timedOut {
		e.t.Fatalf("wait %s: timedOut=%v err=%v (last %+v)", id, timedOut, err, g)
	}
	return g
}

func TestRunnerCompletes(t *testing.T) {
	e := newEnv(t)
	startRunner(t, e)
	ctx := context.Background()
	g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "a heron", AspectRatio: "1:1"})
	done := e.waitDone(g.ID)
	if done.Status != StatusCompleted || len(done.Outputs) != 1 || done.Progress != 1 || done.Charged != done.Credits {
		t.Fatalf("finished as %s (%s) with %d outputs", done.Status, done.StatusMessage, len(done.Outputs))
	}
	o := done.Outputs[0]
	if o.MimeType != "image/png" || o.Width != 1024 || o.Height != 1024 || o.Bytes == 0 {
		t.Fatalf("output %+v", o)
	}
	rc, obj, err := e.blobs.Open(ctx, o.Key)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	rc.Close()
	if err != nil || n != o.Bytes || hex.EncodeToString(h.Sum(nil)) != o.SHA256 || obj.SHA256 != o.SHA256 {
		t.Fatalf("stored output differs from the record: %d bytes, %v", n, err)
	}
	if s := e.prov.submits.Load(); s != 1 || e.local.JobCount() != 1 {
		t.Fatalf("submits %d, jobs %d; want 1 and 1", s, e.local.JobCount())
	}
	if h := e.changesFor(g.ID); len(h) == 0 || h[len(h)-1] != "completed" || slices.Contains(h[:len(h)-1], "completed") {
		t.Fatalf("hook saw %v, want ...completed once at the end", h)
	}
}

func TestRunnerProviderFailure(t *testing.T) {
	e := newEnv(t)
	startRunner(t, e)
	g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "please [fail]"})
	done := e.waitDone(g.ID)
	if done.Status != StatusFailed || done.ErrorKind != ErrorProvider || done.ErrorMessage == "" || len(done.Outputs) != 0 {
		t.Fatalf("finished as %s kind=%q msg=%q", done.Status, done.ErrorKind, done.ErrorMessage)
	}
}

func TestRunnerUploadThenComplete(t *testing.T) {
	e := newEnv(t)
	startRunner(t, e)
	g := e.create("alice", CreateRequest{ModelID: "local-animate", Prompt: "ripples", DurationSeconds: 2})
	if g.Status != StatusReserved || !g.UploadRequired() {
		t.Fatalf("created %s", g.Status)
	}
	if _, err := e.svc.UploadInput(context.Background(), "alice", g.ID, "", InputImage{Data: pngBytes(t)}); err != nil {
		t.Fatal(err)
	}
	done := e.waitDone(g.ID)
	if done.Status != StatusCompleted || len(done.Outputs) != 1 || done.Outputs[0].DurationSeconds != 2 {
		t.Fatalf("finished as %s (%s) %+v", done.Status, done.StatusMessage, done.Outputs)
	}
}

// TestRunnerReconcilesUnknownSubmit: a generation left 'submitting' by a
// crash between MarkSubmitting and MarkSubmitted is reconciled with Find:
// an existing job is adopted without a second Submit; a missing one is
// submitted once.
func TestRunnerReconcilesUnknownSubmit(t *testing.T) {
	cases := []struct {
		name        string
		jobExists   bool
		wantSubmits int32
	}{
		{"job reached the provider", true, 0},
		{"job never reached the provider", false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "crash test", AspectRatio: "1:1"})
			if c.jobExists {
				// The provider call that happened before the crash.
				m, _ := e.svc.Model(g.ModelID)
				if _, err := e.local.Submit(ctx, provider.Request{IdempotencyKey: g.ID, Model: m, Prompt: g.Prompt, AspectRatio: g.Params.AspectRatio}); err != nil {
					t.Fatal(err)
				}
			}
			// The crash: submitting recorded, its outcome not; a dead lease.
			e.exec("UPDATE generations SET submit_state = 'submitting', lease_owner = 'dead', lease_until = ? WHERE id = ?",
				time.Now().Add(time.Hour).UnixMilli(), g.ID)
			startRunner(t, e)
			done := e.waitDone(g.ID)
			if done.Status != StatusCompleted {
				t.Fatalf("finished as %s (%s)", done.Status, done.StatusMessage)
			}
			if f := e.prov.finds.Load(); f < 1 {
				t.Fatal("the runner did not reconcile with Find")
			}
			if s := e.prov.submits.Load(); s != c.wantSubmits {
				t.Fatalf("Submit called %d times, want %d", s, c.wantSubmits)
			}
			if n := e.local.JobCount(); n != 1 {
				t.Fatalf("the provider holds %d jobs, want 1", n)
			}
		})
	}
}

// waitUntil returns the generation once ok holds, woken by the hub.
func (e *testEnv) waitUntil(id string, ok func(*Generation) bool) *Generation {
	e.t.Helper()
	deadline := time.After(waitLimit)
	for {
		ch, release := e.svc.Hub().Watch(id)
		g, err := e.svc.Get(context.Background(), "alice", id)
		if err != nil {
			release()
			e.t.Fatal(err)
		}
		if ok(g) {
			release()
			return g
		}
		select {
		case <-ch:
			release()
		case <-deadline:
			release()
			e.t.Fatalf("generation %s never reached the expected state; last %s %q", id, g.Status, g.StatusMessage)
		}
	}
}

// TestOverCapStartsWhenOneFinishes: a generation held back by the owner's
// in-flight cap says it "starts when one finishes", and must: the end of
// an in-flight generation has to wake it, not a timer. The clock is
// frozen, so a generation rescheduled for "now + 2 s" only starts if
// something makes it due again.
func TestOverCapStartsWhenOneFinishes(t *testing.T) {
	frozen := time.Now()
	e := newEnv(t, func(c *Config) { c.Now = func() time.Time { return frozen } })
	inStatus, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.prov.beforeStatus = func(provider.Job) {
		first := false
		once.Do(func() { first = true })
		if first { // hold the first job in flight
			close(inStatus)
			<-release
		}
	}
	startRunnerWith(t, e, RunnerConfig{MaxInFlight: func(string) int { return 1 }})
	first := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "first"})
	select {
	case <-inStatus:
	case <-time.After(waitLimit):
		t.Fatal("the first generation never reached the provider")
	}
	second := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "second"})
	e.waitUntil(second.ID, func(g *Generation) bool { return strings.Contains(g.StatusMessage, "in flight") })
	if n := e.prov.submits.Load(); n != 1 {
		t.Fatalf("%d submits while over the cap, want 1", n)
	}
	close(release)
	if g := e.waitDone(first.ID); g.Status != StatusCompleted {
		t.Fatalf("first finished as %s", g.Status)
	}
	g, timedOut, err := e.svc.Wait(context.Background(), "alice", second.ID, 5*time.Second)
	if err != nil || timedOut || g.Status != StatusCompleted {
		t.Fatalf("the held generation did not start when the in-flight one finished: %s %q timedOut=%v err=%v",
			g.Status, g.StatusMessage, timedOut, err)
	}
}

// TestInFlightCountsOutputs: the in-flight cap counts outputs. With a cap
// of 3 and a generation of 2 outputs at the provider, another of 2 waits
// while one of 1 starts; the waiting one starts when the first ends.
func TestInFlightCountsOutputs(t *testing.T) {
	e := newEnv(t)
	inStatus, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.prov.beforeStatus = func(provider.Job) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(inStatus)
			<-release
		}
	}
	startRunnerWith(t, e, RunnerConfig{MaxInFlight: func(string) int { return 3 }})
	first := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "two", Count: 2})
	select {
	case <-inStatus:
	case <-time.After(waitLimit):
		t.Fatal("the first generation never reached the provider")
	}
	held := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "two more", Count: 2})
	e.waitUntil(held.ID, func(g *Generation) bool {
		return strings.Contains(g.StatusMessage, "2 of your outputs are in flight (limit 3)")
	})
	if g := e.waitDone(e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "one"}).ID); g.Status != StatusCompleted {
		t.Fatalf("a generation of one output within the cap ended %s", g.Status)
	}
	if g, _ := e.svc.Get(context.Background(), "alice", held.ID); g.Status != StatusQueued {
		t.Fatalf("the generation over the cap is %s, want queued", g.Status)
	}
	close(release)
	for _, id := range []string{first.ID, held.ID} {
		if g := e.waitDone(id); g.Status != StatusCompleted || len(g.Outputs) != 2 {
			t.Fatalf("%s ended %s with %d outputs, want completed with 2", id, g.Status, len(g.Outputs))
		}
	}
}
