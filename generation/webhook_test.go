package generation

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
)

// life is one run of darkroom on a data folder: everything in memory
// (service, runner, engine handles) goes when it ends, as in a kill.
type life struct {
	svc    *Service
	runner *Runner
	db     TestEngine
	stop   func()
}

func startLife(t *testing.T, dir string, run bool) *life {
	t.Helper()
	d, err := OpenTestEngine(filepath.Join(dir, "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	// A scale of 1000 keeps every local job running for hours.
	lp, err := local.New(local.Options{Dir: dir, Scale: 1000})
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := blob.NewLocal(filepath.Join(dir, "files"), bytes.Repeat([]byte{7}, 32), "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(Config{Store: d.Generations(), Blobs: blobs, Providers: []provider.Provider{lp}})
	if err != nil {
		t.Fatal(err)
	}
	l := &life{svc: svc, runner: NewRunner(svc, RunnerConfig{}), db: d, stop: func() {}}
	if run {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = l.runner.Run(ctx); close(done) }()
		l.stop = func() { cancel(); <-done }
	}
	return l
}

func (l *life) end() {
	l.stop()
	_ = l.db.Close()
}

// TestWebhookSurvivesRestart: a verified delivery stored by intake takes
// effect after the process ends before any step could apply it; a late
// non-terminal delivery never replaces the terminal one before it; a
// repeated delivery id is stored once.
func TestWebhookSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	first := startLife(t, dir, true)
	g, _, err := first.svc.Create(ctx, "alice", CreateRequest{ModelID: "local-sketch", Prompt: "a heron"})
	if err != nil {
		t.Fatal(err)
	}
	submitted := first.waitForJob(t, g.ID)
	first.stop() // the runner is gone: nothing steps after intake
	row, err := first.db.Generations().Generation(ctx, submitted.ID)
	if err != nil || row.ProviderJobID == "" {
		t.Fatalf("no provider job: %v %+v", err, row)
	}
	failed := provider.WebhookEvent{DeliveryID: "d1", JobID: row.ProviderJobID, Trusted: true,
		Status: &provider.Status{State: provider.StateFailed, Error: "refused, as the webhook says"}}
	late := provider.WebhookEvent{DeliveryID: "d0-retry", JobID: row.ProviderJobID, Trusted: true,
		Status: &provider.Status{State: provider.StateRunning, Progress: 0.5}}
	for _, ev := range []provider.WebhookEvent{failed, failed, late} {
		if err := first.runner.Webhook(ctx, "local", ev); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := first.db.QueryInt("SELECT COUNT(*) FROM webhook_deliveries"); n != 2 {
		t.Fatalf("%d deliveries stored, want 2 (one repeated id)", n)
	}
	first.end()

	second := startLife(t, dir, true)
	defer second.end()
	done := waitFor(t, second.svc, g.ID, func(g *Generation) bool { return g.Status.Terminal() })
	if done.Status != StatusFailed || done.ErrorKind != ErrorProvider || done.ErrorMessage != failed.Status.Error {
		t.Fatalf("after restart: %s %s %q", done.Status, done.ErrorKind, done.ErrorMessage)
	}
	second.stop() // the step that applied them has finished
	second.stop = func() {}
	if seq, _ := second.db.Generations().LastPendingDelivery(ctx, g.ID); seq != 0 {
		t.Fatal("deliveries left unconsumed")
	}
}

// waitFor blocks (event-driven) until ok holds for the generation.
// waitForJob waits until a live generation's provider job has its id
// recorded (Submitted is set from the start of the submission, before
// the provider answers).
func (l *life) waitForJob(t *testing.T, id string) *Generation {
	t.Helper()
	return waitFor(t, l.svc, id, func(g *Generation) bool {
		row, err := l.db.Generations().Generation(context.Background(), g.ID)
		return err == nil && row.ProviderJobID != "" && !g.Status.Terminal()
	})
}

func waitFor(t *testing.T, s *Service, id string, ok func(*Generation) bool) *Generation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		ch, release := s.Hub().Watch(id)
		g, err := s.Get(ctx, "alice", id)
		if err != nil {
			release()
			t.Fatal(err)
		}
		if ok(g) {
			release()
			return g
		}
		select {
		case <-ch:
			release()
		case <-ctx.Done():
			release()
			t.Fatalf("%s: condition not reached; last %s (%s)", id, g.Status, g.StatusMessage)
		}
	}
}
