package generation

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
)

// slowSubmit is the local provider whose Submit takes delay (of the
// bubble's time) before the job exists, as a slow provider call would.
type slowSubmit struct {
	provider.Provider
	delay   time.Duration
	submits atomic.Int32
	started chan struct{} // gets one value per Submit call
}

func (s *slowSubmit) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	s.submits.Add(1)
	select {
	case s.started <- struct{}{}:
	default:
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return provider.Job{}, ctx.Err()
	case <-t.C:
	}
	return s.Provider.Submit(ctx, req)
}

type leaseEnv struct {
	db   TestEngine
	svc  *Service
	prov *slowSubmit
	lp   *local.Provider
	logs *lineCounter
}

// newLeaseEnv must run inside the synctest bubble.
func newLeaseEnv(t *testing.T, delay time.Duration) *leaseEnv {
	dir := t.TempDir()
	d, err := OpenTestEngine(filepath.Join(dir, "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	lp, err := local.New(local.Options{Dir: dir, Scale: 0})
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := blob.NewLocal(filepath.Join(dir, "files"), bytes.Repeat([]byte{7}, 32), "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowSubmit{Provider: lp, delay: delay, started: make(chan struct{}, 1)}
	svc, err := NewService(Config{Store: d.Generations(), Blobs: blobs, Providers: []provider.Provider{p}})
	if err != nil {
		t.Fatal(err)
	}
	return &leaseEnv{db: d, svc: svc, prov: p, lp: lp, logs: &lineCounter{}}
}

func (e *leaseEnv) run(t *testing.T, lease time.Duration) *Runner {
	r := NewRunner(e.svc, RunnerConfig{Lease: lease, Logger: slog.New(e.logs)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// TestStepOutlastsLease: two runners share a database (as replicas do);
// a provider submit takes 60 leases. The stepping runner renews its lease
// all along, so the other, looking every minute and at every kick, never
// takes the generation over: one Submit, one provider job. Without
// renewal the other runner claims the expired lease, finds no job yet
// and submits a second one. Time is synctest's.
func TestStepOutlastsLease(t *testing.T) {
	const lease = 3 * time.Second
	synctest.Test(t, func(t *testing.T) {
		e := newLeaseEnv(t, 60*lease)
		// Both start (and release stale leases) before any work exists.
		e.run(t, lease)
		e.run(t, lease)
		synctest.Wait()
		g, _, err := e.svc.Create(context.Background(), "o", CreateRequest{ModelID: "local-sketch", Prompt: "slow to submit"})
		if err != nil {
			t.Fatal(err)
		}
		<-e.prov.started
		// Well past the claim's own lease, another claim finds nothing.
		time.Sleep(10 * lease)
		var stolen bool
		now := time.Now()
		if err := e.svc.store.Update(context.Background(), func(ctx context.Context, tx Tx) (err error) {
			_, stolen, err = tx.Claim(ctx, "thief", now.Add(lease), now)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if stolen {
			t.Fatalf("a step %s into a %s lease: another claim took the generation", 10*lease, lease)
		}
		end := waitGen(t, e.svc, g.ID)
		if end.Status != StatusCompleted || e.prov.submits.Load() != 1 || e.lp.JobCount() != 1 {
			t.Fatalf("%s %q; %d submits, %d provider jobs; want completed, 1 and 1", end.Status, end.StatusMessage, e.prov.submits.Load(), e.lp.JobCount())
		}
	})
}

// TestLostLeaseStopsStep: when a renewal finds the lease taken (another
// claim, here made by hand), the step is cancelled and writes nothing
// more: the row keeps the new holder's lease, and the abandoned submit
// records no job.
func TestLostLeaseStopsStep(t *testing.T) {
	const lease = 3 * time.Second
	synctest.Test(t, func(t *testing.T) {
		e := newLeaseEnv(t, time.Hour)
		e.run(t, lease)
		g, _, err := e.svc.Create(context.Background(), "o", CreateRequest{ModelID: "local-sketch", Prompt: "taken over"})
		if err != nil {
			t.Fatal(err)
		}
		<-e.prov.started
		// Another claim takes the row (as after an expiry elsewhere).
		if err := e.db.Exec(`UPDATE generations SET lease_owner = 'other', attempts = attempts + 1, lease_until = ? WHERE id = ?`,
			time.Now().Add(time.Hour).UnixMilli(), g.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease) // a renewal or two
		synctest.Wait()
		row, err := e.svc.store.Generation(context.Background(), g.ID)
		if err != nil {
			t.Fatal(err)
		}
		if row.LeaseOwner != "other" || row.SubmitState != "submitting" || row.ProviderJobID != "" || e.lp.JobCount() != 0 {
			t.Fatalf("after the lease was lost: lease %q, submit %q, job %q, %d provider jobs; want other's lease, submitting, no job",
				row.LeaseOwner, row.SubmitState, row.ProviderJobID, e.lp.JobCount())
		}
		if got := e.logs.snapshot(); len(got) == 0 || got[len(got)-1] != "WARN runner: lease lost while stepping; the step stops" {
			t.Fatalf("log %q", got)
		}
	})
}

// TestSubmitNeedsTheLease: a step whose claim was taken over before it
// marks the submit (here by hand, as another replica would after an
// expiry) does not call the provider: the submit decision renews the
// lease in its own transaction, and the row stays the new holder's.
func TestSubmitNeedsTheLease(t *testing.T) {
	e := newEnv(t)
	g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "taken before submit"})
	r := NewRunner(e.svc, RunnerConfig{})
	ctx := context.Background()
	var row Row
	var claimed bool
	now := time.Now()
	if err := e.svc.store.Update(ctx, func(ctx context.Context, tx Tx) (err error) {
		row, claimed, err = tx.Claim(ctx, r.id, now.Add(time.Minute), now)
		return err
	}); err != nil || !claimed || row.ID != g.ID {
		t.Fatalf("claim: %v %v %s", claimed, err, row.ID)
	}
	e.exec(`UPDATE generations SET lease_owner = 'other', attempts = attempts + 1 WHERE id = ?`, g.ID)
	r.step(ctx, row)
	got, err := e.svc.store.Generation(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := e.prov.submits.Load(); n != 0 || got.SubmitState != "" || got.LeaseOwner != "other" {
		t.Fatalf("%d submits, submit state %q, lease %q; want none, unsubmitted, other's", n, got.SubmitState, got.LeaseOwner)
	}
}
