package generation

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is an injected Config.Now that tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration) { c.ns.Add(int64(d)) }
func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func withClock(c *fakeClock) envOption { return func(cfg *Config) { cfg.Now = c.now } }
func withCreateRate(r Rate) envOption {
	return func(c *Config) { c.CreateRate = func(context.Context, string) *Rate { return &r } }
}
func isRateError(err error) (*RateError, bool) { var re *RateError; return re, errors.As(err, &re) }

// TestCreateRateDecidedInTransaction: 50 concurrent creates by one caller
// with burst 5 and a slow rate accept exactly 5; the others are refused
// with a retry hint and leave nothing behind.
func TestCreateRateDecidedInTransaction(t *testing.T) {
	e := newEnv(t, withCreateRate(Rate{PerSecond: 0.001, Burst: 5}))
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, _, errs[i] = e.svc.Create(context.Background(), "alice", CreateRequest{ModelID: "local-sketch", Prompt: "rate"})
		})
	}
	close(start)
	wg.Wait()
	accepted := 0
	for _, err := range errs {
		switch re, ok := isRateError(err); {
		case err == nil:
			accepted++
		case ok && re.RetryAfter > 0:
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if accepted != 5 || e.count("") != 5 {
		t.Fatalf("accepted %d, rows %d; want exactly 5", accepted, e.count(""))
	}
	// Another caller's bucket is its own.
	if _, _, err := e.svc.Create(context.Background(), "bob", CreateRequest{ModelID: "local-sketch", Prompt: "rate"}); err != nil {
		t.Fatalf("bob: %v", err)
	}
}

// TestCreateRateSparesRepeatsAndBadInput: an idempotent repeat, bad input
// and a budget refusal take no token; a refusal says when to come back,
// exactly (the injected clock moved by less is refused, by it admitted).
func TestCreateRateSparesRepeatsAndBadInput(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, withClock(clock), withCreateRate(Rate{PerSecond: 0.5, Burst: 2}), withBudget(3))
	ctx := context.Background()
	keyed := CreateRequest{ModelID: "local-sketch", Prompt: "keyed", IdempotencyKey: "k"}
	first := e.create("alice", keyed) // token 1 of 2
	bad := []struct {
		name string
		req  CreateRequest
	}{
		{"unknown model", CreateRequest{ModelID: "no-such-model", Prompt: "x"}},
		{"empty prompt", CreateRequest{ModelID: "local-sketch"}},
		{"image to a text-only model", CreateRequest{ModelID: "local-sketch", Prompt: "x", InputImage: &InputImage{Data: []byte("not an image")}}},
	}
	for range 3 {
		g, existing, err := e.svc.Create(ctx, "alice", keyed)
		if err != nil || !existing || g.ID != first.ID {
			t.Fatalf("repeat: %v existing=%v", err, existing)
		}
		for _, b := range bad {
			var ie *InputError
			if _, _, err := e.svc.Create(ctx, "alice", b.req); !errors.As(err, &ie) {
				t.Fatalf("%s: %v, want an input error", b.name, err)
			}
		}
	}
	e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "second"}) // token 2 of 2
	_, _, err := e.svc.Create(ctx, "alice", CreateRequest{ModelID: "local-sketch", Prompt: "third"})
	re, ok := isRateError(err)
	if !ok || re.RetryAfter != 2*time.Second {
		t.Fatalf("third create: %v, want a rate refusal with a 2s wait", err)
	}
	clock.add(re.RetryAfter - time.Millisecond)
	if _, _, err := e.svc.Create(ctx, "alice", CreateRequest{ModelID: "local-sketch", Prompt: "early"}); err == nil {
		t.Fatal("a create before the hinted wait was accepted")
	}
	clock.add(time.Millisecond)
	e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "on time"}) // the refilled token; 3 of 3 credits
	clock.add(2 * time.Second)                                                   // one token again
	// The budget refuses before the rate: no token goes.
	var ie *InputError
	if _, _, err := e.svc.Create(ctx, "alice", CreateRequest{ModelID: "local-sketch", Prompt: "over budget"}); !errors.As(err, &ie) {
		t.Fatalf("over budget: %v, want the budget refusal", err)
	}
	if n := e.count(""); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
	if err := e.db.Generations().Update(ctx, func(ctx context.Context, tx Tx) error {
		wait, err := tx.TakeCreateToken(ctx, "alice", Rate{PerSecond: 0.5, Burst: 2}, clock.now())
		if wait != 0 {
			t.Errorf("the token refilled before the budget refusal is gone (wait %v)", wait)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestPruneCreateBuckets: a caller's bucket is forgotten once it is full
// again, never before, and the caller then has a full burst, as a new
// caller would.
func TestPruneCreateBuckets(t *testing.T) {
	clock := newFakeClock()
	e := newEnv(t, withClock(clock), withCreateRate(Rate{PerSecond: 1, Burst: 2}))
	ctx := context.Background()
	e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "one"})
	e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "two"}) // empty: full in 2 s
	clock.add(2*time.Second - time.Millisecond)
	if n, err := e.svc.PruneCreateBuckets(ctx); err != nil || n != 0 {
		t.Fatalf("pruned %d (%v) before the bucket was full", n, err)
	}
	clock.add(time.Millisecond)
	if n, err := e.svc.PruneCreateBuckets(ctx); err != nil || n != 1 {
		t.Fatalf("pruned %d (%v) once full, want 1", n, err)
	}
	e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "three"})
	e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "four"})
	if _, _, err := e.svc.Create(ctx, "alice", CreateRequest{ModelID: "local-sketch", Prompt: "five"}); err == nil {
		t.Fatal("a third create within the burst after the prune was accepted")
	}
}
