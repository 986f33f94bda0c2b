package storetest

// The runner's work: its durable queue (claim, lease and renewal,
// reschedule, wake, the cancel and submit marks), webhook intake and
// output retention.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
)

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
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
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
	// A leased row is due again when its lease expires: another
	// replica takes over a killed one's work then, and a runner whose
	// step lost its lease to a write outage looks at the row again.
	wantDue(t, s, at(501))
	wantClaims(t, s, "r2", at(900), at(499))

	// Reschedule only by the lease owner; it frees the row.
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		return tx.Reschedule(ctx, "qa", "r2", at(2000), at(450), false)
	})
	if r := get(t, s, "qa"); r.LeaseOwner != "r1" || !r.NextCheckAt.Equal(at(10)) {
		t.Errorf("Reschedule by a runner without the lease changed qa: lease %q, next %v", r.LeaseOwner, r.NextCheckAt)
	}
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		return tx.Reschedule(ctx, "qa", "r1", at(2000), at(450), false)
	})
	if r := get(t, s, "qa"); !leaseFree(r) || !r.NextCheckAt.Equal(at(2000)) {
		t.Errorf("qa after Reschedule: lease %q until %v, next %v; want free, next %v", r.LeaseOwner, r.LeaseUntil, r.NextCheckAt, at(2000))
	}
	wantDue(t, s, at(501))

	// An expired lease makes the row due again.
	wantClaims(t, s, "r2", at(1500), at(600), "qb")
	if r := get(t, s, "qb"); r.Attempts != 2 {
		t.Errorf("qb Attempts = %d after two claims, want 2", r.Attempts)
	}

	// WakeNow makes a row due at once; due means NextCheckAt <= now.
	update(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.WakeNow(ctx, "qc", at(700)) })
	if r := get(t, s, "qc"); !r.NextCheckAt.Equal(at(700)) {
		t.Errorf("qc NextCheckAt after WakeNow = %v, want %v", r.NextCheckAt, at(700))
	}
	wantDue(t, s, at(700))
	wantClaims(t, s, "r2", at(1500), at(700), "qc")
	wantDue(t, s, at(1501))

	// ReleaseRunnerLeases frees only that runner's leases.
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		return tx.ReleaseRunnerLeases(ctx, "no such runner")
	})
	for _, id := range []string{"qb", "qc"} {
		if r := get(t, s, id); leaseFree(r) {
			t.Errorf("%s: another runner's ReleaseRunnerLeases freed its lease", id)
		}
	}

	// ReleaseLeases frees every lease before it expires on an embedded
	// engine, and none on a shared one.
	update(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.ReleaseLeases(ctx) })
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
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		return tx.Reschedule(ctx, "qb", "r3", at(5000), at(900), false)
	})
	if r := get(t, s, "qb"); !leaseFree(r) || !r.NextCheckAt.Equal(at(900)) {
		t.Errorf("qb rescheduled with an unseen cancel: lease %q, next %v; want free, next %v", r.LeaseOwner, r.NextCheckAt, at(900))
	}
	wantClaims(t, s, "r3", at(3000), at(950), "qb")
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
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
	update(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.WakeOwnerQueued(ctx, "alice", at(100)) })
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
		update(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.MarkCancelSent(ctx, "m1") })
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
		update(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.ResetSubmitting(ctx, "m2") })
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

func testDeliveries(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	insert(t, s, genRow("g", "alice", generation.StatusRunning, at(0)), genRow("h", "alice", generation.StatusRunning, at(0)))
	ins := func(d generation.Delivery) bool {
		t.Helper()
		return do(t, s, func(ctx context.Context, tx generation.Tx) (bool, error) { return tx.InsertDelivery(ctx, d) })
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
		update(t, s, func(ctx context.Context, tx generation.Tx) error {
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
		return do(t, s, func(ctx context.Context, tx generation.Tx) (bool, error) { return tx.MarkOutputsExpired(ctx, id) })
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
