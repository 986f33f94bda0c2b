package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/postgres"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// replicas opens n handles on one fresh database, as n replicas would.
func replicas(t testing.TB, n int) []*postgres.DB {
	t.Helper()
	url := pgtest.URL(t)
	out := make([]*postgres.DB, n)
	for i := range out {
		d, err := postgres.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		out[i] = d
	}
	return out
}

// listen runs d's listener until the test ends, sending what it hears on
// the returned channel ("g:id", "t:id"); it returns once connected.
func listen(t *testing.T, d *postgres.DB) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	heard := make(chan string, 64)
	connected := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		d.Listen(ctx, postgres.Listener{
			Generation:  func(id string) { heard <- "g:" + id },
			Task:        func(id string, v int64) { heard <- fmt.Sprintf("t:%s:%d", id, v) },
			Resync:      func() { connected <- struct{}{} },
			ResyncEvery: time.Hour,
		})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	<-connected
	return heard
}

var errRollback = errors.New("rollback")

// TestNotifyOnCommit: a change is announced to the other replicas when,
// and only when, its transaction commits; a replica does not hear itself.
func TestNotifyOnCommit(t *testing.T) {
	dbs := replicas(t, 2)
	a, b := dbs[0], dbs[1]
	heardB, heardA := listen(t, b), listen(t, a)
	ctx := context.Background()
	now := time.Now()
	insert := func(id string) {
		err := a.Generations().Update(ctx, func(ctx context.Context, tx generation.Tx) error {
			if err := tx.InsertGeneration(ctx, generation.Row{ID: id, Owner: "o", ModelID: "m", Provider: "local", Kind: "image",
				Params: "{}", Status: generation.StatusRunning, CreatedAt: now, UpdatedAt: now}); err != nil {
				return err
			}
			return tx.(tasks.Tx).InsertTask(ctx, tasks.Row{TaskID: "task-" + id, Owner: "o", Ref: "generation:" + id,
				Status: tasks.StatusWorking, CreatedAt: now, LastUpdatedAt: now, PollInterval: time.Second,
				InputRequests: "{}", AnsweredKeys: "[]", InputResponses: "{}", ClientCaps: "{}"})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	progress := func(id string, p float64) generation.Change {
		return generation.Change{ID: id, Event: generation.EventProgress, From: []generation.Status{generation.StatusRunning},
			To: generation.StatusRunning, At: time.Now(), Progress: p}
	}
	for _, tc := range []struct {
		name, id string
		fn       func(ctx context.Context, tx generation.Tx) error
		want     []string // in order; nil: nothing
	}{
		{"committed change", "g1", func(ctx context.Context, tx generation.Tx) error {
			_, err := tx.Apply(ctx, progress("g1", 0.5))
			return err
		}, []string{"g:g1"}},
		{"rolled back", "g2", func(ctx context.Context, tx generation.Tx) error {
			if _, err := tx.Apply(ctx, progress("g2", 0.5)); err != nil {
				return err
			}
			return errRollback
		}, nil},
		{"guard refused: nothing changed", "g3", func(ctx context.Context, tx generation.Tx) error {
			c := progress("g3", 0.5)
			c.From = []generation.Status{generation.StatusQueued}
			_, err := tx.Apply(ctx, c)
			return err
		}, nil},
		{"generation and its task", "g4", func(ctx context.Context, tx generation.Tx) error {
			if _, err := tx.Apply(ctx, progress("g4", 0.7)); err != nil {
				return err
			}
			_, err := tx.(tasks.Tx).FinishTask(ctx, tasks.Row{TaskID: "task-g4", Status: tasks.StatusCompleted, LastUpdatedAt: time.Now()})
			return err
		}, []string{"g:g4", "t:task-g4:1"}}, // the task's first update: version 1
	} {
		t.Run(tc.name, func(t *testing.T) {
			insert(tc.id)
			if err := a.Generations().Update(ctx, tc.fn); err != nil && !errors.Is(err, errRollback) {
				t.Fatal(err)
			}
			// A marker committed after the case: everything the case sent
			// arrives before it (notifications keep commit order).
			marker := "marker-" + tc.id
			insert(marker)
			if err := a.Generations().Update(ctx, func(ctx context.Context, tx generation.Tx) error {
				_, err := tx.Apply(ctx, progress(marker, 0.1))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for s := range heardB {
				if s == "g:"+marker {
					break
				}
				got = append(got, s)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("heard %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("heard %v, want %v", got, tc.want)
				}
			}
		})
	}
	select {
	case s := <-heardA:
		t.Fatalf("replica A heard its own change %s", s)
	default:
	}
}

// TestExclusive: a fleet-wide job runs on one replica at a time; the
// others skip it while it runs, and run it once it is done.
func TestExclusive(t *testing.T) {
	dbs := replicas(t, 2)
	ctx := context.Background()
	inside, leave := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- dbs[0].Exclusive(ctx, "sweep", func(context.Context) error {
			close(inside)
			<-leave
			return nil
		})
	}()
	<-inside
	for _, tc := range []struct {
		name    string
		job     string
		wantRan bool
	}{
		{"same job elsewhere is skipped", "sweep", false},
		{"another job runs", "retention", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			if err := dbs[1].Exclusive(ctx, tc.job, func(context.Context) error { ran = true; return nil }); err != nil {
				t.Fatal(err)
			}
			if ran != tc.wantRan {
				t.Fatalf("ran = %v, want %v", ran, tc.wantRan)
			}
		})
	}
	close(leave)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := dbs[1].Exclusive(ctx, "sweep", func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("after release: ran=%v err=%v", ran, err)
	}
}

// eventually polls cond (a real PostgreSQL: no clock to move) until it
// holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestListenerFenceAndReconnect: on a real PostgreSQL the listener's
// fence comes back and makes it fresh; when its connection is killed it
// is stale at once, the listener reconnects and calls Connected (the
// task cache's flush) before it is fresh again, and a task changed
// meanwhile on the other replica is not served stale from the cache.
func TestListenerFenceAndReconnect(t *testing.T) {
	dbs := replicas(t, 2)
	a, b := dbs[0], dbs[1]
	ctx, cancel := context.WithCancel(context.Background())
	var connects atomic.Int32
	store := tasks.NewStore(b.Tasks(), nil, tasks.Shared(b.Fence().Fresh))
	var wg sync.WaitGroup
	wg.Go(func() {
		b.Listen(ctx, postgres.Listener{
			Task:        store.NotifyVersion,
			Connected:   func() { connects.Add(1); store.FlushLive() },
			ResyncEvery: time.Hour,
		})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	eventually(t, "the fence to be fresh", b.Fence().Fresh)

	now := time.Now()
	row := tasks.Row{TaskID: "t1", Owner: "o", Ref: "x:1", Status: tasks.StatusWorking, CreatedAt: now, LastUpdatedAt: now,
		PollInterval: time.Second, InputRequests: "{}", AnsweredKeys: "[]", InputResponses: "{}", ClientCaps: "{}"}
	if err := a.Tasks().Update(ctx, func(ctx context.Context, tx tasks.Tx) error { return tx.InsertTask(ctx, row) }); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Lookup(ctx, "o", "t1"); err != nil || got.Version != 0 {
		t.Fatalf("first read: %+v %v", got, err)
	}
	pid := b.ListenerPID()
	if _, err := a.Pool.Exec(ctx, "SELECT pg_terminate_backend($1)", int32(pid)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the listener to see its connection gone", func() bool { return b.ListenerPID() != pid })
	if b.Fence().Fresh() && b.ListenerPID() == 0 {
		t.Fatal("fresh while not listening")
	}
	// A change while B may not be listening: its notification may be lost.
	setActive := tasks.Row{TaskID: "t1", Status: tasks.StatusInputRequired, InputRequests: "{}", PollInterval: time.Second, LastUpdatedAt: now}
	if err := a.Tasks().Update(ctx, func(ctx context.Context, tx tasks.Tx) error {
		_, err := tx.SetTaskActive(ctx, setActive)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the listener to reconnect and be fresh", func() bool { return connects.Load() >= 2 && b.Fence().Fresh() })
	eventually(t, "B to read the change", func() bool {
		got, err := store.Lookup(ctx, "o", "t1")
		return err == nil && got.Version == 1 && got.Status == tasks.StatusInputRequired
	})
	// From now on every read answers version 1 (never 0 again).
	for range 50 {
		if got, err := store.Lookup(ctx, "o", "t1"); err != nil || got.Version != 1 {
			t.Fatalf("after the change: %+v %v", got, err)
		}
	}
}
