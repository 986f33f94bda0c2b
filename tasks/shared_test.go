package tasks

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// versioned is a backend that also reads many tasks' versions in one
// query, as PostgreSQL's does (VersionReader), counting its queries.
type versioned struct {
	Backend
	queries int
}

func (v *versioned) TaskVersions(ctx context.Context, ids []string) (map[string]int64, error) {
	v.queries++
	out := map[string]int64{}
	for _, id := range ids {
		if r, err := v.Task(ctx, id); err == nil {
			out[id] = r.Version
		}
	}
	return out, nil
}

// replicaPair opens two stores on one engine, standing for two replicas
// each told only of its own writes (no listener): a's writes reach b only
// when the test says so. fresh is b's fence.
func replicaPair(t *testing.T, opts ...StoreOption) (a, b *Store, bv *versioned) {
	t.Helper()
	d, err := OpenTestEngine(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	c := newClock()
	bv = &versioned{Backend: d.Tasks()}
	return NewStore(d.Tasks(), c.Now, opts...), NewStore(bv, c.Now, opts...), bv
}

func moveTo(t *testing.T, s *Store, task *Task, st Status) {
	t.Helper()
	err := s.Write(context.Background(), task.ID, func(ctx context.Context, tx Tx) error {
		_, err := s.SetActive(ctx, tx, task, st, "")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func lookup(t *testing.T, s *Store, id string) *Task {
	t.Helper()
	got, err := s.Lookup(context.Background(), "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSharedCache: B reads a live task (cached), then A changes it and B
// hears nothing yet. What B answers depends on its fence: fresh, the
// cached copy (the change may still be on its way, within the window);
// stale, the backend's row (read through). An unshared store (one process
// on SQLite) serves its cache, as before; shared with no fence, never a
// live task from the cache.
func TestSharedCache(t *testing.T) {
	fresh := func(v bool) func() bool { return func() bool { return v } }
	for _, tc := range []struct {
		name       string
		opts       []StoreOption
		wantStatus Status // B's read after A's change, with B's cache warm
		wantHit    bool
	}{
		{"shared, fence fresh", []StoreOption{Shared(fresh(true))}, StatusWorking, true},
		{"shared, fence stale: read through", []StoreOption{Shared(fresh(false))}, StatusInputRequired, false},
		{"shared, no fence: read through", []StoreOption{Shared(nil)}, StatusInputRequired, false},
		{"one process", nil, StatusWorking, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, _ := replicaPair(t, tc.opts...)
			task := mkTask(t, a, &Task{Owner: "alice", TTL: time.Hour})
			if got := lookup(t, b, task.ID); got.Status != StatusWorking || got.Version != 0 {
				t.Fatalf("first read: %s v%d", got.Status, got.Version)
			}
			moveTo(t, a, task, StatusInputRequired)
			hits0, _ := b.CacheStats()
			got, err := b.Get(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.wantStatus {
				t.Fatalf("after a change on the other store: %s, want %s", got.Status, tc.wantStatus)
			}
			if hits, _ := b.CacheStats(); (hits > hits0) != tc.wantHit {
				t.Fatalf("served from the cache: %v, want %v", hits > hits0, tc.wantHit)
			}
			b.NotifyVersion(task.ID, 1) // A's change reached B (its listener)
			if got := lookup(t, b, task.ID); got.Status != StatusInputRequired || got.Version != 1 {
				t.Fatalf("after the notification: %s v%d", got.Status, got.Version)
			}
			if _, err := finish(a, task.ID, StatusCompleted, "", nil, nil); err != nil {
				t.Fatal(err)
			}
			b.NotifyVersion(task.ID, 2)
			for range 2 {
				if got, err := b.Get(context.Background(), task.ID); err != nil || got.Status != StatusCompleted || got.Version != 2 {
					t.Fatalf("terminal: %v %v", got, err)
				}
			}
		})
	}
}

// TestSharedTerminalServedWhenStale: a terminal task cannot change, so it
// is served from the cache whatever the fence says.
func TestSharedTerminalServedWhenStale(t *testing.T) {
	a, b, _ := replicaPair(t, Shared(func() bool { return false }))
	task := mkTask(t, a, &Task{Owner: "alice", TTL: time.Hour})
	if _, err := finish(a, task.ID, StatusCompleted, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	lookup(t, b, task.ID)
	h0, _ := b.CacheStats()
	if _, err := b.Get(context.Background(), task.ID); err != nil {
		t.Fatal(err)
	}
	if h, _ := b.CacheStats(); h == h0 {
		t.Fatal("terminal task not served from the cache")
	}
}

// TestFlushLiveAndRevalidate: a listener that reconnected flushes every
// live entry (terminal ones stay); the resync re-reads the cached live
// tasks' versions in one query and drops those whose row moved on or is
// gone, keeping the rest.
func TestFlushLiveAndRevalidate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		act         func(b *Store) error
		wantCached  map[string]bool // by task name
		wantQueries int
	}{
		{"reconnect flush", func(b *Store) error { b.FlushLive(); return nil },
			map[string]bool{"unchanged": false, "changed": false, "terminal": true}, 0},
		{"resync", func(b *Store) error { return b.Revalidate(context.Background()) },
			map[string]bool{"unchanged": true, "changed": false, "terminal": true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, bv := replicaPair(t, Shared(func() bool { return true }))
			byName := map[string]*Task{}
			for _, n := range []string{"unchanged", "changed", "terminal"} {
				byName[n] = mkTask(t, a, &Task{Owner: "alice", TTL: time.Hour})
			}
			if _, err := finish(a, byName["terminal"].ID, StatusCompleted, "", nil, nil); err != nil {
				t.Fatal(err)
			}
			for _, task := range byName {
				lookup(t, b, task.ID)
			}
			moveTo(t, a, byName["changed"], StatusInputRequired) // its notification lost
			if err := tc.act(b); err != nil {
				t.Fatal(err)
			}
			if bv.queries != tc.wantQueries {
				t.Fatalf("%d version queries, want %d", bv.queries, tc.wantQueries)
			}
			for n, want := range tc.wantCached {
				_, cached := b.cache.Get(byName[n].ID)
				if cached != want {
					t.Errorf("%s cached: %v, want %v", n, cached, want)
				}
			}
			if got := lookup(t, b, byName["changed"].ID); got.Status != StatusInputRequired {
				t.Fatalf("changed task after %s: %s", tc.name, got.Status)
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
