package tasks

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestSharedCache: two stores on one engine stand for two replicas, each
// told only of its own writes. A shared store never answers a live task
// from its cache, so a change committed elsewhere is seen at once (a task
// never goes backwards for a client moving between replicas); terminal
// tasks, which cannot change, are still cached. An unshared store (one
// process on SQLite) caches everything, as before.
func TestSharedCache(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       []StoreOption
		wantStatus Status // B's read after A's change, with B's cache warm
	}{
		{"shared", []StoreOption{Shared()}, StatusInputRequired},
		{"one process", nil, StatusWorking},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := OpenTestEngine(filepath.Join(t.TempDir(), "tasks.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			c := newClock()
			a, b := NewStore(d.Tasks(), c.Now, tc.opts...), NewStore(d.Tasks(), c.Now, tc.opts...)
			ctx := context.Background()
			task := mkTask(t, a, &Task{Owner: "alice", TTL: time.Hour})
			if got, err := b.Lookup(ctx, "alice", task.ID); err != nil || got.Status != StatusWorking {
				t.Fatalf("first read: %v %v", got, err)
			}
			err = a.Write(ctx, task.ID, func(ctx context.Context, tx Tx) error {
				_, err := a.SetActive(ctx, tx, task, StatusInputRequired, "")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := b.Lookup(ctx, "alice", task.ID); err != nil || got.Status != tc.wantStatus {
				t.Fatalf("after a change on the other store: %v %v, want %s", got.Status, err, tc.wantStatus)
			}
			if _, err := finish(a, task.ID, StatusCompleted, "", nil, nil); err != nil {
				t.Fatal(err)
			}
			b.Notify(task.ID) // the terminal state reached B (listener or resync)
			for range 2 {
				if got, err := b.Get(ctx, task.ID); err != nil || got.Status != StatusCompleted {
					t.Fatalf("terminal: %v %v", got, err)
				}
			}
			if hits, _ := b.CacheStats(); hits == 0 {
				t.Fatalf("terminal task never served from the cache")
			}
		})
	}
}

// TestSweepExclusive: with Exclusive the sweep runs only when the
// fleet-wide job lock is had; without it, always.
func TestSweepExclusive(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       []StoreOption
		wantStatus Status
	}{
		{"alone", nil, StatusFailed},
		{"lock had", []StoreOption{Exclusive(func(ctx context.Context, job string, run func(context.Context) error) error {
			if job != "tasks.sweep" {
				t.Errorf("job %q", job)
			}
			return run(ctx)
		})}, StatusFailed},
		{"another replica sweeps", []StoreOption{Exclusive(func(context.Context, string, func(context.Context) error) error {
			return nil
		})}, StatusWorking},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := OpenTestEngine(filepath.Join(t.TempDir(), "tasks.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			c := newClock()
			s := NewStore(d.Tasks(), c.Now, tc.opts...)
			task := mkTask(t, s, &Task{Owner: "alice", TTL: time.Minute})
			c.Advance(2 * time.Minute)
			if err := s.sweepOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(context.Background(), task.ID); err != nil || got.Status != tc.wantStatus {
				t.Fatalf("after the sweep: %v %v, want %s", got.Status, err, tc.wantStatus)
			}
		})
	}
}
