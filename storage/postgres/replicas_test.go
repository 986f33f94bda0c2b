package postgres_test

import (
	"context"
	"testing"
	"time"
)

// TestHeartbeat: each replica counts the replicas that beat lately,
// itself included; one that stops is dropped from the count at once (it
// deletes its row); one that stopped beating without a word (kill -9)
// is dropped once its last beat is older than three periods.
func TestHeartbeat(t *testing.T) {
	ds := replicas(t, 2)
	const every = 20 * time.Millisecond
	beat := func(i int) (<-chan int, context.CancelFunc, <-chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		counts := make(chan int, 1024)
		done := make(chan struct{})
		go func() {
			defer close(done)
			ds[i].Heartbeat(ctx, every, func(n int) { counts <- n })
		}()
		t.Cleanup(func() { cancel(); <-done })
		return counts, cancel, done
	}
	await := func(counts <-chan int, want int, what string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case n := <-counts:
				if n == want {
					return
				}
			case <-deadline:
				t.Fatalf("%s: the live count never became %d", what, want)
			}
		}
	}
	a, _, _ := beat(0)
	await(a, 1, "alone")
	_, stopB, doneB := beat(1)
	await(a, 2, "B started")
	stopB()
	<-doneB
	await(a, 1, "B stopped")

	// A replica killed mid-beat: its row stays, fresh, then ages out.
	ctx := context.Background()
	t0 := time.Now()
	if _, err := ds[1].Pool.Exec(ctx, `INSERT INTO replicas (id, seen_at) VALUES ('killed', (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint)`); err != nil {
		t.Fatal(err)
	}
	await(a, 2, "a fresh row of a killed replica")
	await(a, 1, "the killed replica's row aged")
	if d := time.Since(t0); d < 3*every {
		t.Fatalf("a silent replica was dropped after %v, before three periods (%v)", d, 3*every)
	}
	// Rows silent for an hour are deleted by the beats.
	if _, err := ds[1].Pool.Exec(ctx, `INSERT INTO replicas (id, seen_at) VALUES ('ancient', 1)`); err != nil {
		t.Fatal(err)
	}
	for len(a) > 0 {
		<-a // counts from beats that may predate the insert
	}
	<-a // a beat that may have begun before the insert, then one after
	<-a
	var n int
	if err := ds[1].Pool.QueryRow(ctx, `SELECT COUNT(*) FROM replicas WHERE id IN ('ancient')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("an hour-old row is still there (%d, %v)", n, err)
	}
}
