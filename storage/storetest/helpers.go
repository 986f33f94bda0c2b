package storetest

// The suite's helpers: rows to insert, one-line units of work, reads that
// fail the test, the field-by-field row comparison, and the runner's and
// the tasks' small operations. Every topic's tests use them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/tasks"
)

func genRow(id, owner string, st generation.Status, created time.Time) generation.Row {
	return generation.Row{
		ID: id, Owner: owner, ModelID: "model-x", Provider: "prov", Kind: "image", Prompt: "prompt " + id,
		Params: `{"seed":7}`, ArgsHash: "hash-" + id, Credits: 5, Charged: 5, Status: st,
		StatusMessage: "inserted", CreatedAt: created, UpdatedAt: created,
	}
}

// store is a generation store or a task backend: what runs units of work.
type store[Tx any] interface {
	Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
}

// update runs fn as one unit of work on s and fails the test on its error.
func update[Tx any](t *testing.T, s store[Tx], fn func(ctx context.Context, tx Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// do runs fn as one unit of work on s and answers what fn returned.
func do[Tx, V any](t *testing.T, s store[Tx], fn func(ctx context.Context, tx Tx) (V, error)) V {
	t.Helper()
	var v V
	update(t, s, func(ctx context.Context, tx Tx) (err error) {
		v, err = fn(ctx, tx)
		return err
	})
	return v
}

func insert(t *testing.T, s generation.Store, rows ...generation.Row) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		for _, r := range rows {
			if err := tx.InsertGeneration(ctx, r); err != nil {
				return fmt.Errorf("insert %s: %w", r.ID, err)
			}
		}
		return nil
	})
}

func get(t *testing.T, s generation.Store, id string) generation.Row {
	t.Helper()
	r, err := s.Generation(t.Context(), id)
	if err != nil {
		t.Fatalf("Generation(%s): %v", id, err)
	}
	return r
}

func absent(t *testing.T, s generation.Store, id string) {
	t.Helper()
	if r, err := s.Generation(t.Context(), id); !errors.Is(err, generation.ErrNotFound) {
		t.Errorf("Generation(%s) = %+v, %v; want generation.ErrNotFound", id, r, err)
	}
}

func apply(t *testing.T, s generation.Store, c generation.Change) bool {
	t.Helper()
	return do(t, s, func(ctx context.Context, tx generation.Tx) (bool, error) { return tx.Apply(ctx, c) })
}

// change is a fully populated change for ev: every field an event may
// read is set, so any event's effects are visible.
func change(id string, ev generation.Event, to generation.Status, when time.Time) generation.Change {
	return generation.Change{
		ID: id, Event: ev, From: generation.Sources(ev), To: to, At: when,
		Message: "msg " + string(ev), Progress: 0.5, Params: `{"step":"` + string(ev) + `"}`,
		Outputs:   `[{"key":"out/` + id + `","mimeType":"image/png","bytes":3,"sha256":"abc"}]`,
		ErrorKind: generation.ErrorProvider, ErrorMessage: "refused: " + id,
		Job: `{"id":"job-` + id + `"}`, JobID: "job-" + id,
	}
}

// keepsStatus: every transition of ev leaves the status as it was
// (EventHold, EventSubmit, EventCancelAsk); Service passes no To for them.
func keepsStatus(ev generation.Event) bool {
	for _, tr := range generation.Lifecycle {
		if tr.On == ev && tr.From != tr.To {
			return false
		}
	}
	return true
}

// targetsToTry lists the To values to apply ev with: each target, and for
// an event that keeps the status also none (what Service passes).
func targetsToTry(ev generation.Event) []generation.Status {
	if keepsStatus(ev) {
		return append([]generation.Status{""}, generation.Targets(ev)...)
	}
	return generation.Targets(ev)
}

func without(ss []generation.Status, drop generation.Status) []generation.Status {
	return slices.DeleteFunc(slices.Clone(ss), func(s generation.Status) bool { return s == drop })
}

// jsonEqual compares two JSON documents by value (an engine may store
// JSON in a normalizing type); "" equals only "".
func jsonEqual(a, b string) bool {
	if a == b {
		return true
	}
	if a == "" || b == "" {
		return false
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

var (
	genJSON  = []string{"Params", "ProviderJob", "Outputs"}
	taskJSON = []string{"InputRequests", "AnsweredKeys", "InputResponses", "ClientCaps"}
)

// diff lists the fields of two rows of one struct type that differ: times
// by instant, JSON fields (jsonFields and json.RawMessage) by value, the
// rest exactly. Fields named in ignore are skipped.
func diff(want, got any, jsonFields []string, ignore ...string) []string {
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	var out []string
	for i := range wv.NumField() {
		name := wv.Type().Field(i).Name
		if slices.Contains(ignore, name) {
			continue
		}
		w, g := wv.Field(i).Interface(), gv.Field(i).Interface()
		var same bool
		switch wt := w.(type) {
		case time.Time:
			same = wt.Equal(g.(time.Time))
		case json.RawMessage:
			same = jsonEqual(string(wt), string(g.(json.RawMessage)))
			w, g = string(wt), string(g.(json.RawMessage))
		default:
			if slices.Contains(jsonFields, name) {
				same = jsonEqual(wv.Field(i).String(), gv.Field(i).String())
			} else {
				same = reflect.DeepEqual(w, g)
			}
		}
		if !same {
			out = append(out, fmt.Sprintf("%s = %#v, want %#v", name, g, w))
		}
	}
	return out
}

func ids(rows []generation.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func sorted(ss []string) []string { return slices.Sorted(slices.Values(ss)) }

// leaseFree: no runner holds the row (an engine may store "no lease" as
// a zero time or as the Unix epoch).
func leaseFree(r generation.Row) bool {
	return r.LeaseOwner == "" && (r.LeaseUntil.IsZero() || r.LeaseUntil.UnixMilli() <= 0)
}

// effects checks what a change that reported true must have done.
func effects(c generation.Change, before, after generation.Row, want generation.Status) []string {
	var bad []string
	chk := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	chk(after.Status == want, "status %q, want %q", after.Status, want)
	chk(after.UpdatedAt.Equal(c.At), "UpdatedAt %v, want the change's At %v", after.UpdatedAt, c.At)
	chk(len(diff(before, after, genJSON, "Status", "StatusMessage", "Progress", "SubmitState", "ProviderJob",
		"ProviderJobID", "Outputs", "ErrorKind", "ErrorMessage", "Params", "Charged", "CancelRequested",
		"UpdatedAt", "SubmittedAt", "NextCheckAt", "LeaseOwner", "LeaseUntil", "Version")) == 0,
		"identity fields changed: %v", diff(before, after, genJSON))
	chk(after.Version > before.Version, "Version %d, want above %d (every change bumps it)", after.Version, before.Version)
	msg := func() {
		chk(after.StatusMessage == c.Message, "StatusMessage %q, want %q", after.StatusMessage, c.Message)
	}
	keepsCharge := func() {
		chk(after.Charged == before.Charged, "Charged %d, want %d kept", after.Charged, before.Charged)
	}
	leavesQueue := func() { chk(after.NextCheckAt.IsZero(), "NextCheckAt %v, want none (terminal)", after.NextCheckAt) }
	switch c.Event {
	case generation.EventHold:
		msg()
		chk(jsonEqual(after.Params, c.Params), "Params %s, want %s", after.Params, c.Params)
	case generation.EventQueue:
		msg()
		chk(jsonEqual(after.Params, c.Params), "Params %s, want %s", after.Params, c.Params)
		chk(after.NextCheckAt.Equal(c.At), "NextCheckAt %v, want due at %v", after.NextCheckAt, c.At)
	case generation.EventSubmit:
		chk(after.SubmitState == "submitting", "SubmitState %q, want submitting", after.SubmitState)
		keepsCharge()
	case generation.EventSubmitted:
		msg()
		chk(after.SubmitState == "submitted", "SubmitState %q, want submitted", after.SubmitState)
		chk(jsonEqual(after.ProviderJob, c.Job), "ProviderJob %s, want %s", after.ProviderJob, c.Job)
		chk(after.ProviderJobID == c.JobID, "ProviderJobID %q, want %q", after.ProviderJobID, c.JobID)
		chk(after.SubmittedAt.Equal(c.At), "SubmittedAt %v, want %v", after.SubmittedAt, c.At)
		chk(after.Progress == c.Progress, "Progress %v, want %v", after.Progress, c.Progress)
	case generation.EventProgress:
		msg()
		chk(after.Progress == c.Progress, "Progress %v, want %v", after.Progress, c.Progress)
	case generation.EventComplete:
		msg()
		chk(jsonEqual(after.Outputs, c.Outputs), "Outputs %s, want %s", after.Outputs, c.Outputs)
		keepsCharge()
		leavesQueue()
	case generation.EventFail:
		msg()
		chk(after.ErrorKind == c.ErrorKind, "ErrorKind %q, want %q", after.ErrorKind, c.ErrorKind)
		chk(after.ErrorMessage == c.ErrorMessage, "ErrorMessage %q, want %q", after.ErrorMessage, c.ErrorMessage)
		leavesQueue()
	case generation.EventAbandon, generation.EventExpire:
		msg()
		chk(after.ErrorKind == c.ErrorKind, "ErrorKind %q, want %q", after.ErrorKind, c.ErrorKind)
		chk(after.ErrorMessage == c.ErrorMessage, "ErrorMessage %q, want %q", after.ErrorMessage, c.ErrorMessage)
		chk(after.Charged == 0, "Charged %d, want 0 (refunded)", after.Charged)
		leavesQueue()
	case generation.EventCancel, generation.EventCancelled:
		msg()
		chk(after.Charged == 0, "Charged %d, want 0 (refunded)", after.Charged)
		leavesQueue()
	case generation.EventCancelAsk:
		chk(after.CancelRequested == 1, "CancelRequested %d, want 1", after.CancelRequested)
		chk(after.NextCheckAt.Equal(c.At), "NextCheckAt %v, want due at %v", after.NextCheckAt, c.At)
		keepsCharge()
	}
	return bad
}

// insertApply inserts r and applies c in one unit of work; it returns the
// row as inserted and as committed afterwards.
func insertApply(t *testing.T, s generation.Store, r generation.Row, c generation.Change, prep ...generation.Change) (before, after generation.Row, ok bool) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		if err := tx.InsertGeneration(ctx, r); err != nil {
			return err
		}
		for _, p := range prep {
			if ok, err := tx.Apply(ctx, p); err != nil || !ok {
				return fmt.Errorf("prepare %s with %s: applied %v, %v", r.ID, p.Event, ok, err)
			}
		}
		var err error
		if before, err = tx.Generation(ctx, r.ID); err != nil {
			return err
		}
		ok, err = tx.Apply(ctx, c)
		return err
	})
	return before, get(t, s, r.ID), ok
}

// take takes one create token for owner at now in its own transaction.
func take(t *testing.T, s generation.Store, owner string, r generation.Rate, now time.Time) time.Duration {
	t.Helper()
	var wait time.Duration
	update(t, s, func(ctx context.Context, tx generation.Tx) (err error) {
		if err := tx.LockOwner(ctx, owner); err != nil {
			return err
		}
		wait, err = tx.TakeCreateToken(ctx, owner, r, now)
		return err
	})
	return wait
}

func claim(t *testing.T, s generation.Store, runner string, leaseUntil, now time.Time) (generation.Row, bool) {
	t.Helper()
	var r generation.Row
	var ok bool
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		var err error
		r, ok, err = tx.Claim(ctx, runner, leaseUntil, now)
		return err
	})
	return r, ok
}

// claimAll claims until none is left and returns the ids claimed.
func claimAll(t *testing.T, s generation.Store, runner string, leaseUntil, now time.Time) []string {
	t.Helper()
	var got []string
	for range 20 {
		r, ok := claim(t, s, runner, leaseUntil, now)
		if !ok {
			return sorted(got)
		}
		if slices.Contains(got, r.ID) {
			t.Fatalf("Claim returned %s twice in a row of claims", r.ID)
		}
		got = append(got, r.ID)
		stored := get(t, s, r.ID)
		if stored.LeaseOwner != runner || !stored.LeaseUntil.Equal(leaseUntil) {
			t.Errorf("claimed %s: lease %q until %v, want %q until %v", r.ID, stored.LeaseOwner, stored.LeaseUntil, runner, leaseUntil)
		}
		if d := diff(stored, r, genJSON); len(d) > 0 {
			t.Errorf("Claim's row for %s differs from the stored row: %v", r.ID, d)
		}
	}
	t.Fatal("Claim never reported none left")
	return nil
}

func nextDue(t *testing.T, s generation.Store) time.Time {
	t.Helper()
	d, err := s.NextDueAt(t.Context())
	if err != nil {
		t.Fatalf("NextDueAt: %v", err)
	}
	return d
}

func wantDue(t *testing.T, s generation.Store, want time.Time) {
	t.Helper()
	if got := nextDue(t, s); !got.Equal(want) || got.IsZero() != want.IsZero() {
		t.Errorf("NextDueAt = %v, want %v", got, want)
	}
}

func wantClaims(t *testing.T, s generation.Store, runner string, leaseUntil, now time.Time, want ...string) {
	t.Helper()
	if got := claimAll(t, s, runner, leaseUntil, now); !slices.Equal(got, sorted(want)) {
		t.Errorf("Claim(%s, lease %v, now %v) took %v, want %v", runner, leaseUntil, now, got, sorted(want))
	}
}

func renew(t *testing.T, s generation.Store, id, runner string, claim int64, until time.Time) bool {
	t.Helper()
	return do(t, s, func(ctx context.Context, tx generation.Tx) (bool, error) {
		return tx.RenewLease(ctx, id, runner, claim, until)
	})
}

func taskRow(id, ref string, st tasks.Status, created time.Time) tasks.Row {
	return tasks.Row{
		TaskID: id, Owner: "alice", Ref: ref, Status: st, StatusMessage: "started",
		CreatedAt: created, LastUpdatedAt: created, TTL: time.Minute, PollInterval: 2 * time.Second,
		ExpiresAt: created.Add(time.Minute), InputRequests: "{}", AnsweredKeys: "[]", InputResponses: "{}",
		ClientCaps: `{"elicitation":{}}`,
	}
}

func insertTasks(t *testing.T, b tasks.Backend, rows ...tasks.Row) {
	t.Helper()
	update(t, b, func(ctx context.Context, tx tasks.Tx) error {
		for _, r := range rows {
			if err := tx.InsertTask(ctx, r); err != nil {
				return fmt.Errorf("insert task %s: %w", r.TaskID, err)
			}
		}
		return nil
	})
}

func getTask(t *testing.T, b tasks.Backend, id string) tasks.Row {
	t.Helper()
	r, err := b.Task(t.Context(), id)
	if err != nil {
		t.Fatalf("Task(%s): %v", id, err)
	}
	return r
}

// taskOp runs one of tasks.Tx's compare-and-set methods.
func taskOp(t *testing.T, b tasks.Backend, op func(tasks.Tx) func(context.Context, tasks.Row) (bool, error), r tasks.Row) bool {
	t.Helper()
	return do(t, b, func(ctx context.Context, tx tasks.Tx) (bool, error) { return op(tx)(ctx, r) })
}

func setActive(tx tasks.Tx) func(context.Context, tasks.Row) (bool, error)  { return tx.SetTaskActive }
func setAnswers(tx tasks.Tx) func(context.Context, tasks.Row) (bool, error) { return tx.SetTaskAnswers }
func finish(tx tasks.Tx) func(context.Context, tasks.Row) (bool, error)     { return tx.FinishTask }
