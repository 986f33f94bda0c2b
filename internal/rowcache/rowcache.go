// Package rowcache is the read cache of rows that change and carry a
// version that only grows: the task store's task rows (tasks) and the
// PostgreSQL engine's generation rows (storage/postgres). Within one
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
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
)

// Config says how to read the rows a Cache holds.
type Config[T any] struct {
	// Switch is the cache's name in internal/caches (benchmarks turn it off).
	Switch caches.Cache
	// Max bounds the entries, and MaxBytes (with Size, when set) the
	// memory they hold; the cache is cleared when full, and a row larger
	// than MaxBytes/64 is not kept (it would push many small ones out).
	Max      int
	MaxBytes int
	Size     func(*T) int
	// IdleTTL drops an entry nobody read for that long (0: never), so
	// that the cache holds what is being polled now, not every row ever
	// read until its bound; Now is the clock (nil: time.Now).
	IdleTTL time.Duration
	Now     func() time.Time
	// Version is the row's version; Live reports whether it can still
	// change; Owner is who may read it (GetOwned).
	Version func(*T) int64
	Live    func(*T) bool
	Owner   func(*T) string
}

// PollIdle is the idle time after which the polling caches drop a row:
// far above any poll interval (at most 5 s) and the resync (2 s), so a
// row being polled or waited on never leaves for being idle.
const PollIdle = 2 * time.Minute

// Cache holds rows by id.
type Cache[T any] struct {
	cfg Config[T]
	mu  sync.Mutex
	m   map[string]*entry[T]
	// swept is when Put last dropped the idle entries.
	swept time.Time
	// Invalidations are counted per stripe of ids, and all counts the
	// ones that drop many: a read is not cached if its id's count moved
	// while it was in flight. Per stripe, because on a shared engine every
	// replica's changes arrive here: one count for all would let hardly
	// any read be cached under a fleet's stream of notifications.
	stripes [stripes]uint64
	all     uint64
	bytes   int // the entries' Size, when counted
	shared  bool
	fresh   func() bool
}

const stripes = 1024

var seed = maphash.MakeSeed()

func stripe(id string) int { return int(maphash.String(seed, id) % stripes) }

type entry[T any] struct {
	row  T
	seen time.Time // last put or read
}

// New makes an empty cache for one process.
func New[T any](cfg Config[T]) *Cache[T] {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Cache[T]{cfg: cfg, m: map[string]*entry[T]{}}
}

// Share says the engine is shared with other processes, whose changes
// reach this one only by notification: a live row is served only while
// fresh reports true (nil: never; terminal rows always).
func (c *Cache[T]) Share(fresh func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shared, c.fresh = true, fresh
}

// Shared reports whether Share was called.
func (c *Cache[T]) Shared() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shared
}

// Epoch is what Put compares: the invalidations that could concern one id.
type Epoch struct{ all, stripe uint64 }

// servable reports whether the cached v may answer now. Called with mu
// held.
func (c *Cache[T]) servable(v *T) bool {
	if !c.shared || !c.cfg.Live(v) {
		return true
	}
	return c.fresh != nil && c.fresh()
}

// Get returns a copy of the cached row id, whoever owns it.
func (c *Cache[T]) Get(id string) (T, bool) { return c.get("", id, false) }

// GetOwned is Get for owner's reads: another owner's entry is a miss, as
// if it were not there.
func (c *Cache[T]) GetOwned(owner, id string) (T, bool) { return c.get(owner, id, true) }

func (c *Cache[T]) get(owner, id string, owned bool) (T, bool) {
	var zero T
	if !caches.On(c.cfg.Switch) {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || (owned && c.cfg.Owner(&e.row) != owner) || !c.servable(&e.row) {
		return zero, false
	}
	if c.cfg.IdleTTL > 0 {
		e.seen = c.cfg.Now()
	}
	return e.row, true
}

// Epoch is taken before a read that may fill the cache.
func (c *Cache[T]) Epoch(id string) Epoch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Epoch{c.all, c.stripes[stripe(id)]}
}

// Put caches v (read after Epoch returned e) unless an invalidation of
// its id happened since, which could make v stale, or the entry already
// holds a higher version.
func (c *Cache[T]) Put(id string, v T, e Epoch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if (Epoch{c.all, c.stripes[stripe(id)]}) != e {
		return
	}
	now := c.cfg.Now()
	c.sweep(now)
	old, ok := c.m[id]
	if ok && c.cfg.Version(&old.row) > c.cfg.Version(&v) {
		return
	}
	if ok {
		c.drop(id, old) // replaced, or (too large to keep) at least not left behind
	}
	size := c.size(&v)
	if c.cfg.Size != nil && size > c.cfg.MaxBytes/64 {
		return
	}
	if len(c.m) >= c.cfg.Max || (c.cfg.Size != nil && c.bytes+size > c.cfg.MaxBytes) {
		clear(c.m)
		c.bytes = 0
	}
	c.m[id] = &entry[T]{row: v, seen: now}
	c.bytes += size
}

// sweep drops the entries idle past IdleTTL, at most every IdleTTL/4.
// Called with mu held.
func (c *Cache[T]) sweep(now time.Time) {
	if c.cfg.IdleTTL <= 0 || now.Sub(c.swept) < c.cfg.IdleTTL/4 {
		return
	}
	c.swept = now
	for id, e := range c.m {
		if now.Sub(e.seen) > c.cfg.IdleTTL {
			c.drop(id, e)
		}
	}
}

func (c *Cache[T]) size(v *T) int {
	if c.cfg.Size == nil {
		return 0
	}
	return c.cfg.Size(v)
}

// drop removes id's entry e. Called with mu held.
func (c *Cache[T]) drop(id string, e *entry[T]) {
	c.bytes -= c.size(&e.row)
	delete(c.m, id)
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
	e, ok := c.m[id]
	if !ok || (version >= 0 && c.cfg.Version(&e.row) >= version) {
		return
	}
	c.drop(id, e)
}

// FlushLive drops every live entry; terminal ones stay (they cannot
// change). Reads in flight are not cached.
func (c *Cache[T]) FlushLive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all++
	for id, e := range c.m {
		if c.cfg.Live(&e.row) {
			c.drop(id, e)
		}
	}
}

// Len is the number of entries and the bytes they hold (for tests).
func (c *Cache[T]) Len() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.bytes
}

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
	c.mu.Lock()
	var live []idVersion
	for id, e := range c.m {
		if c.cfg.Live(&e.row) {
			live = append(live, idVersion{id, c.cfg.Version(&e.row)})
		}
	}
	c.mu.Unlock()
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
