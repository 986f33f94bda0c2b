package storetest

// Units of work and the owner's decisions: a failing unit leaves nothing,
// concurrent ones all land, LockOwner serializes an owner's decisions, a
// generation and its task commit together; credits spent, generations in
// flight, and the create bucket (refill, burst, prune, racing takes).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/tasks"
)

func testFailedUpdate(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	err := s.Update(ctx, func(ctx context.Context, tx generation.Tx) error {
		if err := tx.InsertGeneration(ctx, genRow("f1", "alice", generation.StatusQueued, at(0))); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Errorf("Update with a failing fn = %v, want fn's error", err)
	}
	absent(t, s, "f1")

	insert(t, s, genRow("f2", "alice", generation.StatusQueued, at(0)))
	before := get(t, s, "f2")
	err = s.Update(ctx, func(ctx context.Context, tx generation.Tx) error {
		ok, err := tx.Apply(ctx, change("f2", generation.EventFail, "", at(10)))
		if err != nil || !ok {
			return fmt.Errorf("apply fail: %v %v", ok, err)
		}
		if _, err := tx.InsertDelivery(ctx, generation.Delivery{Provider: "prov", DeliveryID: "d", GenerationID: "f2", Event: "{}", ReceivedAt: at(10)}); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Errorf("Update with a failing fn = %v, want fn's error", err)
	}
	if d := diff(before, get(t, s, "f2"), genJSON); len(d) > 0 {
		t.Errorf("a failed Update's change was kept: %v", d)
	}
	if last, err := s.LastPendingDelivery(ctx, "f2"); err != nil || last != 0 {
		t.Errorf("a failed Update's delivery was kept: LastPendingDelivery = %d, %v", last, err)
	}
	if ds, err := s.PendingDeliveries(ctx, "f2"); err != nil || len(ds) != 0 {
		t.Errorf("a failed Update's delivery was kept: PendingDeliveries = %+v, %v", ds, err)
	}

	err = e.Tasks.Update(ctx, func(ctx context.Context, tx tasks.Tx) error {
		if err := tx.InsertTask(ctx, taskRow("tf", "gen:f1", tasks.StatusWorking, at(0))); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Errorf("tasks Update with a failing fn = %v, want fn's error", err)
	}
	if r, err := e.Tasks.Task(ctx, "tf"); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("Task(tf) after a failed Update = %+v, %v; want tasks.ErrNotFound", r, err)
	}
}

// testConcurrentUpdates: concurrent units of work, half failing, each
// get their own outcome (an engine that batches must not lose or keep a
// neighbour's writes).
func testConcurrentUpdates(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	const n = 24
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Update(ctx, func(ctx context.Context, tx generation.Tx) error {
				if err := tx.InsertGeneration(ctx, genRow(fmt.Sprintf("c%02d", i), "alice", generation.StatusQueued, at(int64(i)))); err != nil {
					return err
				}
				if i%2 == 1 {
					return errBoom
				}
				return nil
			})
		})
	}
	wg.Wait()
	for i := range n {
		id := fmt.Sprintf("c%02d", i)
		if i%2 == 1 {
			if !errors.Is(errs[i], errBoom) {
				t.Errorf("Update %d = %v, want fn's error", i, errs[i])
			}
			absent(t, s, id)
			continue
		}
		if errs[i] != nil {
			t.Errorf("Update %d = %v", i, errs[i])
		}
		if _, err := s.Generation(ctx, id); err != nil {
			t.Errorf("Generation(%s) after a successful Update: %v", id, err)
		}
	}
}

// testLockOwner: decisions taken after LockOwner never interleave, so a
// budget checked in the transaction is never overspent.
func testLockOwner(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	const tries, limit = 20, 5
	errs := make([]error, tries)
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() {
			errs[i] = s.Update(ctx, func(ctx context.Context, tx generation.Tx) error {
				if err := tx.LockOwner(ctx, "alice"); err != nil {
					return err
				}
				spent, err := tx.SpentSince(ctx, "alice", at(0))
				if err != nil || spent >= limit {
					return err
				}
				r := genRow(fmt.Sprintf("l%02d", i), "alice", generation.StatusQueued, at(int64(i)))
				r.Charged = 1
				return tx.InsertGeneration(ctx, r)
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Update %d: %v", i, err)
		}
	}
	if spent, err := s.SpentSince(ctx, "alice", at(0)); err != nil || spent != limit {
		t.Errorf("SpentSince after %d racing budgeted inserts = %d, %v; want exactly %d", tries, spent, err, limit)
	}
}

var errNotTasksTx = errors.New("storetest: the generation tx is not a tasks.Tx")

func testOneUnitOfWork(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	both := func(id string, fail bool) (inTx tasks.Row, err error) {
		err = s.Update(ctx, func(ctx context.Context, tx generation.Tx) error {
			ttx, ok := tx.(tasks.Tx)
			if !ok {
				return errNotTasksTx
			}
			if err := tx.InsertGeneration(ctx, genRow(id, "alice", generation.StatusQueued, at(0))); err != nil {
				return err
			}
			if err := ttx.InsertTask(ctx, taskRow("task-"+id, "gen:"+id, tasks.StatusWorking, at(0))); err != nil {
				return err
			}
			ok, err := tx.Apply(ctx, change(id, generation.EventFail, "", at(5)))
			if err != nil || !ok {
				return fmt.Errorf("apply in the shared tx: %v, %v", ok, err)
			}
			if _, err := ttx.FinishTask(ctx, tasks.Row{TaskID: "task-" + id, Status: tasks.StatusFailed, Error: json.RawMessage(`{"code":1,"message":"f"}`), LastUpdatedAt: at(5)}); err != nil {
				return err
			}
			if inTx, err = ttx.TaskByRef(ctx, "gen:"+id); err != nil {
				return err
			}
			if fail {
				return errBoom
			}
			return nil
		})
		return inTx, err
	}
	inTx, err := both("u1", true)
	if errors.Is(err, errNotTasksTx) {
		t.Fatal(err)
	}
	if !errors.Is(err, errBoom) {
		t.Fatalf("failing shared Update = %v, want fn's error", err)
	}
	if inTx.TaskID != "task-u1" || inTx.Status != tasks.StatusFailed {
		t.Errorf("the task was not visible in its own tx: %+v", inTx)
	}
	absent(t, s, "u1")
	if r, err := e.Tasks.Task(ctx, "task-u1"); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("Task(task-u1) after a failed shared Update = %+v, %v; want tasks.ErrNotFound", r, err)
	}

	if _, err := both("u2", false); err != nil {
		t.Fatalf("shared Update: %v", err)
	}
	if g := get(t, s, "u2"); g.Status != generation.StatusFailed {
		t.Errorf("u2 status %s, want failed", g.Status)
	}
	if r := getTask(t, e.Tasks, "task-u2"); r.Status != tasks.StatusFailed || r.Ref != "gen:u2" {
		t.Errorf("task-u2: status %s, ref %q", r.Status, r.Ref)
	}
	if r, err := e.Tasks.TaskByRef(ctx, "gen:u2"); err != nil || r.TaskID != "task-u2" {
		t.Errorf("TaskByRef(gen:u2) = %q, %v", r.TaskID, err)
	}
}

func testSpentSince(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	row := func(id, owner string, st generation.Status, created, charged int64) generation.Row {
		r := genRow(id, owner, st, at(created))
		r.Charged = charged
		return r
	}
	insert(t, s,
		row("s1", "alice", generation.StatusReserved, 0, 3),
		row("s2", "alice", generation.StatusQueued, 100, 5),
		row("s3", "alice", generation.StatusCompleted, 200, 2),
		row("b1", "bob", generation.StatusQueued, 100, 7),
	)
	check := func(owner string, since, want int64) {
		t.Helper()
		got, err := s.SpentSince(ctx, owner, at(since))
		if err != nil || got != want {
			t.Errorf("SpentSince(%s, at(%d)) = %d, %v; want %d", owner, since, got, err, want)
		}
	}
	check("alice", 0, 10)
	check("alice", 100, 7) // since is inclusive
	check("alice", 101, 2)
	check("alice", 300, 0)
	check("bob", 0, 7)
	check("carol", 0, 0)
	if inTx := do(t, s, func(ctx context.Context, tx generation.Tx) (int64, error) { return tx.SpentSince(ctx, "alice", at(0)) }); inTx != 10 {
		t.Errorf("tx.SpentSince(alice, at(0)) = %d, want 10", inTx)
	}
	// SpentAndKey: the same sum, and the id of the owner's key only.
	keyed := row("s4", "alice", generation.StatusCompleted, 50, 0)
	keyed.IdempotencyKey = "k-spent"
	insert(t, s, keyed)
	for _, c := range []struct {
		owner, key, want string
		since, spent     int64
	}{
		{"alice", "k-spent", "s4", 0, 10},
		{"alice", "k-spent", "s4", 101, 2}, // the key is found whatever since says
		{"alice", "k-other", "", 0, 10},
		{"bob", "k-spent", "", 0, 7}, // another owner's key is no key of bob's
	} {
		var id string
		spent := do(t, s, func(ctx context.Context, tx generation.Tx) (int64, error) {
			n, earlier, err := tx.SpentAndKey(ctx, c.owner, c.key, at(c.since))
			id = earlier
			return n, err
		})
		if spent != c.spent || id != c.want {
			t.Errorf("SpentAndKey(%s, %s, at(%d)) = %d, %q; want %d, %q", c.owner, c.key, c.since, spent, id, c.spent, c.want)
		}
	}
	// A cancel before submission refunds.
	if !apply(t, s, change("s1", generation.EventCancel, "", at(500))) {
		t.Fatal("EventCancel on reserved s1: Apply = false")
	}
	check("alice", 0, 7)
	if !apply(t, s, change("s2", generation.EventCancel, "", at(500))) {
		t.Fatal("EventCancel on queued s2: Apply = false")
	}
	check("alice", 0, 2)
	for _, id := range []string{"s1", "s2"} {
		if r := get(t, s, id); r.Charged != 0 || r.Credits != 5 {
			t.Errorf("%s after cancel: Charged %d, Credits %d; want 0, 5", id, r.Charged, r.Credits)
		}
	}
}

func testCountInFlight(t *testing.T, e Engine) {
	s := e.Generations
	insert(t, s,
		genRow("i1", "alice", generation.StatusReserved, at(0)),
		genRow("i2", "alice", generation.StatusQueued, at(0)), // not handed over
		genRow("i3", "alice", generation.StatusQueued, at(0)),
		genRow("i4", "alice", generation.StatusQueued, at(0)),
		genRow("i5", "alice", generation.StatusQueued, at(0)),
		genRow("i6", "alice", generation.StatusQueued, at(0)),
		genRow("i7", "alice", generation.StatusQueued, at(0)),
		genRow("b1", "bob", generation.StatusQueued, at(0)),
	)
	steps := []generation.Change{
		change("i3", generation.EventSubmit, "", at(1)),
		change("i3", generation.EventSubmitted, generation.StatusQueued, at(2)),
		change("i4", generation.EventSubmit, "", at(1)),
		change("i4", generation.EventSubmitted, generation.StatusRunning, at(2)),
		// Submitting counts: a job may exist, and the in-flight cap is
		// checked and EventSubmit applied in one transaction.
		change("i5", generation.EventSubmit, "", at(1)),
		change("i6", generation.EventSubmit, "", at(1)),
		change("i6", generation.EventSubmitted, generation.StatusRunning, at(2)),
		change("i6", generation.EventComplete, "", at(3)),
		change("i7", generation.EventSubmit, "", at(1)),
		change("i7", generation.EventSubmitted, generation.StatusQueued, at(2)),
		change("i7", generation.EventCancelled, "", at(3)),
		change("b1", generation.EventSubmit, "", at(1)),
		change("b1", generation.EventSubmitted, generation.StatusRunning, at(2)),
	}
	for _, c := range steps {
		if !apply(t, s, c) {
			t.Fatalf("%s on %s: Apply = false", c.Event, c.ID)
		}
	}
	for owner, want := range map[string]int64{"alice": 3, "bob": 1, "carol": 0} {
		if n := do(t, s, func(ctx context.Context, tx generation.Tx) (int64, error) { return tx.CountInFlight(ctx, owner) }); n != want {
			t.Errorf("CountInFlight(%s) = %d, want %d", owner, n, want)
		}
	}
}

// testCreateBucket: a new bucket is full (burst), refills at the rate up
// to burst, a refusal says how long to wait and changes nothing, a clock
// going back refills nothing, and owners do not share buckets.
func testCreateBucket(t *testing.T, e Engine) {
	s := e.Generations
	r := generation.Rate{PerSecond: 2, Burst: 3} // a token every 500 ms
	steps := []struct {
		name  string
		owner string
		ms    int64
		want  time.Duration
	}{
		{"full 1", "alice", 0, 0},
		{"full 2", "alice", 0, 0},
		{"full 3", "alice", 0, 0},
		{"empty", "alice", 0, 500 * time.Millisecond},
		{"refused changed nothing", "alice", 100, 400 * time.Millisecond},
		{"another owner's bucket is its own", "bob", 100, 0},
		{"refilled one", "alice", 500, 0},
		{"half a token", "alice", 750, 250 * time.Millisecond},
		{"clock went back: no refill", "alice", 400, 500 * time.Millisecond},
		{"long idle: capped at burst 1", "alice", 60_000, 0},
		{"capped 2", "alice", 60_000, 0},
		{"capped 3", "alice", 60_000, 0},
		{"capped: no fourth", "alice", 60_000, 500 * time.Millisecond},
	}
	for _, st := range steps {
		if got := take(t, s, st.owner, r, at(st.ms)); got != st.want {
			t.Errorf("%s: TakeCreateToken(%s, at %d ms) wait = %v, want %v", st.name, st.owner, st.ms, got, st.want)
		}
	}
	// A lower burst takes effect at once: the stored tokens are capped.
	if got := take(t, s, "bob", generation.Rate{PerSecond: 2, Burst: 1}, at(120_000)); got != 0 {
		t.Errorf("burst 1 after idle: wait %v, want a token", got)
	}
	if got := take(t, s, "bob", generation.Rate{PerSecond: 2, Burst: 1}, at(120_000)); got != 500*time.Millisecond {
		t.Errorf("burst 1, second take: wait %v, want 500ms", got)
	}
	// A failed transaction keeps no token taken.
	err := s.Update(t.Context(), func(ctx context.Context, tx generation.Tx) error {
		if _, err := tx.TakeCreateToken(ctx, "carol", generation.Rate{PerSecond: 1, Burst: 1}, at(0)); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	if got := take(t, s, "carol", generation.Rate{PerSecond: 1, Burst: 1}, at(0)); got != 0 {
		t.Errorf("after a failed transaction the token is still taken (wait %v)", got)
	}
}

// testCreateBucketPrune: a bucket's row is deleted once it is full again
// (by its FullAt, whatever the rate), not a millisecond before; a deleted
// bucket answers as a full one; a bucket that never refills is kept; a
// refusal moves nothing.
func testCreateBucketPrune(t *testing.T, e Engine) {
	s := e.Generations
	prune := func(ms int64) int64 {
		t.Helper()
		var n int64
		update(t, s, func(ctx context.Context, tx generation.Tx) (err error) {
			n, err = tx.PruneCreateBuckets(ctx, at(ms))
			return err
		})
		return n
	}
	r := generation.Rate{PerSecond: 2, Burst: 3}        // a token every 500 ms
	take(t, s, "alice", r, at(0))                       // 2 left: full at 500
	take(t, s, "alice", r, at(0))                       // 1 left: full at 1000
	if got := take(t, s, "alice", r, at(0)); got != 0 { // 0 left: full at 1500
		t.Fatalf("third token refused (%v)", got)
	}
	if got := take(t, s, "alice", r, at(100)); got != 400*time.Millisecond { // refused: still full at 1500
		t.Fatalf("fourth take: wait %v, want 400ms", got)
	}
	never := generation.Rate{PerSecond: 0, Burst: 1}
	take(t, s, "bob", never, at(0))
	if n := prune(1499); n != 0 {
		t.Fatalf("pruned %d buckets at 1499 ms, want none (alice's is full at 1500)", n)
	}
	if n := prune(1500); n != 1 {
		t.Fatalf("pruned %d buckets at 1500 ms, want alice's", n)
	}
	if n := prune(1 << 50); n != 0 {
		t.Fatalf("pruned %d buckets far ahead, want none (bob's never refills)", n)
	}
	for i := range r.Burst {
		if got := take(t, s, "alice", r, at(1500)); got != 0 {
			t.Fatalf("take %d after the prune: wait %v, want a full bucket", i, got)
		}
	}
	if got := take(t, s, "alice", r, at(1500)); got != 500*time.Millisecond {
		t.Fatalf("take past the burst after the prune: wait %v, want 500ms", got)
	}
	if got := take(t, s, "bob", never, at(1<<50)); got == 0 {
		t.Fatal("bob's bucket, which never refills, gave a second token")
	}
}

// testCreateBucketRace: racing transactions after LockOwner take exactly
// burst tokens from a bucket that does not refill meanwhile.
func testCreateBucketRace(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	const tries, burst = 30, 5
	r := generation.Rate{PerSecond: 0.001, Burst: burst}
	waits := make([]time.Duration, tries)
	errs := make([]error, tries)
	var wg sync.WaitGroup
	start := make(chan struct{}) // all at once: the best chance to interleave
	for i := range tries {
		wg.Go(func() {
			<-start
			errs[i] = s.Update(ctx, func(ctx context.Context, tx generation.Tx) (err error) {
				if err := tx.LockOwner(ctx, "alice"); err != nil {
					return err
				}
				waits[i], err = tx.TakeCreateToken(ctx, "alice", r, at(0))
				return err
			})
		})
	}
	close(start)
	wg.Wait()
	taken := 0
	for i := range tries {
		if errs[i] != nil {
			t.Errorf("Update %d: %v", i, errs[i])
		}
		if waits[i] == 0 {
			taken++
		}
	}
	if taken != burst {
		t.Errorf("%d racing takes got %d tokens, want exactly %d", tries, taken, burst)
	}
}
