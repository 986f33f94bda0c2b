// Package rowcache is the read cache of rows that change and carry a
// version that only grows: the task store's task rows (tasks) and both
// engines' generation rows (storage/sqlite, storage/postgres), kept in a
// caches.Bounded (bounded as internal/caches lists them). Within one
// process the writer invalidates an entry after each committed change;
// on a shared engine (Share) other replicas' changes arrive by
// notification, and the cache keeps its rows without ever answering one
// older than what a client may already have seen:
//   - an entry is replaced only by a row of equal or higher version (Put);
//   - a notification drops an entry only if it is older than the version
//     it names (InvalidateBelow), a local commit always (Invalidate);
//   - a read that raced an invalidation of its id (counted per stripe of
//     ids) or a flush is not cached;
//   - a live row is served only while fresh() holds (the listener's fence:
//     every change committed more than the fence window ago has been
//     heard); a terminal row, which can no longer change, always;
//   - FlushLive drops every live entry (a listener that reconnected may
//     have lost notifications), Revalidate every entry whose row moved on.
package rowcache

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
)

// Config says how to read the rows a Cache holds.
type Config[T any] struct {
	// Cache is which cache it is in internal/caches: its bounds (a row
	// larger than a 64th of the bytes is not kept) and its switch.
	Cache caches.Cache
	// Size is what a row holds, in bytes (nil: 0); Now is the clock (nil:
	// time.Now); Entries and Bytes replace the Spec's bounds (tests).
	Size           func(*T) int
	Now            func() time.Time
	Entries, Bytes int
	// Version is the row's version; Live reports whether it can still
	// change; Owner is who may read it (GetOwned).
	Version func(*T) int64
	Live    func(*T) bool
	Owner   func(*T) string
}

// Cache holds rows by id, in a caches.Bounded.
type Cache[T any] struct {
	cfg Config[T]
	b   *caches.Bounded[string, T]
	// mu orders Put's version check and the invalidations.
	mu sync.Mutex
	// Invalidations are counted per stripe of ids, and all counts the
	// ones that drop many: a read is not cached if its id's count moved
	// while it was in flight. Per stripe, because on a shared engine every
	// replica's changes arrive here: one count for all would let hardly
	// any read be cached under a fleet's stream of notifications.
	stripes [stripes]uint64
	all     uint64
	shared  atomic.Bool
	fresh   atomic.Pointer[func() bool]
}

const stripes = 1024

var seed = maphash.MakeSeed()

func stripe(id string) int { return int(maphash.String(seed, id) % stripes) }

// New makes an empty cache for one process.
func New[T any](cfg Config[T]) *Cache[T] {
	o := caches.Options[string, T]{Now: cfg.Now, Entries: cfg.Entries, Bytes: cfg.Bytes}
	if cfg.Size != nil {
		o.Size = func(_ string, v T) int { return cfg.Size(&v) }
	}
	return &Cache[T]{cfg: cfg, b: caches.New(cfg.Cache, o)}
}

// Share says the engine is shared with other processes, whose changes
// reach this one only by notification: a live row is served only while
// fresh reports true (nil: never; terminal rows always).
func (c *Cache[T]) Share(fresh func() bool) {
	c.fresh.Store(&fresh)
	c.shared.Store(true)
}

// Shared reports whether Share was called.
func (c *Cache[T]) Shared() bool { return c.shared.Load() }

// Epoch is what Put compares: the invalidations that could concern one id.
type Epoch struct{ all, stripe uint64 }

// servable reports whether the cached v may answer now.
func (c *Cache[T]) servable(v *T) bool {
	if !c.shared.Load() || !c.cfg.Live(v) {
		return true
	}
	fresh := c.fresh.Load()
	return fresh != nil && *fresh != nil && (*fresh)()
}

// Get returns a copy of the cached row id, whoever owns it.
func (c *Cache[T]) Get(id string) (T, bool) { return c.get("", id, false) }

// GetOwned is Get for owner's reads: another owner's entry is a miss, as
// if it were not there.
func (c *Cache[T]) GetOwned(owner, id string) (T, bool) { return c.get(owner, id, true) }

func (c *Cache[T]) get(owner, id string, owned bool) (T, bool) {
	var zero T
	v, ok := c.b.Get(id)
	if !ok || (owned && c.cfg.Owner(&v) != owner) || !c.servable(&v) {
		return zero, false
	}
	return v, true
}

// Epoch is taken before a read that may fill the cache.
func (c *Cache[T]) Epoch(id string) Epoch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Epoch{c.all, c.stripes[stripe(id)]}
}

// Put caches v (read after Epoch returned e) unless an invalidation of
// its id happened since, which could make v stale, or the entry already
// holds a higher version. A row too large to keep leaves no older
// version behind.
func (c *Cache[T]) Put(id string, v T, e Epoch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if (Epoch{c.all, c.stripes[stripe(id)]}) != e {
		return
	}
	if old, ok := c.b.Peek(id); ok && c.cfg.Version(&old) > c.cfg.Version(&v) {
		return
	}
	c.b.Put(id, v)
}

// Invalidate drops id's entry: after a change this process committed (or
// one whose version is unknown).
func (c *Cache[T]) Invalidate(id string) { c.InvalidateBelow(id, -1) }

// InvalidateBelow drops id's entry unless it is at version or above
// (version < 0: unknown, always drops). A read in flight is not cached
// either way: it may have read the row before the change.
func (c *Cache[T]) InvalidateBelow(id string, version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stripes[stripe(id)]++
	if v, ok := c.b.Peek(id); ok && (version < 0 || c.cfg.Version(&v) < version) {
		c.b.Delete(id)
	}
}

// FlushLive drops every live entry; terminal ones stay (they cannot
// change). Reads in flight are not cached.
func (c *Cache[T]) FlushLive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all++
	c.b.DeleteFunc(func(_ string, v T) bool { return c.cfg.Live(&v) })
}

// Flush drops every entry (a change to rows it cannot name). Reads in
// flight are not cached.
func (c *Cache[T]) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all++
	c.b.Clear()
}

// Len is the number of entries and the bytes they hold (for tests).
func (c *Cache[T]) Len() (entries, bytes int) { return c.b.Len() }

// Versions reads the current versions of the given rows in one query;
// a row that is gone is absent from the answer.
type Versions func(ctx context.Context, ids []string) (map[string]int64, error)

// revalidateBatch bounds the ids of one Versions query.
const revalidateBatch = 10_000

// Revalidate reads the versions of the cached live rows (one query per
// 10,000) and drops each entry whose row has moved on or is gone: on a
// shared engine it bounds what a notification lost without a reconnect
// costs, by the interval it runs at. It does nothing unless Shared.
func (c *Cache[T]) Revalidate(ctx context.Context, read Versions) error {
	if !c.Shared() {
		return nil
	}
	type idVersion struct {
		id      string
		version int64
	}
	var live []idVersion
	c.b.Range(func(id string, v T) bool {
		if c.cfg.Live(&v) {
			live = append(live, idVersion{id, c.cfg.Version(&v)})
		}
		return true
	})
	for len(live) > 0 {
		batch := live[:min(len(live), revalidateBatch)]
		live = live[len(batch):]
		ids := make([]string, len(batch))
		for i, e := range batch {
			ids[i] = e.id
		}
		got, err := read(ctx, ids)
		if err != nil {
			return err
		}
		for _, e := range batch {
			if v, ok := got[e.id]; !ok {
				c.Invalidate(e.id) // gone
			} else if v > e.version {
				c.InvalidateBelow(e.id, v)
			}
		}
	}
	return nil
}
