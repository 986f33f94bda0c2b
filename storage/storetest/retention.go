package storetest

// Webhook intake and output retention.

import (
	"context"
	"slices"
	"testing"

	"github.com/darkroom-mcp/darkroom/generation"
)

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
