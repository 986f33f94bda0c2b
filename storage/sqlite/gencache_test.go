package sqlite

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
)

// direct reads a generation past the cache.
func direct(t *testing.T, d *DB, id string) generation.Row {
	t.Helper()
	r, err := read.Generation(d.Queries.GetGeneration(context.Background(), id))
	if err != nil {
		t.Fatalf("direct read of %s: %v", id, err)
	}
	return r
}

// seed inserts generation id of owner and runs setup on it (a SET clause).
func seed(t *testing.T, d *DB, id, owner, setup string) {
	t.Helper()
	p := genRow(id)
	p.Owner = owner
	if err := d.Write(context.Background(), func(ctx context.Context, tx *Tx) error {
		if err := tx.q.InsertGeneration(ctx, p); err != nil {
			return err
		}
		if setup == "" {
			return nil
		}
		_, err := tx.Exec(ctx, "UPDATE generations SET "+setup+" WHERE id = ?", id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// warm reads id through the store until it is cached.
func warm(t *testing.T, d *DB, id, owner string) generation.Row {
	t.Helper()
	s := d.Generations()
	r, err := s.OwnedGeneration(context.Background(), owner, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := d.cache.lookup(id); !ok {
		t.Fatalf("%s is not cached after a read", id)
	}
	return r
}

// checkCached fails unless both cached reads of id answer what the
// database holds.
func checkCached(t *testing.T, d *DB, id, owner string) generation.Row {
	t.Helper()
	want := direct(t, d, id)
	s := d.Generations()
	got, err := s.Generation(context.Background(), id)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Generation(%s) = %+v, %v\nthe database holds %+v", id, got, err, want)
	}
	got, err = s.OwnedGeneration(context.Background(), owner, id)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("OwnedGeneration(%s) = %+v, %v\nthe database holds %+v", id, got, err, want)
	}
	return want
}

type writeCase struct {
	setup string // SET clause that puts the row where the write changes it
	write func(ctx context.Context, tx *Tx, id, owner string) error
}

// writeCases has a case for every write method of Tx that changes a
// generation row; Apply has one per lifecycle event.
func writeCases() map[string]writeCase {
	at := time.UnixMilli(2000)
	cases := map[string]writeCase{
		"Claim": {"next_check_at = 1000, lease_until = 0", func(ctx context.Context, tx *Tx, _, _ string) error {
			_, ok, err := tx.Claim(ctx, "r", time.UnixMilli(9000), at)
			if err == nil && !ok {
				err = errors.New("nothing claimed")
			}
			return err
		}},
		"Reschedule": {"lease_owner = 'r', lease_until = 9000, next_check_at = 1000", func(ctx context.Context, tx *Tx, id, _ string) error {
			return tx.Reschedule(ctx, id, "r", time.UnixMilli(7000), at, false)
		}},
		"WakeNow": {"next_check_at = 9000", func(ctx context.Context, tx *Tx, id, _ string) error {
			return tx.WakeNow(ctx, id, at)
		}},
		"WakeOwnerQueued": {"next_check_at = 9000", func(ctx context.Context, tx *Tx, _, owner string) error {
			return tx.WakeOwnerQueued(ctx, owner, at)
		}},
		"MarkCancelSent": {"cancel_requested = 1", func(ctx context.Context, tx *Tx, id, _ string) error {
			return tx.MarkCancelSent(ctx, id)
		}},
		"ResetSubmitting": {"submit_state = 'submitting'", func(ctx context.Context, tx *Tx, id, _ string) error {
			return tx.ResetSubmitting(ctx, id)
		}},
		"MarkOutputsExpired": {"status = 'completed'", func(ctx context.Context, tx *Tx, id, _ string) error {
			ok, err := tx.MarkOutputsExpired(ctx, id)
			if err == nil && !ok {
				err = errors.New("nothing expired")
			}
			return err
		}},
		"ReleaseLeases": {"lease_owner = 'r', lease_until = 9000", func(ctx context.Context, tx *Tx, _, _ string) error {
			return tx.ReleaseLeases(ctx)
		}},
		"RenewLease": {"lease_owner = 'r', lease_until = 9000, attempts = 3", func(ctx context.Context, tx *Tx, id, _ string) error {
			ok, err := tx.RenewLease(ctx, id, "r", 3, time.UnixMilli(12000))
			if err == nil && !ok {
				err = errors.New("nothing renewed")
			}
			return err
		}},
		"ReleaseRunnerLeases": {"lease_owner = 'r', lease_until = 9000", func(ctx context.Context, tx *Tx, _, _ string) error {
			return tx.ReleaseRunnerLeases(ctx, "r")
		}},
		"Exec": {"", func(ctx context.Context, tx *Tx, id, _ string) error {
			_, err := tx.Exec(ctx, "UPDATE generations SET prompt = 'raw' WHERE id = ?", id)
			return err
		}},
	}
	for _, ev := range generation.Events() {
		from := generation.Sources(ev)
		set := "status = '" + string(from[0]) + "'"
		if ev == generation.EventSubmitted {
			set += ", submit_state = 'submitting'" // only a submit in progress takes a job
		}
		cases["Apply/"+string(ev)] = writeCase{set, func(ctx context.Context, tx *Tx, id, _ string) error {
			ok, err := tx.Apply(ctx, generation.Change{
				ID: id, Event: ev, From: from, To: generation.Targets(ev)[0], At: at,
				Message: "changed", Progress: 0.5, Params: `{"x":1}`, Outputs: `[{"k":"o"}]`,
				ErrorKind: "provider", ErrorMessage: "boom", Job: `{"j":1}`, JobID: "job-" + id,
			})
			if err == nil && !ok {
				err = fmt.Errorf("%s changed nothing", ev)
			}
			return err
		}}
	}
	return cases
}

// readsOrOtherTables are the Tx methods that change no generation row.
var readsOrOtherTables = []string{
	"Generation", "GenerationByKey", "SpentSince", "SpentAndKey", "CountInFlight", "LockOwner",
	"TakeCreateToken", "PruneCreateBuckets", "InsertDelivery", "LastPendingDelivery", "ConsumeDeliveries", "PurgeDeliveries",
	"Task", "TaskByRef", "InsertTask", "FinishTask", "SetTaskActive", "SetTaskAnswers", "PurgeTasks",
	"PutLivePreview", "LivePreviewFrames", "DeleteLivePreview", "LivePreview", // live_previews (migration 0016)
}

// TestCacheReadAfterEveryWrite: after each write method of Tx commits, a
// cached read answers the written row. A new Tx method must be added to
// writeCases or readsOrOtherTables.
func TestCacheReadAfterEveryWrite(t *testing.T) {
	cases := writeCases()
	cases["InsertGeneration"] = writeCase{} // below: there is no row to warm
	cases["DeleteGeneration"] = writeCase{} // below: there is no row after
	typ := reflect.TypeFor[*Tx]()
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		_, isWrite := cases[name]
		if !isWrite && name == "Apply" {
			isWrite = true
		}
		if !isWrite && !slices.Contains(readsOrOtherTables, name) {
			t.Errorf("Tx.%s is in neither writeCases nor readsOrOtherTables", name)
		}
	}
	delete(cases, "InsertGeneration")
	delete(cases, "DeleteGeneration")

	d, _ := openDB(t)
	ctx := context.Background()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			id, owner := "gen-"+name, "owner-"+name
			seed(t, d, id, owner, c.setup)
			before := warm(t, d, id, owner)
			if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error { return c.write(ctx, tx, id, owner) }); err != nil {
				t.Fatal(err)
			}
			if after := checkCached(t, d, id, owner); reflect.DeepEqual(after, before) {
				t.Fatal("the write changed nothing; the case tests nothing")
			}
		})
	}

	t.Run("InsertGeneration", func(t *testing.T) {
		s := d.Generations()
		if _, err := s.OwnedGeneration(ctx, "alice", "fresh"); !errors.Is(err, generation.ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		row := generation.Row{ID: "fresh", Owner: "alice", ModelID: "m", Provider: "local", Kind: "image",
			Params: "{}", Status: generation.StatusQueued, CreatedAt: time.UnixMilli(1), UpdatedAt: time.UnixMilli(1)}
		if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error { return tx.InsertGeneration(ctx, row) }); err != nil {
			t.Fatal(err)
		}
		checkCached(t, d, "fresh", "alice")
	})

	t.Run("DeleteGeneration", func(t *testing.T) {
		seed(t, d, "ended", "alice", "status = 'failed'")
		warm(t, d, "ended", "alice")
		if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error {
			ok, err := tx.DeleteGeneration(ctx, "ended")
			if err == nil && !ok {
				err = errors.New("nothing deleted")
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		s := d.Generations()
		if _, err := s.Generation(ctx, "ended"); !errors.Is(err, generation.ErrNotFound) {
			t.Fatalf("Generation after the delete: %v", err)
		}
		if _, err := s.OwnedGeneration(ctx, "alice", "ended"); !errors.Is(err, generation.ErrNotFound) {
			t.Fatalf("OwnedGeneration after the delete: %v", err)
		}
	})
}

// TestCacheRolledBackWriteInvisible: a write that fails leaves the cached
// row as the database has it (the old one).
func TestCacheRolledBackWriteInvisible(t *testing.T) {
	d, _ := openDB(t)
	seed(t, d, "g", "alice", "")
	before := warm(t, d, "g", "alice")
	boom := errors.New("boom")
	err := d.Write(context.Background(), func(ctx context.Context, tx *Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE generations SET prompt = 'lost' WHERE id = 'g'"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v", err)
	}
	if got := checkCached(t, d, "g", "alice"); !reflect.DeepEqual(got, before) {
		t.Fatalf("after a rollback the row is %+v", got)
	}
}

// TestCacheOwnerChecked: a cached row answers only its owner; anyone else
// gets what an unknown id gets.
func TestCacheOwnerChecked(t *testing.T) {
	d, _ := openDB(t)
	seed(t, d, "g", "alice", "")
	warm(t, d, "g", "alice")
	s := d.Generations()
	for _, tc := range []struct{ owner, id string }{{"mallory", "g"}, {"alice", "unknown"}, {"", "g"}, {"ALICE", "g"}} {
		r, err := s.OwnedGeneration(context.Background(), tc.owner, tc.id)
		if !errors.Is(err, generation.ErrNotFound) || !reflect.DeepEqual(r, generation.Row{}) {
			t.Errorf("OwnedGeneration(%q, %q) = %+v, %v; want ErrNotFound", tc.owner, tc.id, r, err)
		}
	}
	// A foreign read that misses leaves nothing the foreigner can see.
	seed(t, d, "h", "alice", "")
	if _, err := s.OwnedGeneration(context.Background(), "mallory", "h"); !errors.Is(err, generation.ErrNotFound) {
		t.Fatalf("foreign miss: %v", err)
	}
	if _, err := s.OwnedGeneration(context.Background(), "mallory", "h"); !errors.Is(err, generation.ErrNotFound) {
		t.Fatalf("foreign hit: %v", err)
	}
}

// TestCacheRacingReadNotStored: a read that got the row before a write
// committed does not store it after the write's invalidation.
func TestCacheRacingReadNotStored(t *testing.T) {
	d, _ := openDB(t)
	seed(t, d, "g", "alice", "")
	var once sync.Once
	d.cache.afterRead = func(id string) {
		once.Do(func() {
			if err := d.Write(context.Background(), func(ctx context.Context, tx *Tx) error {
				_, err := tx.Exec(ctx, "UPDATE generations SET prompt = 'new' WHERE id = ?", id)
				return err
			}); err != nil {
				t.Error(err)
			}
		})
	}
	r, err := d.Generations().Generation(context.Background(), "g")
	if err != nil || r.Prompt == "new" {
		t.Fatalf("the racing read got %q, %v; want the old row", r.Prompt, err)
	}
	d.cache.afterRead = nil
	if got := checkCached(t, d, "g", "alice"); got.Prompt != "new" {
		t.Fatalf("prompt %q", got.Prompt)
	}
}

// TestCacheConcurrentNeverStale: readers fill the cache while a writer
// changes the row; after each write returns, every read sees it or a
// later one.
func TestCacheConcurrentNeverStale(t *testing.T) {
	d, _ := openDB(t)
	seed(t, d, "g", "alice", "progress = 0")
	s := d.Generations()
	ctx := context.Background()
	var written atomic.Int64 // the newest progress whose write returned
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				floor := written.Load()
				r, err := s.OwnedGeneration(ctx, "alice", "g")
				if err != nil {
					t.Error(err)
					return
				}
				if int64(r.Progress) < floor {
					t.Errorf("read progress %v after write %d returned", r.Progress, floor)
					return
				}
			}
		})
	}
	for i := int64(1); i <= 300 && !t.Failed(); i++ {
		if err := d.Write(ctx, func(ctx context.Context, tx *Tx) error {
			_, err := tx.Exec(ctx, "UPDATE generations SET progress = ? WHERE id = 'g'", i)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		written.Store(i)
		if r, _ := s.Generation(ctx, "g"); int64(r.Progress) != i {
			t.Fatalf("write %d returned, the cache answers %v", i, r.Progress)
		}
	}
	stop.Store(true)
	wg.Wait()
	checkCached(t, d, "g", "alice")
}

// TestCacheBounded: the cache keeps at most its entries and bytes.
func TestCacheBounded(t *testing.T) {
	d, _ := openDB(t)
	const maxBytes = 64 * (320 + 200)
	d.cache.rows = newGenRows(8, maxBytes)
	for i := range 40 {
		id := fmt.Sprintf("g%02d", i)
		seed(t, d, id, "alice", "")
		checkCached(t, d, id, "alice")
		if n, b := d.cache.rows.Len(); n > 8 || b > maxBytes {
			t.Fatalf("after %d rows: %d entries, %d bytes", i+1, n, b)
		}
	}
	// A row too large for its share is answered, not kept.
	seed(t, d, "big", "alice", "prompt = printf('%.*c', 4000, 'x')")
	checkCached(t, d, "big", "alice")
	if _, ok, _ := d.cache.lookup("big"); ok {
		t.Fatal("an oversized row was cached")
	}
}

// TestCacheIDColumn: the pre-update hook reads the id as column 0.
func TestCacheIDColumn(t *testing.T) {
	d, _ := openDB(t)
	var name string
	if err := d.Read.QueryRow("SELECT name FROM pragma_table_info('generations') WHERE cid = 0").Scan(&name); err != nil || name != "id" {
		t.Fatalf("column 0 of generations is %q (%v)", name, err)
	}
}
