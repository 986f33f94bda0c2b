package storetest

// The runner's durable queue: claim, lease and renewal, reschedule, wake,
// and the cancel and submit marks.

import (
	"context"
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
	wantDue(t, s, leased(at(1000), at(501)))

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
	wantDue(t, s, leased(at(2000), at(1501)))

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
