package generation

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
)

// failingStore is the real engine's store whose writes fail on demand, as
// on a full disk.
type failingStore struct {
	Store
	down    atomic.Bool
	refused atomic.Int64 // writes refused while down
}

var errDiskFull = errors.New("sqlite: database or disk is full (SQLITE_FULL)")

func (f *failingStore) Update(ctx context.Context, fn func(context.Context, Tx) error) error {
	if f.down.Load() {
		f.refused.Add(1)
		return errDiskFull
	}
	return f.Store.Update(ctx, fn)
}

func (f *failingStore) UpdateOwner(ctx context.Context, _ string, fn func(context.Context, Tx) error) error {
	return f.Update(ctx, fn)
}

// lineCounter counts log records at Warn and above.
type lineCounter struct {
	mu    sync.Mutex
	lines []string
}

func (c *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *lineCounter) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *lineCounter) WithGroup(string) slog.Handler            { return c }
func (c *lineCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, r.Level.String()+" "+r.Message)
	return nil
}

func (c *lineCounter) count() int { return len(c.snapshot()) }

func (c *lineCounter) snapshot() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// TestRunnerBacksOffWhileWritesFail: while every database write fails,
// the runner's claims back off exponentially to a cap and it logs at a
// bounded rate instead of spinning; once writes succeed it resumes at
// once (a successful create wakes it), and by itself within the cap.
// Time is synctest's: a minute of outage takes no wall time.
func TestRunnerBacksOffWhileWritesFail(t *testing.T) {
	const outageFor = 60 * time.Second
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		d, err := OpenTestEngine(filepath.Join(dir, "g.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		lp, err := local.New(local.Options{Dir: dir, Scale: 0})
		if err != nil {
			t.Fatal(err)
		}
		blobs, err := blob.NewLocal(filepath.Join(dir, "files"), bytes.Repeat([]byte{7}, 32), "http://127.0.0.1:1")
		if err != nil {
			t.Fatal(err)
		}
		fs := &failingStore{Store: d.Generations()}
		svc, err := NewService(Config{Store: fs, Blobs: blobs, Providers: []provider.Provider{lp}})
		if err != nil {
			t.Fatal(err)
		}
		logs := &lineCounter{}
		r := NewRunner(svc, RunnerConfig{Logger: slog.New(logs)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		defer func() { cancel(); <-done }()
		ctx0 := context.Background()

		// Work is due, and the disk fills up.
		g, _, err := svc.Create(ctx0, "o", CreateRequest{ModelID: "local-sketch", Prompt: "before the outage"})
		if err != nil {
			t.Fatal(err)
		}
		waitGen(t, svc, g.ID)
		fs.down.Store(true)
		if _, _, err := svc.Create(ctx0, "o", CreateRequest{ModelID: "local-sketch", Prompt: "refused"}); !errors.Is(err, errDiskFull) {
			t.Fatalf("create during the outage: %v", err)
		}
		logsBefore := logs.count()
		fs.refused.Store(0)
		r.Kick() // as a write that made work due would
		time.Sleep(outageFor)
		synctest.Wait()
		claims, lines := fs.refused.Load(), logs.count()-logsBefore
		t.Logf("a %s write outage: %d claim attempts (%.2f/s), %d log lines (%.3f/s): %v",
			outageFor, claims, float64(claims)/outageFor.Seconds(), lines, float64(lines)/outageFor.Seconds(), head(logs.snapshot()[logsBefore:], 5))
		// 50 ms doubling to 5 s: 7 tries in the first 6.35 s, then one
		// each 5 s.
		if maxClaims := int64(7 + (outageFor-6350*time.Millisecond)/outageMaxWait + 1); claims > maxClaims || claims < 5 {
			t.Fatalf("%d claim attempts in %s of outage, want 5..%d (exponential backoff capped at %s)", claims, outageFor, maxClaims, outageMaxWait)
		}
		if lines > 2 {
			t.Fatalf("%d log lines in %s of outage, want at most 2", lines, outageFor)
		}

		// The disk heals; a create succeeds and wakes the runner at once,
		// although its backoff had seconds to go.
		time.Sleep(outageMaxWait - 2*time.Second) // mid-wait
		fs.down.Store(false)
		healed := time.Now()
		g2, _, err := svc.Create(ctx0, "o", CreateRequest{ModelID: "local-sketch", Prompt: "after the outage"})
		if err != nil {
			t.Fatal(err)
		}
		end := waitGen(t, svc, g2.ID)
		if end.Status != StatusCompleted || time.Since(healed) > 100*time.Millisecond {
			t.Fatalf("after the outage: %s %q, %s after writes succeeded again", end.Status, end.StatusMessage, time.Since(healed))
		}
		if all := logs.snapshot(); all[len(all)-1] != "INFO runner: database writes succeed again" {
			t.Errorf("log lines %q", all)
		}
	})
}

// TestRunnerResumesByItself: a runner started on a database that refuses
// writes waits it out (backing off, not exiting), and with nothing else
// writing finds healed writes within its cap.
func TestRunnerResumesByItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		d, err := OpenTestEngine(filepath.Join(dir, "g.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		lp, _ := local.New(local.Options{Dir: dir, Scale: 0})
		blobs, _ := blob.NewLocal(filepath.Join(dir, "files"), bytes.Repeat([]byte{7}, 32), "http://127.0.0.1:1")
		fs := &failingStore{Store: d.Generations()}
		svc, err := NewService(Config{Store: fs, Blobs: blobs, Providers: []provider.Provider{lp}})
		if err != nil {
			t.Fatal(err)
		}
		g, _, err := svc.Create(context.Background(), "o", CreateRequest{ModelID: "local-sketch", Prompt: "queued before"})
		if err != nil {
			t.Fatal(err)
		}
		fs.down.Store(true)
		logs := &lineCounter{}
		r := NewRunner(svc, RunnerConfig{Logger: slog.New(logs)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		defer func() { cancel(); <-done }()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("the runner gave up on a failing database: %v", err)
		default:
		}
		fs.down.Store(false)
		healed := time.Now()
		end := waitGen(t, svc, g.ID)
		if end.Status != StatusCompleted || time.Since(healed) > outageMaxWait {
			t.Fatalf("%s %q, %s after writes succeeded again", end.Status, end.StatusMessage, time.Since(healed))
		}
		t.Logf("resumed %s after writes healed; %d writes refused in a minute; log: %q", time.Since(healed), fs.refused.Load(), logs.snapshot())
	})
}

// waitGen waits (event-driven) for a generation to end.
func waitGen(t *testing.T, s *Service, id string) *Generation {
	t.Helper()
	g, timedOut, err := s.Wait(context.Background(), "o", id, 10*time.Minute)
	if err != nil || timedOut {
		t.Fatalf("wait %s: timedOut=%v err=%v", id, timedOut, err)
	}
	return g
}

func head(s []string, n int) []string { return s[:min(n, len(s))] }

// unaskable is slowSubmit for a provider that cannot be asked whether a
// job exists and whose resubmit may bill twice (fal's shape): a submit
// whose record is lost can only be named by its webhook.
type unaskable struct{ *slowSubmit }

func (u unaskable) Find(context.Context, string) (provider.Job, bool, error) {
	return provider.Job{}, false, provider.ErrUnsupported
}
func (u unaskable) ResubmitMayDuplicate() bool { return true }

// TestSubmitRecordedAfterOutage: the database goes down while the provider
// makes the job and stays down past the step's lease (a PostgreSQL
// restart). The runner keeps the job it was given and records it once
// writes succeed, so the generation completes within the outage's length
// on its one job; without that, the provider, which cannot be asked,
// leaves it waiting for a webhook that never comes until it fails. Two
// runners share the database, as replicas do. Time is synctest's.
func TestSubmitRecordedAfterOutage(t *testing.T) {
	const lease, outageFor = 3 * time.Second, 10 * time.Second
	synctest.Test(t, func(t *testing.T) {
		e := newLeaseEnv(t, lease/6) // done before the lease is lost
		fs := &failingStore{Store: e.db.Generations()}
		svc, err := NewService(Config{Store: fs, Blobs: e.svc.cfg.Blobs, Providers: []provider.Provider{unaskable{e.prov}}})
		if err != nil {
			t.Fatal(err)
		}
		e.svc = svc
		e.run(t, lease)
		e.run(t, lease)
		synctest.Wait()
		g, _, err := svc.Create(context.Background(), "o", CreateRequest{ModelID: "local-sketch", Prompt: "submitted in an outage"})
		if err != nil {
			t.Fatal(err)
		}
		<-e.prov.started
		fs.down.Store(true)
		start := time.Now()
		time.Sleep(outageFor)
		fs.down.Store(false)
		end := waitGen(t, svc, g.ID)
		took := time.Since(start)
		if end.Status != StatusCompleted || e.prov.submits.Load() != 1 || e.lp.JobCount() != 1 {
			t.Fatalf("%s %q; %d submits, %d provider jobs; want completed, 1 and 1", end.Status, end.StatusMessage, e.prov.submits.Load(), e.lp.JobCount())
		}
		if took > outageFor+outageMaxWait+lease {
			t.Fatalf("completed %s after the outage began (%s long): the record waited for more than the database", took, outageFor)
		}
		if fs.refused.Load() == 0 {
			t.Fatal("no write was refused: the outage missed the submit")
		}
	})
}
