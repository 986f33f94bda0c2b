package rowcache

import (
	"context"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
)

type row struct {
	owner   string
	live    bool
	version int64
}

func newCache(max int) *Cache[row] {
	return New(Config[row]{
		Cache: caches.TaskRows, Entries: max,
		Version: func(r *row) int64 { return r.version },
		Live:    func(r *row) bool { return r.live },
		Owner:   func(r *row) string { return r.owner },
	})
}

// shared is a cache on a shared engine whose fence is fresh.
func shared() *Cache[row] {
	c := newCache(100)
	c.Share(func() bool { return true })
	return c
}

// TestVersionRule: a cached entry is replaced only by a higher version,
// and a notification drops only an entry older than the version it names
// (or any, when it names none).
func TestVersionRule(t *testing.T) {
	at := func(v int64, live bool) *row { return &row{owner: "alice", live: live, version: v} }
	for _, tc := range []struct {
		name    string
		cached  *row
		put     *row   // then put (nil: none)
		notify  *int64 // then a notification at this version (nil: none)
		want    int64  // the cached version after; -1: no entry
		wantHit bool
	}{
		{"higher replaces lower", at(1, true), at(2, true), nil, 2, true},
		{"lower never replaces higher", at(3, true), at(2, true), nil, 3, true},
		{"equal replaces", at(2, true), at(2, true), nil, 2, true},
		{"notification of an older version keeps the entry", at(3, true), nil, ptr(int64(2)), 3, true},
		{"notification of the same version keeps the entry", at(3, true), nil, ptr(int64(3)), 3, true},
		{"notification of a newer version drops it", at(3, true), nil, ptr(int64(4)), -1, false},
		{"notification without a version drops it", at(3, true), nil, ptr(int64(-1)), -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := shared()
			c.Put("t1", *tc.cached, c.Epoch("t1"))
			if tc.put != nil {
				c.Put("t1", *tc.put, c.Epoch("t1"))
			}
			if tc.notify != nil {
				c.InvalidateBelow("t1", *tc.notify)
			}
			got, ok := c.GetOwned("alice", "t1")
			if ok != tc.wantHit || (ok && got.version != tc.want) {
				t.Fatalf("got %v (hit %v), want v%d (hit %v)", got, ok, tc.want, tc.wantHit)
			}
		})
	}
	t.Run("a read that raced a notification is not cached", func(t *testing.T) {
		c := shared()
		seq := c.Epoch("t1")
		c.InvalidateBelow("t1", 5) // heard while the read was in flight
		c.Put("t1", *at(4, true), seq)
		if _, ok := c.Get("t1"); ok {
			t.Fatal("a read older than the notification was cached")
		}
	})
	t.Run("a read that raced another task's notification is cached", func(t *testing.T) {
		c := shared()
		other := "t2"
		for stripe(other) == stripe("t1") {
			other += "x"
		}
		seq := c.Epoch("t1")
		c.InvalidateBelow(other, 5) // another replica's change, heard meanwhile
		c.Put("t1", *at(4, true), seq)
		if _, ok := c.Get("t1"); !ok {
			t.Fatal("a change of another task kept this read out of the cache")
		}
	})
	t.Run("a read that raced a reconnect's flush is not cached", func(t *testing.T) {
		c := shared()
		seq := c.Epoch("t1")
		c.FlushLive()
		c.Put("t1", *at(4, true), seq)
		if _, ok := c.Get("t1"); ok {
			t.Fatal("a read from before the flush was cached")
		}
	})
}

func ptr[T any](v T) *T { return &v }

// TestServable: on a shared engine a live row is served only while the
// fence is fresh, a terminal one always; on one process every row; an
// owner's read never answers another owner's row.
func TestServable(t *testing.T) {
	fresh := true
	for _, tc := range []struct {
		name             string
		shared, live     bool
		fresh            bool
		owner            string
		wantGet, wantOwn bool
	}{
		{"one process, live", false, true, false, "alice", true, true},
		{"shared, live, fresh", true, true, true, "alice", true, true},
		{"shared, live, stale", true, true, false, "alice", false, false},
		{"shared, terminal, stale", true, false, false, "alice", true, true},
		{"another owner", false, true, true, "bob", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCache(100)
			if tc.shared {
				c.Share(func() bool { return fresh })
			}
			c.Put("r", row{owner: "alice", live: tc.live, version: 1}, c.Epoch("r"))
			fresh = tc.fresh
			defer func() { fresh = true }()
			if _, ok := c.Get("r"); ok != tc.wantGet {
				t.Errorf("Get: %v, want %v", ok, tc.wantGet)
			}
			if _, ok := c.GetOwned(tc.owner, "r"); ok != tc.wantOwn {
				t.Errorf("GetOwned(%s): %v, want %v", tc.owner, ok, tc.wantOwn)
			}
		})
	}
	t.Run("switched off", func(t *testing.T) {
		c := newCache(100)
		c.Put("r", row{owner: "alice", version: 1}, c.Epoch("r"))
		defer caches.Disable(caches.TaskRows)()
		if _, ok := c.Get("r"); ok {
			t.Fatal("a disabled cache answered")
		}
	})
}

// TestFlushLiveRevalidateAndBound: a flush drops live entries only; a
// revalidation reads the live entries' versions in one query and drops
// those that moved on or are gone; a full cache keeps its bound.
func TestFlushLiveRevalidateAndBound(t *testing.T) {
	fill := func(c *Cache[row]) {
		for id, r := range map[string]row{"same": {live: true, version: 2}, "moved": {live: true, version: 2},
			"gone": {live: true, version: 2}, "done": {version: 5}} {
			c.Put(id, r, c.Epoch(id))
		}
	}
	c := shared()
	fill(c)
	c.FlushLive()
	if _, ok := c.Get("done"); !ok {
		t.Fatal("FlushLive dropped a terminal entry")
	}
	if n, _ := c.Len(); n != 1 {
		t.Fatalf("after FlushLive: %d entries, want the terminal one", n)
	}
	fill(c)
	queries := 0
	err := c.Revalidate(context.Background(), func(_ context.Context, ids []string) (map[string]int64, error) {
		queries++
		if len(ids) != 3 {
			t.Errorf("revalidated %v: only the live entries are read", ids)
		}
		return map[string]int64{"same": 2, "moved": 3}, nil
	})
	if err != nil || queries != 1 {
		t.Fatalf("Revalidate: %v, %d queries", err, queries)
	}
	for id, want := range map[string]bool{"same": true, "moved": false, "gone": false, "done": true} {
		if _, ok := c.Get(id); ok != want {
			t.Errorf("%s cached %v, want %v", id, ok, want)
		}
	}
	one := newCache(100)
	if err := one.Revalidate(context.Background(), nil); err != nil {
		t.Fatalf("one process: %v", err) // reads nothing
	}
	small := newCache(2)
	for _, id := range []string{"a", "b", "c"} {
		small.Put(id, row{version: 1}, small.Epoch(id))
	}
	if n, _ := small.Len(); n != 2 {
		t.Fatalf("a full cache of 2 holds %d after a third put", n)
	}
}

// TestBytesBound: with Size, the entries' bytes stay under the bound, a
// replaced or dropped entry gives its bytes back, and a row over a 64th
// of the bound is not kept.
func TestBytesBound(t *testing.T) {
	type blob struct {
		version int64
		n       int
	}
	c := New(Config[blob]{Cache: caches.GenerationRows, Entries: 1000, Bytes: 6400,
		Version: func(b *blob) int64 { return b.version }, Live: func(*blob) bool { return true },
		Owner: func(*blob) string { return "" }, Size: func(b *blob) int { return b.n }})
	c.Put("big", blob{1, 101}, c.Epoch("big"))
	if n, _ := c.Len(); n != 0 {
		t.Fatal("a row over Bytes/64 was kept")
	}
	c.Put("grows", blob{1, 10}, c.Epoch("grows"))
	c.Put("grows", blob{2, 101}, c.Epoch("grows"))
	if _, ok := c.Get("grows"); ok {
		t.Fatal("a row that grew too large to keep left its older version behind")
	}
	for i := range 200 {
		id := string(rune('a'+i%26)) + string(rune('a'+i/26))
		c.Put(id, blob{1, 100}, c.Epoch(id))
		if _, b := c.Len(); b > 6400 {
			t.Fatalf("after %d puts: %d bytes held, bound 6400", i+1, b)
		}
	}
	c.Put("x", blob{1, 100}, c.Epoch("x"))
	_, before := c.Len()
	c.Put("x", blob{2, 50}, c.Epoch("x"))
	if _, after := c.Len(); after != before-50 {
		t.Fatalf("replacing a 100-byte row by a 50-byte one: %d → %d bytes", before, after)
	}
	c.Invalidate("x")
	if _, after := c.Len(); after != before-100 {
		t.Fatalf("dropping it: %d → %d bytes", before, after)
	}
}

// TestIdleTTL: an entry nobody read for its cache's Idle leaves at the
// next put after it; one that is read stays.
func TestIdleTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(Config[row]{Cache: caches.TaskRows, Now: func() time.Time { return now },
		Version: func(r *row) int64 { return r.version }, Live: func(r *row) bool { return r.live },
		Owner: func(r *row) string { return r.owner }})
	for _, id := range []string{"polled", "forgotten"} {
		c.Put(id, row{owner: "alice", version: 1}, c.Epoch(id))
	}
	step := caches.TaskRows.Spec().Idle / 3
	for range 4 {
		now = now.Add(step)
		if _, ok := c.Get("polled"); !ok {
			t.Fatal("a polled entry left")
		}
	}
	c.Put("new", row{version: 1}, c.Epoch("new"))
	if _, ok := c.Get("forgotten"); ok {
		t.Fatal("an entry idle for 4/3 of its Idle stayed")
	}
	if n, _ := c.Len(); n != 2 {
		t.Fatalf("%d entries, want the polled one and the new one", n)
	}
}
