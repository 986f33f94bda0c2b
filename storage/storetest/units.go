package storetest

// Units of work: a failing one leaves nothing, concurrent ones all land,
// LockOwner serializes an owner's decisions, and a generation and its
// task commit together.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

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
