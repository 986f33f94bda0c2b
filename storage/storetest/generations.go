package storetest

// A generation's row: its lifecycle (every status change is a
// compare-and-set on generation.Lifecycle's sources, with its effects;
// terminal statuses never change), reads as inserted, idempotency keys,
// the provider-job index and the owner's paged list.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/darkroom-mcp/darkroom/generation"
)

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
					var prep []generation.Change
					if ev == generation.EventSubmitted && admitted {
						// Only a submit in progress takes a job.
						r.Status = generation.StatusQueued
						prep = append(prep, change(id, generation.EventSubmit, "", at(500)))
						if st != generation.StatusQueued {
							prep = append(prep, change(id, generation.EventProgress, st, at(600)))
						}
					}
					c := change(id, ev, to, at(1000))
					before, after, ok := insertApply(t, s, r, c, prep...)
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
// nothing was handed to the provider (SubmitState ""), and EventSubmitted
// that a submit is in progress (SubmitState "submitting").
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
	// A recorded job is never replaced: a late record of a submit (its
	// database write refused, retried after another claim bound a job)
	// changes nothing.
	before := get(t, s, "sub")
	late := change("sub", generation.EventSubmitted, generation.StatusRunning, at(250))
	late.Job, late.JobID = `{"id":"late"}`, "late"
	if apply(t, s, late) {
		t.Error("EventSubmitted on a submitted row: Apply = true, want false")
	}
	if d := diff(before, get(t, s, "sub"), genJSON); len(d) > 0 {
		t.Errorf("a refused late EventSubmitted changed the row: %v", d)
	}
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
	// An engine may send the insert later (PostgreSQL queues it), and then
	// only Update reports it.
	if insertErr != nil && !errors.Is(insertErr, generation.ErrDuplicateKey) {
		t.Errorf("InsertGeneration with a reused (owner, key) = %v, want nil or generation.ErrDuplicateKey", insertErr)
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
	if inTx := do(t, s, func(ctx context.Context, tx generation.Tx) (generation.Row, error) {
		return tx.GenerationByKey(ctx, "bob", "k1")
	}); inTx.ID != "b1" {
		t.Errorf("tx.GenerationByKey(bob, k1) = %q, want b1", inTx.ID)
	}
}

func testGenerationByJob(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	other := genRow("o1", "bob", generation.StatusQueued, at(0))
	other.Provider = "other"
	insert(t, s, genRow("j1", "alice", generation.StatusQueued, at(0)), other, genRow("j2", "alice", generation.StatusQueued, at(0)))
	for _, id := range []string{"j1", "o1"} {
		if !apply(t, s, change(id, generation.EventSubmit, "", at(5))) {
			t.Fatalf("EventSubmit on %s: Apply = false", id)
		}
	}
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
