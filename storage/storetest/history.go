package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// testHistoryPurge: the stores grow only with retention. Many
// generations, their webhook deliveries and their tasks are created;
// as each ends and ages past its period, the purges (in bounded batches)
// take the tables back to zero rows, and never take a live generation,
// a completed one whose outputs are still kept, or a row too young.
func testHistoryPurge(t *testing.T, e Engine) {
	if e.Rows == nil {
		t.Skip("engine reports no row counts")
	}
	s, ctx := e.Generations, t.Context()
	const n, batch = 450, 200 // more than two batches
	statuses := []generation.Status{generation.StatusCompleted, generation.StatusFailed, generation.StatusCancelled, generation.StatusQueued}
	var rows []generation.Row
	var live, completed []string
	for i := range n {
		r := genRow(fmt.Sprintf("g%03d", i), "alice", statuses[i%len(statuses)], at(int64(i)))
		switch r.Status {
		case generation.StatusCompleted:
			r.Outputs = `[{"key":"out/` + r.ID + `","mimeType":"image/png","bytes":3}]`
			completed = append(completed, r.ID)
		case generation.StatusQueued:
			r.NextCheckAt = at(int64(i))
			live = append(live, r.ID)
		}
		rows = append(rows, r)
	}
	insert(t, s, rows...)
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		for i, r := range rows {
			d := generation.Delivery{Provider: "prov", DeliveryID: "d-" + r.ID, GenerationID: r.ID, Event: `{}`, ReceivedAt: at(int64(i))}
			if _, err := tx.InsertDelivery(ctx, d); err != nil {
				return err
			}
		}
		return nil
	})
	var trs []tasks.Row
	for i, r := range rows {
		trs = append(trs, taskRow("t-"+r.ID, "gen:"+r.ID, tasks.StatusWorking, at(int64(i))))
	}
	insertTasks(t, e.Tasks, trs...)
	counts := func(gens, dels, tks int64) {
		t.Helper()
		for table, want := range map[string]int64{"generations": gens, "webhook_deliveries": dels, "tasks": tks} {
			if got := e.Rows(t, table); got != want {
				t.Errorf("%s: %d rows, want %d", table, got, want)
			}
		}
	}
	counts(n, n, n)

	purge := func(before time.Time) (gens, dels int64) {
		t.Helper()
		for {
			rs, err := s.GenerationsToPurge(ctx, before, batch)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) > batch {
				t.Fatalf("GenerationsToPurge gave %d rows, limit %d", len(rs), batch)
			}
			if len(rs) == 0 {
				break
			}
			update(t, s, func(ctx context.Context, tx generation.Tx) error {
				for _, r := range rs {
					if r.Params == "" {
						return fmt.Errorf("%s: no params (its input image is found there)", r.ID)
					}
					ok, err := tx.DeleteGeneration(ctx, r.ID)
					if err != nil {
						return err
					}
					if ok {
						gens++
					}
				}
				return nil
			})
		}
		for {
			var m int64
			update(t, s, func(ctx context.Context, tx generation.Tx) (err error) {
				m, err = tx.PurgeDeliveries(ctx, before, batch)
				return err
			})
			if m > batch {
				t.Fatalf("PurgeDeliveries deleted %d, limit %d", m, batch)
			}
			dels += m
			if m == 0 {
				return gens, dels
			}
		}
	}
	// Too young: nothing goes.
	if g, d := purge(at(0)); g != 0 || d != 0 {
		t.Fatalf("purge before any row: %d generations, %d deliveries", g, d)
	}
	// Failed and cancelled go; completed ones keep their outputs, so stay;
	// live ones stay, and so do their deliveries.
	ended := int64(n - len(live) - len(completed))
	if g, d := purge(at(n)); g != ended || d != int64(n-len(live)) {
		t.Fatalf("first purge: %d generations, %d deliveries; want %d, %d", g, d, ended, n-len(live))
	}
	counts(int64(len(live)+len(completed)), int64(len(live)), n)
	// DeleteGeneration refuses a live row and a completed one with outputs.
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		for _, id := range []string{live[0], completed[0]} {
			if ok, err := tx.DeleteGeneration(ctx, id); err != nil || ok {
				return fmt.Errorf("DeleteGeneration(%s) = %v, %v; want false", id, ok, err)
			}
		}
		return nil
	})
	// Outputs expire: the completed ones go.
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		for _, id := range completed {
			if _, err := tx.MarkOutputsExpired(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
	if g, d := purge(at(n)); g != int64(len(completed)) || d != 0 {
		t.Fatalf("after outputs expired: %d generations, %d deliveries", g, d)
	}
	// The live ones end at 10 s: gone once older than that.
	update(t, s, func(ctx context.Context, tx generation.Tx) error {
		for _, id := range live {
			c := change(id, generation.EventFail, generation.StatusFailed, at(10_000))
			if ok, err := tx.Apply(ctx, c); err != nil || !ok {
				return fmt.Errorf("fail %s: %v %v", id, ok, err)
			}
		}
		return nil
	})
	// Their deliveries dedupe nothing now; the records wait for their age.
	if g, d := purge(at(10_000)); g != 0 || d != int64(len(live)) {
		t.Fatalf("at the cutoff: %d generations, %d deliveries; want 0, %d", g, d, len(live))
	}
	if g, _ := purge(at(10_001)); g != int64(len(live)) {
		t.Fatalf("last purge: %d generations, want %d", g, len(live))
	}
	// The tasks expire a minute after creation; the sweeper's purge takes them.
	for {
		var m int64
		update(t, e.Tasks, func(ctx context.Context, tx tasks.Tx) (err error) {
			m, err = tx.PurgeTasks(ctx, at(n+time.Minute.Milliseconds()), batch)
			return err
		})
		if m == 0 {
			break
		}
	}
	counts(0, 0, 0)
	absent(t, s, live[0])
	absent(t, s, completed[0])
}

// testReservationsToExpire: the reservation retention lists only the
// generations still reserved that were created before its cutoff, oldest
// first, up to its limit; a reservation's later changes (a hold: one of
// its uploads came) do not make it younger.
func testReservationsToExpire(t *testing.T, e Engine) {
	s, ctx := e.Generations, t.Context()
	var rows []generation.Row
	for i, st := range []generation.Status{generation.StatusReserved, generation.StatusQueued, generation.StatusReserved,
		generation.StatusFailed, generation.StatusReserved, generation.StatusRunning, generation.StatusReserved} {
		rows = append(rows, genRow(fmt.Sprintf("r%d", i), "alice", st, at(int64(100*(6-i)))))
	}
	insert(t, s, rows...) // r6 oldest (0) … r0 youngest (600)
	hold := change("r4", generation.EventHold, "", at(5000))
	if !apply(t, s, hold) {
		t.Fatal("hold on r4: Apply = false")
	}
	cases := []struct {
		before int64
		limit  int
		want   []string
	}{
		{0, 10, nil},                                // nothing created before 0
		{1, 10, []string{"r6"}},                     // the oldest alone
		{201, 10, []string{"r6", "r4"}},             // r4 held since, still its age
		{601, 10, []string{"r6", "r4", "r2", "r0"}}, // never the others
		{601, 2, []string{"r6", "r4"}},              // oldest first, up to the limit
	}
	for _, c := range cases {
		got, err := s.ReservationsToExpire(ctx, at(c.before), c.limit)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ReservationsToExpire(at(%d), %d) = %v, %v; want %v", c.before, c.limit, got, err, c.want)
		}
	}
}
