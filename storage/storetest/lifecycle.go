package storetest

// The lifecycle: every status change is a compare-and-set on
// generation.Lifecycle's sources, with its effects, and terminal statuses
// never change.

import (
	"fmt"
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
