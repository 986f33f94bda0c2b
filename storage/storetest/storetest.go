// Package storetest is the contract every storage engine passes: one
// engine-agnostic suite over generation.Store / generation.Tx and
// tasks.Backend / tasks.Tx, used only through those interfaces. An engine
// runs it from its own tests:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Engine { ... })
//	}
//
// What it pins down: every status change is a compare-and-set on the
// lifecycle table's sources (generation.Lifecycle), terminal statuses
// never change, reads and idempotency keys, a failing unit of work leaves
// nothing, LockOwner serializes an owner's decisions, the runner's durable
// queue (claim, lease, reschedule, wake), webhook intake, output retention,
// the task state machine, and that a generation and its task commit
// together. Times are fixed (no sleeps, no wall clock).
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// Engine is one freshly opened, empty database: its generation store and
// its task backend (one database, so a generation Update's tx is also a
// tasks.Tx).
type Engine struct {
	Generations generation.Store
	Tasks       tasks.Backend
	// Shared marks an engine whose database several runners share (one
	// per replica): ReleaseLeases must then release nothing, since the
	// other runners' leases are live; an embedded engine's single runner
	// releases every lease a killed process left.
	Shared bool
	// Rows counts a table's rows (nil: the history test is skipped).
	Rows func(t *testing.T, table string) int64
}

// Run runs the contract. open returns a fresh, empty engine for each
// subtest and registers its cleanup with t.
func Run(t *testing.T, open func(t *testing.T) Engine) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, e Engine)
	}{
		{"LifecycleGuards", testLifecycleGuards},
		{"GuardIsFrom", testGuardIsFrom},
		{"TerminalNeverChanges", testTerminalNeverChanges},
		{"SubmitStateGuards", testSubmitStateGuards},
		{"ProgressNoop", testProgressNoop},
		{"ApplyUnknownID", testApplyUnknownID},
		{"InsertRead", testInsertRead},
		{"IdempotencyKey", testIdempotencyKey},
		{"GenerationByJob", testGenerationByJob},
		{"ListGenerations", testListGenerations},
		{"SpentSince", testSpentSince},
		{"FailedUpdateLeavesNothing", testFailedUpdate},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"LockOwnerSerializes", testLockOwner},
		{"CreateBucket", testCreateBucket},
		{"CreateBucketRace", testCreateBucketRace},
		{"CreateBucketPrune", testCreateBucketPrune},
		{"RunnerQueue", testRunnerQueue},
		{"LeaseRenewal", testLeaseRenewal},
		{"WakeOwnerQueued", testWakeOwnerQueued},
		{"CancelAndSubmitMarks", testCancelAndSubmitMarks},
		{"CountInFlight", testCountInFlight},
		{"WebhookDeliveries", testDeliveries},
		{"OutputsExpiry", testOutputsExpiry},
		{"HistoryPurge", testHistoryPurge},
		{"TaskInsertRead", testTaskInsertRead},
		{"OwnedTask", testOwnedTask},
		{"TaskTransitions", testTaskTransitions},
		{"TaskTerminalNeverChanges", testTaskTerminal},
		{"TaskExpiryAndPurge", testTaskExpiry},
		{"OneUnitOfWork", testOneUnitOfWork},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

// t0 is the suite's fixed epoch; at(ms) is t0 plus ms milliseconds.
var t0 = time.UnixMilli(1_700_000_000_000)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

var errBoom = errors.New("storetest: fn failed on purpose")

// --- helpers -------------------------------------------------------------

func genRow(id, owner string, st generation.Status, created time.Time) generation.Row {
	return generation.Row{
		ID: id, Owner: owner, ModelID: "model-x", Provider: "prov", Kind: "image", Prompt: "prompt " + id,
		Params: `{"seed":7}`, ArgsHash: "hash-" + id, Credits: 5, Charged: 5, Status: st,
		StatusMessage: "inserted", CreatedAt: created, UpdatedAt: created,
	}
}

func update(t *testing.T, s generation.Store, fn func(ctx context.Context, tx generation.Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
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
	var ok bool
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		var err error
		ok, err = tx.Apply(ctx, c)
		return err
	})
	return ok
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

func sorted(ss []string) []string {
	ss = slices.Clone(ss)
	sort.Strings(ss)
	return ss
}

// leaseFree: no runner holds the row (an engine may store "no lease" as
// a zero time or as the Unix epoch).
func leaseFree(r generation.Row) bool {
	return r.LeaseOwner == "" && (r.LeaseUntil.IsZero() || r.LeaseUntil.UnixMilli() <= 0)
}

// --- lifecycle -----------------------------------------------------------

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
		"UpdatedAt", "SubmittedAt", "NextCheckAt", "LeaseOwner", "LeaseUntil")) == 0,
		"identity fields changed: %v", diff(before, after, genJSON))
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
	case generation.EventAbandon:
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
func insertApply(t *testing.T, s generation.Store, r generation.Row, c generation.Change) (before, after generation.Row, ok bool) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		if err := tx.InsertGeneration(ctx, r); err != nil {
			return err
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

func testLifecycleGuards(t *testing.T, e Engine) {
	s := e.Generations
	n := 0
	for _, ev := range generation.Events() {
		t.Run(string(ev), func(t *testing.T) {
			sources := generation.Sources(ev)
			for _, st := range generation.Statuses {
				admitted := slices.Contains(sources, st)
				for _, to := range targetsToTry(ev) {
					if admitted && !keepsStatus(ev) && !generation.Allowed(st, to, ev) {
						continue // not a change Service asks for
					}
					n++
					id := fmt.Sprintf("guard-%03d", n)
					r := genRow(id, "alice", st, at(0))
					r.NextCheckAt = at(1) // due: terminal changes must take it off the queue
					c := change(id, ev, to, at(1000))
					before, after, ok := insertApply(t, s, r, c)
					if ok != admitted {
						t.Errorf("%s on %s (To %q): Apply = %v, want %v (sources %v)", ev, st, to, ok, admitted, sources)
						continue
					}
					if !ok {
						if d := diff(before, after, genJSON); len(d) > 0 {
							t.Errorf("%s on %s (To %q) refused but changed the row: %v", ev, st, to, d)
						}
						continue
					}
					want := to
					if keepsStatus(ev) {
						want = st
					}
					if bad := effects(c, before, after, want); len(bad) > 0 {
						t.Errorf("%s on %s (To %q): %v", ev, st, to, bad)
					}
				}
			}
		})
	}
}

// testGuardIsFrom proves the guard is c.From, not the engine's own copy
// of the table: a From that leaves out the row's status changes nothing.
func testGuardIsFrom(t *testing.T, e Engine) {
	s := e.Generations
	n := 0
	for _, ev := range generation.Events() {
		for _, st := range generation.Sources(ev) {
			to := generation.Status("")
			for _, cand := range generation.Targets(ev) {
				if generation.Allowed(st, cand, ev) {
					to = cand
					break
				}
			}
			if keepsStatus(ev) {
				to = ""
			}
			for _, from := range [][]generation.Status{without(generation.Sources(ev), st), nil} {
				n++
				id := fmt.Sprintf("from-%03d", n)
				c := change(id, ev, to, at(1000))
				c.From = from
				before, after, ok := insertApply(t, s, genRow(id, "alice", st, at(0)), c)
				if ok {
					t.Errorf("%s on %s with From %v: Apply = true, want false (status not in From)", ev, st, from)
				}
				if d := diff(before, after, genJSON); len(d) > 0 {
					t.Errorf("%s on %s with From %v changed the row: %v", ev, st, from, d)
				}
			}
		}
	}
}

func testTerminalNeverChanges(t *testing.T, e Engine) {
	s := e.Generations
	for _, st := range generation.Statuses {
		if !st.Terminal() {
			continue
		}
		id := "term-" + string(st)
		r := genRow(id, "alice", st, at(0))
		r.NextCheckAt = at(1)
		insert(t, s, r)
		before := get(t, s, id)
		for i, ev := range generation.Events() {
			for _, to := range targetsToTry(ev) {
				if apply(t, s, change(id, ev, to, at(int64(100+i)))) {
					t.Errorf("%s on terminal %s (To %q): Apply = true", ev, st, to)
				}
			}
		}
		if d := diff(before, get(t, s, id), genJSON); len(d) > 0 {
			t.Errorf("terminal %s changed: %v", st, d)
		}
	}
}

// testSubmitStateGuards: EventCancel and EventSubmit also require that
// nothing was handed to the provider (SubmitState "").
func testSubmitStateGuards(t *testing.T, e Engine) {
	s := e.Generations
	insert(t, s, genRow("sub", "alice", generation.StatusQueued, at(0)))
	refuses := func(state string) {
		t.Helper()
		before := get(t, s, "sub")
		if before.SubmitState != state {
			t.Fatalf("SubmitState = %q, want %q", before.SubmitState, state)
		}
		for _, ev := range []generation.Event{generation.EventCancel, generation.EventSubmit} {
			if apply(t, s, change("sub", ev, "", at(500))) {
				t.Errorf("%s on a queued row with SubmitState %q: Apply = true, want false", ev, state)
			}
		}
		if d := diff(before, get(t, s, "sub"), genJSON); len(d) > 0 {
			t.Errorf("refused changes on SubmitState %q changed the row: %v", state, d)
		}
	}
	if !apply(t, s, change("sub", generation.EventSubmit, "", at(100))) {
		t.Fatal("EventSubmit on a fresh queued row: Apply = false")
	}
	refuses("submitting")
	if !apply(t, s, change("sub", generation.EventSubmitted, generation.StatusQueued, at(200))) {
		t.Fatal("EventSubmitted on a submitting row: Apply = false")
	}
	refuses("submitted")
	// What Service does next when the cancel is too late for EventCancel.
	if !apply(t, s, change("sub", generation.EventCancelAsk, "", at(300))) {
		t.Error("EventCancelAsk on a submitted queued row: Apply = false")
	}
}

func testProgressNoop(t *testing.T, e Engine) {
	s := e.Generations
	insert(t, s, genRow("p", "alice", generation.StatusQueued, at(0)))
	prog := func(to generation.Status, msg string, p float64, when int64) bool {
		c := change("p", generation.EventProgress, to, at(when))
		c.Message, c.Progress = msg, p
		return apply(t, s, c)
	}
	steps := []struct {
		to   generation.Status
		msg  string
		p    float64
		want bool
	}{
		{generation.StatusQueued, "inserted", 0, false}, // as inserted
		{generation.StatusRunning, "rendering", 0.5, true},
		{generation.StatusRunning, "rendering", 0.5, false},
		{generation.StatusRunning, "rendering", 0.75, true},
		{generation.StatusRunning, "almost", 0.75, true},
		{generation.StatusQueued, "almost", 0.75, true},
		{generation.StatusQueued, "almost", 0.75, false},
	}
	for i, st := range steps {
		before := get(t, s, "p")
		if got := prog(st.to, st.msg, st.p, int64(100*(i+1))); got != st.want {
			t.Errorf("step %d: progress %s %q %v: Apply = %v, want %v", i, st.to, st.msg, st.p, got, st.want)
		}
		after := get(t, s, "p")
		if !st.want {
			if d := diff(before, after, genJSON); len(d) > 0 {
				t.Errorf("step %d: a no-op progress changed the row: %v", i, d)
			}
		} else if after.Status != st.to || after.StatusMessage != st.msg || after.Progress != st.p {
			t.Errorf("step %d: row is %s %q %v, want %s %q %v", i, after.Status, after.StatusMessage, after.Progress, st.to, st.msg, st.p)
		}
	}
}

func testApplyUnknownID(t *testing.T, e Engine) {
	for _, ev := range generation.Events() {
		for _, to := range targetsToTry(ev) {
			if apply(t, e.Generations, change("missing", ev, to, at(1))) {
				t.Errorf("%s (To %q) on an unknown id: Apply = true", ev, to)
			}
		}
	}
	absent(t, e.Generations, "missing")
}

// --- reads and keys -------------------------------------------------------

func testInsertRead(t *testing.T, e Engine) {
	s := e.Generations
	r := genRow("g1", "alice", generation.StatusQueued, at(0))
	r.IdempotencyKey, r.NextCheckAt, r.UpdatedAt = "k1", at(5), at(2)
	bare := genRow("g2", "alice", generation.StatusReserved, at(1)) // no key, not due
	var inTx, inTxByKey generation.Row
	var inTxMissing error
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		for _, row := range []generation.Row{r, bare} {
			if err := tx.InsertGeneration(ctx, row); err != nil {
				return err
			}
		}
		var err error
		if inTx, err = tx.Generation(ctx, "g1"); err != nil {
			return fmt.Errorf("read own write: %w", err)
		}
		if inTxByKey, err = tx.GenerationByKey(ctx, "alice", "k1"); err != nil {
			return fmt.Errorf("read own write by key: %w", err)
		}
		_, inTxMissing = tx.Generation(ctx, "nope")
		return nil
	})
	// As inserted, with the defaults of a new row.
	want := r
	want.Outputs = "[]"
	engineDefaults := []string{"SubmittedAt", "LeaseUntil", "ProviderJob"}
	got := get(t, s, "g1")
	if d := diff(want, got, genJSON, engineDefaults...); len(d) > 0 {
		t.Errorf("Generation(g1) differs from the inserted row: %v", d)
	}
	if !leaseFree(got) {
		t.Errorf("a new row is leased: %q until %v", got.LeaseOwner, got.LeaseUntil)
	}
	if d := diff(want, inTx, genJSON, engineDefaults...); len(d) > 0 {
		t.Errorf("tx.Generation(g1) differs from the inserted row: %v", d)
	}
	if inTxByKey.ID != "g1" {
		t.Errorf("tx.GenerationByKey(alice, k1) = %q, want g1", inTxByKey.ID)
	}
	if !errors.Is(inTxMissing, generation.ErrNotFound) {
		t.Errorf("tx.Generation(nope) = %v, want generation.ErrNotFound", inTxMissing)
	}
	g2 := get(t, s, "g2")
	if !g2.NextCheckAt.IsZero() || g2.IdempotencyKey != "" {
		t.Errorf("g2: NextCheckAt %v, IdempotencyKey %q; want zero, empty (NULL round trip)", g2.NextCheckAt, g2.IdempotencyKey)
	}

	ctx := t.Context()
	if o, err := s.OwnedGeneration(ctx, "alice", "g1"); err != nil || o.ID != "g1" {
		t.Errorf("OwnedGeneration(alice, g1) = %q, %v", o.ID, err)
	}
	for _, c := range []struct{ owner, id string }{{"bob", "g1"}, {"alice", "nope"}, {"", "g1"}} {
		if o, err := s.OwnedGeneration(ctx, c.owner, c.id); !errors.Is(err, generation.ErrNotFound) {
			t.Errorf("OwnedGeneration(%q, %q) = %q, %v; want generation.ErrNotFound", c.owner, c.id, o.ID, err)
		}
	}
	absent(t, s, "nope")

	// The id is the primary key.
	dup := genRow("g1", "bob", generation.StatusQueued, at(9))
	if err := s.Update(ctx, func(ctx context.Context, tx generation.Tx) error { return tx.InsertGeneration(ctx, dup) }); err == nil {
		t.Error("a second InsertGeneration with id g1 succeeded")
	}
	if o := get(t, s, "g1"); o.Owner != "alice" {
		t.Errorf("g1 owner = %q after a refused duplicate insert, want alice", o.Owner)
	}
}

func testIdempotencyKey(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	keyed := func(id, owner, key string) generation.Row {
		r := genRow(id, owner, generation.StatusQueued, at(0))
		r.IdempotencyKey = key
		return r
	}
	insert(t, s, keyed("a1", "alice", "k1"))

	var insertErr error
	err := s.Update(ctx, func(ctx context.Context, tx generation.Tx) error {
		insertErr = tx.InsertGeneration(ctx, keyed("a2", "alice", "k1"))
		if insertErr != nil {
			return fmt.Errorf("create: %w", insertErr)
		}
		return nil
	})
	if !errors.Is(insertErr, generation.ErrDuplicateKey) {
		t.Errorf("InsertGeneration with a reused (owner, key) = %v, want generation.ErrDuplicateKey", insertErr)
	}
	if !errors.Is(err, generation.ErrDuplicateKey) {
		t.Errorf("Update returning the duplicate error = %v, want it to wrap generation.ErrDuplicateKey", err)
	}
	absent(t, s, "a2")

	// Same key, other owner; and rows without a key never collide.
	insert(t, s, keyed("b1", "bob", "k1"), keyed("a3", "alice", ""), keyed("a4", "alice", ""), keyed("a5", "alice", "k2"))

	for _, c := range []struct{ owner, key, want string }{
		{"alice", "k1", "a1"}, {"bob", "k1", "b1"}, {"alice", "k2", "a5"},
		{"alice", "k3", ""}, {"carol", "k1", ""}, {"bob", "k2", ""},
	} {
		r, err := s.GenerationByKey(ctx, c.owner, c.key)
		if c.want == "" {
			if !errors.Is(err, generation.ErrNotFound) {
				t.Errorf("GenerationByKey(%s, %s) = %q, %v; want generation.ErrNotFound", c.owner, c.key, r.ID, err)
			}
			continue
		}
		if err != nil || r.ID != c.want || r.IdempotencyKey != c.key {
			t.Errorf("GenerationByKey(%s, %s) = %q (key %q), %v; want %s", c.owner, c.key, r.ID, r.IdempotencyKey, err, c.want)
		}
	}
	var inTx generation.Row
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		var err error
		inTx, err = tx.GenerationByKey(ctx, "bob", "k1")
		return err
	})
	if inTx.ID != "b1" {
		t.Errorf("tx.GenerationByKey(bob, k1) = %q, want b1", inTx.ID)
	}
}

func testGenerationByJob(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	other := genRow("o1", "bob", generation.StatusQueued, at(0))
	other.Provider = "other"
	insert(t, s, genRow("j1", "alice", generation.StatusQueued, at(0)), other, genRow("j2", "alice", generation.StatusQueued, at(0)))
	c := change("j1", generation.EventSubmitted, generation.StatusRunning, at(10))
	c.JobID, c.Job = "job-1", `{"id":"job-1","extra":[1,2]}`
	if !apply(t, s, c) {
		t.Fatal("EventSubmitted on j1: Apply = false")
	}
	c = change("o1", generation.EventSubmitted, generation.StatusQueued, at(11))
	c.JobID = "job-1" // same job id, other provider
	if !apply(t, s, c) {
		t.Fatal("EventSubmitted on o1: Apply = false")
	}

	r, err := s.GenerationByJob(ctx, "prov", "job-1")
	if err != nil || r.ID != "j1" {
		t.Fatalf("GenerationByJob(prov, job-1) = %q, %v; want j1", r.ID, err)
	}
	if r.Status != generation.StatusRunning || r.ProviderJobID != "job-1" || !jsonEqual(r.ProviderJob, `{"id":"job-1","extra":[1,2]}`) || r.SubmitState != "submitted" {
		t.Errorf("GenerationByJob row: status %s, job id %q, job %s, submit %q", r.Status, r.ProviderJobID, r.ProviderJob, r.SubmitState)
	}
	if r, err := s.GenerationByJob(ctx, "other", "job-1"); err != nil || r.ID != "o1" {
		t.Errorf("GenerationByJob(other, job-1) = %q, %v; want o1", r.ID, err)
	}
	for _, q := range [][2]string{{"prov", "job-2"}, {"nobody", "job-1"}} {
		if r, err := s.GenerationByJob(ctx, q[0], q[1]); !errors.Is(err, generation.ErrNotFound) {
			t.Errorf("GenerationByJob(%s, %s) = %q, %v; want generation.ErrNotFound", q[0], q[1], r.ID, err)
		}
	}
}

func testListGenerations(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	insert(t, s,
		genRow("a1", "alice", generation.StatusQueued, at(10)),
		genRow("a2", "alice", generation.StatusCompleted, at(20)),
		genRow("a3", "alice", generation.StatusQueued, at(30)),
		genRow("a4", "alice", generation.StatusQueued, at(30)), // same instant: id breaks the tie
		genRow("a5", "alice", generation.StatusFailed, at(40)),
		genRow("b1", "bob", generation.StatusQueued, at(50)),
	)
	pages := func(q generation.ListQuery) [][]string {
		t.Helper()
		var out [][]string
		for range 10 {
			rows, err := s.ListGenerations(ctx, q)
			if err != nil {
				t.Fatalf("ListGenerations(%+v): %v", q, err)
			}
			out = append(out, ids(rows))
			if len(rows) == 0 {
				return out
			}
			if len(rows) > q.Limit {
				t.Fatalf("ListGenerations(%+v) returned %d rows, over the limit", q, len(rows))
			}
			last := rows[len(rows)-1]
			q.BeforeCreated, q.BeforeID = last.CreatedAt.UnixMilli(), last.ID
		}
		t.Fatal("ListGenerations never ran out of pages")
		return nil
	}
	for _, c := range []struct {
		q    generation.ListQuery
		want [][]string
	}{
		{generation.ListQuery{Owner: "alice", Limit: 2}, [][]string{{"a5", "a4"}, {"a3", "a2"}, {"a1"}, {}}},
		{generation.ListQuery{Owner: "alice", Limit: 10}, [][]string{{"a5", "a4", "a3", "a2", "a1"}, {}}},
		{generation.ListQuery{Owner: "alice", Status: generation.StatusQueued, Limit: 2}, [][]string{{"a4", "a3"}, {"a1"}, {}}},
		{generation.ListQuery{Owner: "alice", Status: generation.StatusRunning, Limit: 2}, [][]string{{}}},
		{generation.ListQuery{Owner: "bob", Limit: 2}, [][]string{{"b1"}, {}}},
		{generation.ListQuery{Owner: "carol", Limit: 2}, [][]string{{}}},
		{generation.ListQuery{Owner: "alice", BeforeCreated: at(30).UnixMilli(), BeforeID: "a4", Limit: 10}, [][]string{{"a3", "a2", "a1"}, {}}},
	} {
		if got := pages(c.q); !reflect.DeepEqual(got, c.want) {
			t.Errorf("pages of %+v = %v, want %v", c.q, got, c.want)
		}
	}
	rows, err := s.ListGenerations(ctx, generation.ListQuery{Owner: "alice", Limit: 1})
	if err != nil || len(rows) != 1 {
		t.Fatalf("ListGenerations(limit 1) = %d rows, %v", len(rows), err)
	}
	if d := diff(get(t, s, "a5"), rows[0], genJSON); len(d) > 0 {
		t.Errorf("a listed row differs from Generation: %v", d)
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
	var inTx int64
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		var err error
		inTx, err = tx.SpentSince(ctx, "alice", at(0))
		return err
	})
	if inTx != 10 {
		t.Errorf("tx.SpentSince(alice, at(0)) = %d, want 10", inTx)
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

// --- units of work ---------------------------------------------------------

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

// --- the runner's queue -----------------------------------------------------

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

func txDo(t *testing.T, s generation.Store, fn func(ctx context.Context, tx generation.Tx) error) {
	t.Helper()
	update(t, s, fn)
}

func renew(t *testing.T, s generation.Store, id, runner string, claim int64, until time.Time) bool {
	t.Helper()
	var ok bool
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		var err error
		ok, err = tx.RenewLease(ctx, id, runner, claim, until)
		return err
	})
	return ok
}

// testLeaseRenewal: a step longer than its lease keeps it by renewing,
// and only the claim that holds the lease can renew it (a runner whose
// lease was taken over, by another runner or by itself, cannot).
func testLeaseRenewal(t *testing.T, e Engine) {
	s := e.Generations
	r := genRow("la", "alice", generation.StatusQueued, at(0))
	r.NextCheckAt = at(10)
	insert(t, s, r)
	if renew(t, s, "la", "r1", 0, at(900)) {
		t.Fatal("RenewLease on an unleased row = true")
	}
	c, ok := claim(t, s, "r1", at(500), at(100))
	if !ok || c.Attempts != 1 {
		t.Fatalf("claim: %v, attempts %d", ok, c.Attempts)
	}
	for _, bad := range []struct {
		runner string
		claim  int64
	}{{"r2", c.Attempts}, {"r1", c.Attempts + 1}, {"r1", c.Attempts - 1}, {"", c.Attempts}} {
		if renew(t, s, "la", bad.runner, bad.claim, at(5000)) {
			t.Errorf("RenewLease by %q with claim %d (lease is r1's claim %d) = true", bad.runner, bad.claim, c.Attempts)
		}
	}
	if renew(t, s, "nope", "r1", c.Attempts, at(5000)) {
		t.Error("RenewLease of an unknown id = true")
	}
	if !renew(t, s, "la", "r1", c.Attempts, at(900)) {
		t.Fatal("RenewLease by the holder = false")
	}
	if got := get(t, s, "la"); got.LeaseOwner != "r1" || !got.LeaseUntil.Equal(at(900)) || got.Attempts != c.Attempts {
		t.Fatalf("after renewal: lease %q until %v, attempts %d; want r1 until %v, %d", got.LeaseOwner, got.LeaseUntil, got.Attempts, at(900), c.Attempts)
	}
	// Past the first lease, within the renewed one: not due.
	wantClaims(t, s, "r2", at(1500), at(600))
	// The renewed lease expires unrenewed; r1 itself claims again: its
	// first claim's renewal no longer holds it.
	c2, ok := claim(t, s, "r1", at(2000), at(1000))
	if !ok || c2.Attempts != c.Attempts+1 {
		t.Fatalf("claim after expiry: %v, attempts %d", ok, c2.Attempts)
	}
	if renew(t, s, "la", "r1", c.Attempts, at(5000)) {
		t.Error("RenewLease with a claim that expired and was taken again = true")
	}
	if !renew(t, s, "la", "r1", c2.Attempts, at(2500)) {
		t.Error("RenewLease by the second claim = false")
	}
	txDo(t, s, func(ctx context.Context, tx generation.Tx) error {
		return tx.Reschedule(ctx, "la", "r1", at(3000), at(1100), false)
	})
	if renew(t, s, "la", "r1", c2.Attempts, at(5000)) {
		t.Error("RenewLease after Reschedule released the lease = true")
	}
	if got := get(t, s, "la"); !leaseFree(got) {
		t.Errorf("a refused renewal changed the lease: %q until %v", got.LeaseOwner, got.LeaseUntil)
	}
}

func testRunnerQueue(t *testing.T, e Engine) {
	s := e.Generations
	wantDue(t, s, time.Time{})
	if _, ok := claim(t, s, "r1", at(500), at(100)); ok {
		t.Fatal("Claim on an empty store reported a row")
	}
	due := func(id string, st generation.Status, next int64) generation.Row {
		r := genRow(id, "alice", st, at(0))
		if next >= 0 {
			r.NextCheckAt = at(next)
		}
		return r
	}
	insert(t, s,
		due("qa", generation.StatusQueued, 10),
		due("qb", generation.StatusQueued, 20),
		due("qc", generation.StatusQueued, 1000),
		due("qd", generation.StatusReserved, -1), // nothing for the runner
	)
	wantDue(t, s, at(10))

	wantClaims(t, s, "r1", at(500), at(100), "qa", "qb")
	for _, id := range []string{"qa", "qb"} {
		if r := get(t, s, id); r.Attempts != 1 {
			t.Errorf("%s Attempts = %d after one claim, want 1", id, r.Attempts)
		}
	}
	// Leased rows are not due on an embedded engine (its one runner
	// reschedules them); on a shared one they are due when the lease
	// expires, for another replica to take over a killed one's work.
	leased := func(embedded, shared time.Time) time.Time {
		if e.Shared {
			return shared
		}
		return embedded
	}
	wantDue(t, s, leased(at(1000), at(501)))
	wantClaims(t, s, "r2", at(900), at(499))

	// Reschedule only by the lease owner; it frees the row.
	txDo(t, s, func(ctx context.Context, tx generation.Tx) error {
		return tx.Reschedule(ctx, "qa", "r2", at(2000), at(450), false)
	})
	if r := get(t, s, "qa"); r.LeaseOwner != "r1" || !r.NextCheckAt.Equal(at(10)) {
		t.Errorf("Reschedule by a runner without the lease changed qa: lease %q, next %v", r.LeaseOwner, r.NextCheckAt)
	}
	txDo(t, s, func(ctx context.Context, tx generation.Tx) error {
		return tx.Reschedule(ctx, "qa", "r1", at(2000), at(450), false)
	})
	if r := get(t, s, "qa"); !leaseFree(r) || !r.NextCheckAt.Equal(at(2000)) {
		t.Errorf("qa after Reschedule: lease %q until %v, next %v; want free, next %v", r.LeaseOwner, r.LeaseUntil, r.NextCheckAt, at(2000))
	}
	wantDue(t, s, leased(at(1000), at(501)))

	// An expired lease makes the row due again.
	wantClaims(t, s, "r2", at(1500), at(600), "qb")
	if r := get(t, s, "qb"); r.Attempts != 2 {
		t.Errorf("qb Attempts = %d after two claims, want 2", r.Attempts)
	}

	// WakeNow makes a row due at once; due means NextCheckAt <= now.
	txDo(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.WakeNow(ctx, "qc", at(700)) })
	if r := get(t, s, "qc"); !r.NextCheckAt.Equal(at(700)) {
		t.Errorf("qc NextCheckAt after WakeNow = %v, want %v", r.NextCheckAt, at(700))
	}
	wantDue(t, s, at(700))
	wantClaims(t, s, "r2", at(1500), at(700), "qc")
	wantDue(t, s, leased(at(2000), at(1501)))

	// ReleaseRunnerLeases frees only that runner's leases.
	txDo(t, s, func(ctx context.Context, tx generation.Tx) error {
		return tx.ReleaseRunnerLeases(ctx, "no such runner")
	})
	for _, id := range []string{"qb", "qc"} {
		if r := get(t, s, id); leaseFree(r) {
			t.Errorf("%s: another runner's ReleaseRunnerLeases freed its lease", id)
		}
	}

	// ReleaseLeases frees every lease before it expires on an embedded
	// engine, and none on a shared one.
	txDo(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.ReleaseLeases(ctx) })
	for _, id := range []string{"qb", "qc"} {
		if r := get(t, s, id); leaseFree(r) == e.Shared {
			t.Errorf("%s after ReleaseLeases (shared %v): lease %q until %v", id, e.Shared, r.LeaseOwner, r.LeaseUntil)
		}
	}
	if e.Shared {
		wantClaims(t, s, "r3", at(3000), at(1600), "qb", "qc") // after the leases expire
	} else {
		wantClaims(t, s, "r3", at(3000), at(800), "qb", "qc")
	}

	// A cancel asked while the step ran (cancelSeen false) is looked at
	// now; one the step already saw keeps the planned time.
	if !apply(t, s, change("qb", generation.EventCancelAsk, "", at(850))) {
		t.Fatal("EventCancelAsk on leased qb: Apply = false")
	}
	txDo(t, s, func(ctx context.Context, tx generation.Tx) error {
		return tx.Reschedule(ctx, "qb", "r3", at(5000), at(900), false)
	})
	if r := get(t, s, "qb"); !leaseFree(r) || !r.NextCheckAt.Equal(at(900)) {
		t.Errorf("qb rescheduled with an unseen cancel: lease %q, next %v; want free, next %v", r.LeaseOwner, r.NextCheckAt, at(900))
	}
	wantClaims(t, s, "r3", at(3000), at(950), "qb")
	txDo(t, s, func(ctx context.Context, tx generation.Tx) error {
		return tx.Reschedule(ctx, "qb", "r3", at(5000), at(960), true)
	})
	if r := get(t, s, "qb"); !r.NextCheckAt.Equal(at(5000)) {
		t.Errorf("qb rescheduled with a seen cancel: next %v, want %v", r.NextCheckAt, at(5000))
	}

	// A terminal change takes a row off the queue for good.
	if !apply(t, s, change("qc", generation.EventComplete, "", at(970))) {
		t.Fatal("EventComplete on qc: Apply = false")
	}
	wantDue(t, s, at(2000))
	wantClaims(t, s, "r4", at(1_000_000), at(100_000), "qa", "qb")
	if r := get(t, s, "qd"); r.Attempts != 0 || !leaseFree(r) {
		t.Errorf("qd (not due) was claimed: attempts %d, lease %q", r.Attempts, r.LeaseOwner)
	}
}

func testWakeOwnerQueued(t *testing.T, e Engine) {
	s := e.Generations
	row := func(id, owner string, next int64) generation.Row {
		r := genRow(id, owner, generation.StatusQueued, at(0))
		r.NextCheckAt = at(next)
		return r
	}
	insert(t, s, row("w1", "alice", 5000), row("w2", "alice", 5000), row("w3", "bob", 5000), row("w4", "alice", 50))
	if !apply(t, s, change("w2", generation.EventSubmit, "", at(1))) {
		t.Fatal("EventSubmit on w2: Apply = false")
	}
	txDo(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.WakeOwnerQueued(ctx, "alice", at(100)) })
	for id, want := range map[string]int64{"w1": 100, "w2": 5000, "w3": 5000, "w4": 50} {
		if r := get(t, s, id); !r.NextCheckAt.Equal(at(want)) {
			t.Errorf("%s NextCheckAt after WakeOwnerQueued(alice, at(100)) = %v, want %v", id, r.NextCheckAt, at(want))
		}
	}
}

func testCancelAndSubmitMarks(t *testing.T, e Engine) {
	s := e.Generations
	insert(t, s, genRow("m1", "alice", generation.StatusRunning, at(0)), genRow("m2", "alice", generation.StatusQueued, at(0)))
	sent := func() {
		txDo(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.MarkCancelSent(ctx, "m1") })
	}
	sent()
	if r := get(t, s, "m1"); r.CancelRequested != 0 {
		t.Errorf("MarkCancelSent without a cancel asked: CancelRequested = %d, want 0", r.CancelRequested)
	}
	if !apply(t, s, change("m1", generation.EventCancelAsk, "", at(10))) {
		t.Fatal("EventCancelAsk on running m1: Apply = false")
	}
	if apply(t, s, change("m1", generation.EventCancelAsk, "", at(11))) {
		t.Error("a second EventCancelAsk: Apply = true, want false (already asked)")
	}
	sent()
	if r := get(t, s, "m1"); r.CancelRequested != 2 {
		t.Errorf("MarkCancelSent after a cancel asked: CancelRequested = %d, want 2", r.CancelRequested)
	}
	sent()
	if r := get(t, s, "m1"); r.CancelRequested != 2 {
		t.Errorf("MarkCancelSent twice: CancelRequested = %d, want 2", r.CancelRequested)
	}

	reset := func() {
		txDo(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.ResetSubmitting(ctx, "m2") })
	}
	if !apply(t, s, change("m2", generation.EventSubmit, "", at(20))) {
		t.Fatal("EventSubmit on m2: Apply = false")
	}
	reset()
	if r := get(t, s, "m2"); r.SubmitState != "" || r.Status != generation.StatusQueued {
		t.Errorf("ResetSubmitting: SubmitState %q, status %s; want \"\", queued", r.SubmitState, r.Status)
	}
	if !apply(t, s, change("m2", generation.EventSubmit, "", at(30))) {
		t.Fatal("EventSubmit after ResetSubmitting: Apply = false")
	}
	if !apply(t, s, change("m2", generation.EventSubmitted, generation.StatusQueued, at(40))) {
		t.Fatal("EventSubmitted on m2: Apply = false")
	}
	reset()
	if r := get(t, s, "m2"); r.SubmitState != "submitted" {
		t.Errorf("ResetSubmitting on a submitted row: SubmitState = %q, want submitted", r.SubmitState)
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
		var n int64
		txDo(t, s, func(ctx context.Context, tx generation.Tx) error {
			var err error
			n, err = tx.CountInFlight(ctx, owner)
			return err
		})
		if n != want {
			t.Errorf("CountInFlight(%s) = %d, want %d", owner, n, want)
		}
	}
}

// --- webhooks and retention --------------------------------------------------

func testDeliveries(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	insert(t, s, genRow("g", "alice", generation.StatusRunning, at(0)), genRow("h", "alice", generation.StatusRunning, at(0)))
	ins := func(d generation.Delivery) bool {
		t.Helper()
		var fresh bool
		txDo(t, s, func(ctx context.Context, tx generation.Tx) error {
			var err error
			fresh, err = tx.InsertDelivery(ctx, d)
			return err
		})
		return fresh
	}
	d := func(prov, id, gen, ev string, when int64) generation.Delivery {
		return generation.Delivery{Provider: prov, DeliveryID: id, GenerationID: gen, Event: ev, ReceivedAt: at(when)}
	}
	for _, c := range []struct {
		d    generation.Delivery
		want bool
	}{
		{d("prov", "x", "g", `{"n":1}`, 10), true},
		{d("prov", "x", "g", `{"n":1}`, 11), false}, // a repeat
		{d("prov", "x", "h", `{"n":9}`, 12), false}, // the key is (provider, delivery id)
		{d("other", "x", "h", `{"n":2}`, 13), true},
		{d("prov", "y", "g", `{"n":3}`, 14), true},
		{d("prov", "z", "g", `{"n":4}`, 15), true},
	} {
		if got := ins(c.d); got != c.want {
			t.Errorf("InsertDelivery(%s, %s) = %v, want %v", c.d.Provider, c.d.DeliveryID, got, c.want)
		}
	}
	pending := func(gen string, want ...string) []generation.Delivery {
		t.Helper()
		ds, err := s.PendingDeliveries(ctx, gen)
		if err != nil {
			t.Fatalf("PendingDeliveries(%s): %v", gen, err)
		}
		var evs []string
		for i, dl := range ds {
			evs = append(evs, dl.Event)
			if dl.GenerationID != gen {
				t.Errorf("PendingDeliveries(%s)[%d].GenerationID = %q", gen, i, dl.GenerationID)
			}
			if i > 0 && dl.Seq <= ds[i-1].Seq {
				t.Errorf("PendingDeliveries(%s): seq %d after %d, want increasing", gen, dl.Seq, ds[i-1].Seq)
			}
		}
		ok := len(evs) == len(want)
		for i := range min(len(evs), len(want)) {
			ok = ok && jsonEqual(evs[i], want[i])
		}
		if !ok {
			t.Errorf("PendingDeliveries(%s) events = %v, want %v (arrival order)", gen, evs, want)
		}
		var newest int64 // the Seq of the newest pending delivery, 0: none
		if len(ds) > 0 {
			newest = ds[len(ds)-1].Seq
		}
		last, err := s.LastPendingDelivery(ctx, gen)
		if err != nil || last != newest || (last == 0) != (len(want) == 0) {
			t.Errorf("LastPendingDelivery(%s) = %d, %v; want %d (pending %v)", gen, last, err, newest, want)
		}
		// The same, read inside a write transaction.
		var inTx int64
		if err := s.Update(ctx, func(ctx context.Context, tx generation.Tx) error {
			var err error
			inTx, err = tx.LastPendingDelivery(ctx, gen)
			return err
		}); err != nil || inTx != newest {
			t.Errorf("Tx.LastPendingDelivery(%s) = %d, %v; want %d", gen, inTx, err, newest)
		}
		return ds
	}
	ds := pending("g", `{"n":1}`, `{"n":3}`, `{"n":4}`)
	pending("h", `{"n":2}`)
	pending("none")
	if len(ds) != 3 {
		t.FailNow()
	}
	consume := func(gen string, upto int64) {
		txDo(t, s, func(ctx context.Context, tx generation.Tx) error {
			return tx.ConsumeDeliveries(ctx, gen, upto, at(100))
		})
	}
	consume("g", ds[1].Seq)
	pending("g", `{"n":4}`)
	pending("h", `{"n":2}`)
	if !ins(d("prov", "w", "g", `{"n":5}`, 16)) {
		t.Error("InsertDelivery(prov, w) = false")
	}
	pending("g", `{"n":4}`, `{"n":5}`)
	consume("g", ds[2].Seq)
	pending("g", `{"n":5}`)
	consume("g", 1<<62)
	pending("g")
	pending("h", `{"n":2}`)
	if ins(d("prov", "y", "g", `{"n":3}`, 17)) {
		t.Error("InsertDelivery of a consumed delivery id = true, want false (still a repeat)")
	}
	pending("g")
}

func testOutputsExpiry(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	insert(t, s,
		genRow("e1", "alice", generation.StatusQueued, at(0)),
		genRow("e2", "alice", generation.StatusRunning, at(0)),
		genRow("e3", "alice", generation.StatusQueued, at(0)),
		genRow("e4", "alice", generation.StatusQueued, at(0)),
		genRow("e5", "alice", generation.StatusQueued, at(0)),
	)
	outputs := map[string]string{}
	for id, when := range map[string]int64{"e1": 100, "e2": 200, "e4": 300} {
		c := change(id, generation.EventComplete, "", at(when))
		outputs[id] = c.Outputs
		if !apply(t, s, c) {
			t.Fatalf("EventComplete on %s: Apply = false", id)
		}
	}
	if !apply(t, s, change("e5", generation.EventFail, "", at(50))) {
		t.Fatal("EventFail on e5: Apply = false")
	}
	expiring := func(before int64, limit int, want ...string) {
		t.Helper()
		rows, err := s.OutputsToExpire(ctx, at(before), limit)
		if err != nil {
			t.Fatalf("OutputsToExpire: %v", err)
		}
		if got := sorted(ids(rows)); !slices.Equal(got, sorted(want)) {
			t.Errorf("OutputsToExpire(at(%d), %d) = %v, want %v", before, limit, got, sorted(want))
		}
		for _, r := range rows {
			if !jsonEqual(r.Outputs, outputs[r.ID]) {
				t.Errorf("OutputsToExpire row %s: Outputs %s, want %s", r.ID, r.Outputs, outputs[r.ID])
			}
		}
	}
	expiring(201, 10, "e1", "e2")
	expiring(100, 10) // older than before: strictly
	if rows, err := s.OutputsToExpire(ctx, at(201), 1); err != nil || len(rows) != 1 || (rows[0].ID != "e1" && rows[0].ID != "e2") {
		t.Errorf("OutputsToExpire(at(201), 1) = %v, %v; want one of e1, e2", ids(rows), err)
	}
	mark := func(id string) bool {
		var ok bool
		txDo(t, s, func(ctx context.Context, tx generation.Tx) error {
			var err error
			ok, err = tx.MarkOutputsExpired(ctx, id)
			return err
		})
		return ok
	}
	for _, c := range []struct {
		id   string
		want bool
	}{{"e1", true}, {"e1", false}, {"e3", false}, {"e5", false}, {"missing", false}} {
		if got := mark(c.id); got != c.want {
			t.Errorf("MarkOutputsExpired(%s) = %v, want %v", c.id, got, c.want)
		}
	}
	if r := get(t, s, "e1"); !r.OutputsExpired || !jsonEqual(r.Outputs, outputs["e1"]) || r.Status != generation.StatusCompleted {
		t.Errorf("e1 after MarkOutputsExpired: expired %v, outputs %s, status %s", r.OutputsExpired, r.Outputs, r.Status)
	}
	if r := get(t, s, "e2"); r.OutputsExpired {
		t.Error("e2 marked expired")
	}
	expiring(201, 10, "e2")
	expiring(301, 10, "e2", "e4")
}

// --- tasks -------------------------------------------------------------------

func taskRow(id, ref string, st tasks.Status, created time.Time) tasks.Row {
	return tasks.Row{
		TaskID: id, Owner: "alice", Ref: ref, Status: st, StatusMessage: "started",
		CreatedAt: created, LastUpdatedAt: created, TTL: time.Minute, PollInterval: 2 * time.Second,
		ExpiresAt: created.Add(time.Minute), InputRequests: "{}", AnsweredKeys: "[]", InputResponses: "{}",
		ClientCaps: `{"elicitation":{}}`,
	}
}

func taskUpdate(t *testing.T, b tasks.Backend, fn func(ctx context.Context, tx tasks.Tx) error) {
	t.Helper()
	if err := b.Update(t.Context(), fn); err != nil {
		t.Fatalf("tasks Update: %v", err)
	}
}

func insertTasks(t *testing.T, b tasks.Backend, rows ...tasks.Row) {
	t.Helper()
	taskUpdate(t, b, func(ctx context.Context, tx tasks.Tx) error {
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
	var ok bool
	taskUpdate(t, b, func(ctx context.Context, tx tasks.Tx) error {
		var err error
		ok, err = op(tx)(ctx, r)
		return err
	})
	return ok
}

func setActive(tx tasks.Tx) func(context.Context, tasks.Row) (bool, error)  { return tx.SetTaskActive }
func setAnswers(tx tasks.Tx) func(context.Context, tasks.Row) (bool, error) { return tx.SetTaskAnswers }
func finish(tx tasks.Tx) func(context.Context, tasks.Row) (bool, error)     { return tx.FinishTask }

func testTaskInsertRead(t *testing.T, e Engine) {
	b, ctx := e.Tasks, t.Context()
	full := taskRow("t1", "gen:1", tasks.StatusWorking, at(0))
	full.InputRequests, full.KeySeq = `{"q_1":{"message":"which?"}}`, 1
	withResult := taskRow("t2", "gen:2", tasks.StatusCompleted, at(1))
	withResult.Result = json.RawMessage(`{"content":[{"type":"text","text":"done"}],"isError":false}`)
	withError := taskRow("t3", "gen:3", tasks.StatusFailed, at(2))
	withError.Error = json.RawMessage(`{"code":-32603,"message":"boom"}`)
	bare := taskRow("t4", "gen:4", tasks.StatusWorking, at(3))
	bare.TTL, bare.ExpiresAt, bare.Result, bare.Error = 0, time.Time{}, nil, json.RawMessage{}

	var inTx, inTxByRef tasks.Row
	var inTxMissing, inTxMissingRef error
	taskUpdate(t, b, func(ctx context.Context, tx tasks.Tx) error {
		for _, r := range []tasks.Row{full, withResult, withError, bare} {
			if err := tx.InsertTask(ctx, r); err != nil {
				return err
			}
		}
		var err error
		if inTx, err = tx.Task(ctx, "t1"); err != nil {
			return fmt.Errorf("read own write: %w", err)
		}
		if inTxByRef, err = tx.TaskByRef(ctx, "gen:2"); err != nil {
			return fmt.Errorf("read own write by ref: %w", err)
		}
		_, inTxMissing = tx.Task(ctx, "nope")
		_, inTxMissingRef = tx.TaskByRef(ctx, "gen:nope")
		return nil
	})
	for _, want := range []tasks.Row{full, withResult, withError, bare} {
		got := getTask(t, b, want.TaskID)
		if d := diff(want, got, taskJSON); len(d) > 0 {
			t.Errorf("Task(%s) differs from the inserted row: %v", want.TaskID, d)
		}
		byRef, err := b.TaskByRef(ctx, want.Ref)
		if err != nil {
			t.Errorf("TaskByRef(%s): %v", want.Ref, err)
		} else if d := diff(want, byRef, taskJSON); len(d) > 0 {
			t.Errorf("TaskByRef(%s) differs from the inserted row: %v", want.Ref, d)
		}
	}
	// NULL round trips: nothing stays nothing.
	got := getTask(t, b, "t4")
	if got.TTL != 0 || !got.ExpiresAt.IsZero() || len(got.Result) != 0 || len(got.Error) != 0 {
		t.Errorf("t4: TTL %v, ExpiresAt %v, Result %q, Error %q; want all empty", got.TTL, got.ExpiresAt, got.Result, got.Error)
	}
	if got := getTask(t, b, "t2"); len(got.Error) != 0 {
		t.Errorf("t2 Error = %q, want empty", got.Error)
	}
	if got := getTask(t, b, "t3"); len(got.Result) != 0 {
		t.Errorf("t3 Result = %q, want empty", got.Result)
	}
	if d := diff(full, inTx, taskJSON); len(d) > 0 {
		t.Errorf("tx.Task(t1) differs from the inserted row: %v", d)
	}
	if inTxByRef.TaskID != "t2" {
		t.Errorf("tx.TaskByRef(gen:2) = %q, want t2", inTxByRef.TaskID)
	}
	for name, err := range map[string]error{"tx.Task": inTxMissing, "tx.TaskByRef": inTxMissingRef} {
		if !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("%s of an unknown task = %v, want tasks.ErrNotFound", name, err)
		}
	}
	if r, err := b.Task(ctx, "nope"); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("Task(nope) = %+v, %v; want tasks.ErrNotFound", r, err)
	}
	if r, err := b.TaskByRef(ctx, "gen:nope"); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("TaskByRef(gen:nope) = %+v, %v; want tasks.ErrNotFound", r, err)
	}
}

// testOwnedTask: OwnedTask answers the owner's task and nothing else: a
// foreign id is ErrNotFound, exactly as an unknown one.
func testOwnedTask(t *testing.T, e Engine) {
	b, ctx := e.Tasks, t.Context()
	mine := taskRow("t1", "gen:1", tasks.StatusWorking, at(0))
	bobs := taskRow("t2", "gen:2", tasks.StatusWorking, at(1))
	bobs.Owner = "bob"
	insertTasks(t, b, mine, bobs)
	got, err := b.OwnedTask(ctx, "alice", "t1")
	if err != nil {
		t.Fatalf("OwnedTask(alice, t1): %v", err)
	}
	if d := diff(mine, got, taskJSON); len(d) > 0 {
		t.Errorf("OwnedTask(alice, t1) differs from the inserted row: %v", d)
	}
	for _, c := range []struct{ owner, id string }{
		{"alice", "t2"}, {"bob", "t1"}, {"alice", "nope"}, {"", "t1"}, {"Alice", "t1"}, {"alic", "t1"}, {"alice ", "t1"}, {"alice", "T1"},
	} {
		if r, err := b.OwnedTask(ctx, c.owner, c.id); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("OwnedTask(%q, %q) = %+v, %v; want tasks.ErrNotFound", c.owner, c.id, r, err)
		}
	}
}

func testTaskTransitions(t *testing.T, e Engine) {
	b := e.Tasks
	insertTasks(t, b, taskRow("t1", "gen:1", tasks.StatusWorking, at(0)))
	unchanged := func(what string, before tasks.Row) {
		t.Helper()
		if d := diff(before, getTask(t, b, "t1"), taskJSON); len(d) > 0 {
			t.Errorf("%s changed the task: %v", what, d)
		}
	}

	before := getTask(t, b, "t1")
	if taskOp(t, b, setAnswers, tasks.Row{TaskID: "t1", InputRequests: "{}", AnsweredKeys: `["x"]`, InputResponses: `{"x":1}`, LastUpdatedAt: at(5)}) {
		t.Error("SetTaskAnswers on a working task = true, want false")
	}
	unchanged("SetTaskAnswers on a working task", before)

	active := tasks.Row{TaskID: "t1", Status: tasks.StatusInputRequired, StatusMessage: "need input",
		InputRequests: `{"q_1":{"message":"which?"}}`, KeySeq: 1, PollInterval: 3 * time.Second, LastUpdatedAt: at(10)}
	if !taskOp(t, b, setActive, active) {
		t.Fatal("SetTaskActive(input_required) on a working task = false")
	}
	want := before
	want.Status, want.StatusMessage, want.InputRequests, want.KeySeq, want.PollInterval, want.LastUpdatedAt =
		active.Status, active.StatusMessage, active.InputRequests, active.KeySeq, active.PollInterval, active.LastUpdatedAt
	if d := diff(want, getTask(t, b, "t1"), taskJSON); len(d) > 0 {
		t.Errorf("after SetTaskActive: %v", d)
	}

	answers := tasks.Row{TaskID: "t1", InputRequests: "{}", AnsweredKeys: `["q_1"]`, InputResponses: `{"q_1":{"action":"accept"}}`, LastUpdatedAt: at(20)}
	if !taskOp(t, b, setAnswers, answers) {
		t.Fatal("SetTaskAnswers on an input_required task = false")
	}
	want.InputRequests, want.AnsweredKeys, want.InputResponses, want.LastUpdatedAt = answers.InputRequests, answers.AnsweredKeys, answers.InputResponses, answers.LastUpdatedAt
	if d := diff(want, getTask(t, b, "t1"), taskJSON); len(d) > 0 {
		t.Errorf("after SetTaskAnswers: %v", d)
	}

	working := tasks.Row{TaskID: "t1", Status: tasks.StatusWorking, StatusMessage: "back to work", InputRequests: "{}", KeySeq: 1, PollInterval: time.Second, LastUpdatedAt: at(30)}
	if !taskOp(t, b, setActive, working) {
		t.Fatal("SetTaskActive(working) on an input_required task = false")
	}
	if r := getTask(t, b, "t1"); r.Status != tasks.StatusWorking || r.PollInterval != time.Second || !r.LastUpdatedAt.Equal(at(30)) {
		t.Errorf("after SetTaskActive(working): status %s, poll %v, updated %v", r.Status, r.PollInterval, r.LastUpdatedAt)
	}

	done := tasks.Row{TaskID: "t1", Status: tasks.StatusCompleted, StatusMessage: "done", Result: json.RawMessage(`{"content":[],"structuredContent":{"id":"g"}}`), LastUpdatedAt: at(40)}
	if !taskOp(t, b, finish, done) {
		t.Fatal("FinishTask(completed) on a working task = false")
	}
	r := getTask(t, b, "t1")
	if r.Status != tasks.StatusCompleted || r.StatusMessage != "done" || !jsonEqual(string(r.Result), string(done.Result)) || len(r.Error) != 0 || !r.LastUpdatedAt.Equal(at(40)) {
		t.Errorf("after FinishTask: status %s %q, result %s, error %q, updated %v", r.Status, r.StatusMessage, r.Result, r.Error, r.LastUpdatedAt)
	}
	if !r.CreatedAt.Equal(at(0)) || r.Owner != "alice" || r.Ref != "gen:1" || !r.ExpiresAt.Equal(at(0).Add(time.Minute)) {
		t.Errorf("FinishTask changed identity fields: %+v", r)
	}
	before = r
	again := tasks.Row{TaskID: "t1", Status: tasks.StatusFailed, StatusMessage: "late", Error: json.RawMessage(`{"code":1,"message":"late"}`), LastUpdatedAt: at(50)}
	if taskOp(t, b, finish, again) {
		t.Error("a second FinishTask = true, want false")
	}
	unchanged("a second FinishTask", before)

	// From input_required straight to failed, with an error payload.
	insertTasks(t, b, taskRow("t2", "gen:2", tasks.StatusInputRequired, at(0)))
	failed := tasks.Row{TaskID: "t2", Status: tasks.StatusFailed, StatusMessage: "failed", Error: json.RawMessage(`{"code":-32603,"message":"provider refused","data":{"k":"v"}}`), LastUpdatedAt: at(60)}
	if !taskOp(t, b, finish, failed) {
		t.Fatal("FinishTask(failed) on an input_required task = false")
	}
	if r := getTask(t, b, "t2"); r.Status != tasks.StatusFailed || !jsonEqual(string(r.Error), string(failed.Error)) || len(r.Result) != 0 {
		t.Errorf("t2 after FinishTask(failed): status %s, error %s, result %q", r.Status, r.Error, r.Result)
	}

	for name, op := range map[string]func(tasks.Tx) func(context.Context, tasks.Row) (bool, error){
		"SetTaskActive": setActive, "SetTaskAnswers": setAnswers, "FinishTask": finish,
	} {
		if taskOp(t, b, op, tasks.Row{TaskID: "nope", Status: tasks.StatusCompleted, InputRequests: "{}", AnsweredKeys: "[]", InputResponses: "{}", LastUpdatedAt: at(70)}) {
			t.Errorf("%s on an unknown task = true", name)
		}
	}
}

func testTaskTerminal(t *testing.T, e Engine) {
	b := e.Tasks
	for i, st := range []tasks.Status{tasks.StatusCompleted, tasks.StatusFailed, tasks.StatusCancelled} {
		id := "term-" + string(st)
		insertTasks(t, b, taskRow(id, "gen:"+id, tasks.StatusWorking, at(0)))
		end := tasks.Row{TaskID: id, Status: st, StatusMessage: "end", LastUpdatedAt: at(int64(10 + i))}
		if st == tasks.StatusCompleted {
			end.Result = json.RawMessage(`{"content":[]}`)
		}
		if st == tasks.StatusFailed {
			end.Error = json.RawMessage(`{"code":1,"message":"x"}`)
		}
		if !taskOp(t, b, finish, end) {
			t.Fatalf("FinishTask(%s) on a working task = false", st)
		}
		before := getTask(t, b, id)
		if before.Status != st {
			t.Fatalf("status after FinishTask(%s) = %s", st, before.Status)
		}
		for _, c := range []struct {
			name string
			op   func(tasks.Tx) func(context.Context, tasks.Row) (bool, error)
			r    tasks.Row
		}{
			{"SetTaskActive(working)", setActive, tasks.Row{TaskID: id, Status: tasks.StatusWorking, StatusMessage: "x", InputRequests: "{}", PollInterval: time.Second, LastUpdatedAt: at(100)}},
			{"SetTaskActive(input_required)", setActive, tasks.Row{TaskID: id, Status: tasks.StatusInputRequired, StatusMessage: "x", InputRequests: `{"a":1}`, PollInterval: time.Second, LastUpdatedAt: at(100)}},
			{"SetTaskAnswers", setAnswers, tasks.Row{TaskID: id, InputRequests: "{}", AnsweredKeys: `["a"]`, InputResponses: `{"a":1}`, LastUpdatedAt: at(100)}},
			{"FinishTask(completed)", finish, tasks.Row{TaskID: id, Status: tasks.StatusCompleted, StatusMessage: "x", Result: json.RawMessage(`{"x":1}`), LastUpdatedAt: at(100)}},
			{"FinishTask(failed)", finish, tasks.Row{TaskID: id, Status: tasks.StatusFailed, StatusMessage: "x", Error: json.RawMessage(`{"code":2,"message":"y"}`), LastUpdatedAt: at(100)}},
			{"FinishTask(cancelled)", finish, tasks.Row{TaskID: id, Status: tasks.StatusCancelled, StatusMessage: "x", LastUpdatedAt: at(100)}},
		} {
			if taskOp(t, b, c.op, c.r) {
				t.Errorf("%s on a %s task = true, want false", c.name, st)
			}
		}
		if d := diff(before, getTask(t, b, id), taskJSON); len(d) > 0 {
			t.Errorf("terminal %s task changed: %v", st, d)
		}
	}
}

func testTaskExpiry(t *testing.T, e Engine) {
	b, ctx := e.Tasks, t.Context()
	expiring := func(id string, st tasks.Status, expires int64) tasks.Row {
		r := taskRow(id, "gen:"+id, st, at(0))
		r.TTL, r.ExpiresAt = time.Duration(expires)*time.Millisecond, at(expires)
		return r
	}
	forever := taskRow("x5", "gen:x5", tasks.StatusWorking, at(0))
	forever.TTL, forever.ExpiresAt = 0, time.Time{}
	insertTasks(t, b,
		expiring("x1", tasks.StatusWorking, 100),
		expiring("x2", tasks.StatusInputRequired, 100),
		expiring("x3", tasks.StatusWorking, 101),
		expiring("x4", tasks.StatusWorking, 50),
		forever,
	)
	if !taskOp(t, b, finish, tasks.Row{TaskID: "x4", Status: tasks.StatusCompleted, Result: json.RawMessage(`{}`), LastUpdatedAt: at(10)}) {
		t.Fatal("FinishTask(x4) = false")
	}
	live := func(now int64, limit int, want ...string) {
		t.Helper()
		rows, err := b.ExpiredLiveTasks(ctx, at(now), limit)
		if err != nil {
			t.Fatalf("ExpiredLiveTasks: %v", err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.TaskID)
			if r.Ref != "gen:"+r.TaskID {
				t.Errorf("ExpiredLiveTasks row %s: Ref %q", r.TaskID, r.Ref)
			}
		}
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Errorf("ExpiredLiveTasks(at(%d), %d) = %v, want %v", now, limit, sorted(got), sorted(want))
		}
	}
	live(99, 10)
	live(100, 10, "x1", "x2") // at or before now
	live(1_000_000, 10, "x1", "x2", "x3")
	if rows, err := b.ExpiredLiveTasks(ctx, at(100), 1); err != nil || len(rows) != 1 {
		t.Errorf("ExpiredLiveTasks(limit 1) = %d rows, %v; want 1", len(rows), err)
	}

	purge := func(cutoff int64, limit int) int64 {
		t.Helper()
		var n int64
		taskUpdate(t, b, func(ctx context.Context, tx tasks.Tx) error {
			var err error
			n, err = tx.PurgeTasks(ctx, at(cutoff), limit)
			return err
		})
		return n
	}
	if n := purge(75, 10); n != 1 {
		t.Errorf("PurgeTasks(at(75)) = %d, want 1 (x4)", n)
	}
	if _, err := b.Task(ctx, "x4"); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("Task(x4) after purge: %v, want tasks.ErrNotFound", err)
	}
	if n := purge(200, 1); n != 1 {
		t.Errorf("PurgeTasks(at(200), limit 1) = %d, want 1", n)
	}
	if n := purge(200, 10); n != 2 {
		t.Errorf("PurgeTasks(at(200), limit 10) = %d, want the 2 left", n)
	}
	if n := purge(200, 10); n != 0 {
		t.Errorf("PurgeTasks with nothing left = %d, want 0", n)
	}
	for _, id := range []string{"x1", "x2", "x3"} {
		if _, err := b.Task(ctx, id); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Task(%s) after purge: %v, want tasks.ErrNotFound", id, err)
		}
	}
	if _, err := b.Task(ctx, "x5"); err != nil {
		t.Errorf("a task without expiry was purged: %v", err)
	}
	live(1_000_000, 10)
}

// --- one unit of work ----------------------------------------------------------

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
