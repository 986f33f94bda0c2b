package caches

import (
	"sync"
	"time"
)

// Bounded is darkroom's one cache type: a map under one mutex, bounded by
// entries, bytes and idle time (its Spec's), least recently used out
// first. Order by last use serves all three bounds at once: the entry at
// the back is both the one to evict when full and the one idle longest,
// so a Put drops the idle ones from the back at O(1) each, with no sweep.
// It is safe for concurrent use.
type Bounded[K comparable, V any] struct {
	c       Cache
	entries int
	bytes   int
	idle    time.Duration
	size    func(K, V) int
	now     func() time.Time

	mu   sync.Mutex
	m    map[K]*node[K, V]
	ring node[K, V] // ring.next: most recently used; ring.prev: least
	held int        // bytes held, as size counts them
}

type node[K comparable, V any] struct {
	k          K
	v          V
	size       int
	seen       time.Time // last Put or Get
	prev, next *node[K, V]
}

// Options are a Bounded's parts that are not in its Spec.
type Options[K comparable, V any] struct {
	// Size is what an entry holds, in bytes (nil: 0); the Spec's Bytes
	// bound counts it.
	Size func(K, V) int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Entries and Bytes replace the Spec's bounds when not 0: for tests
	// that fill a cache.
	Entries, Bytes int
}

// New builds c's cache, bounded as its Spec says.
func New[K comparable, V any](c Cache, o Options[K, V]) *Bounded[K, V] {
	s := specs[c]
	b := &Bounded[K, V]{c: c, entries: s.Entries, bytes: s.Bytes, idle: s.Idle, size: o.Size, now: o.Now, m: map[K]*node[K, V]{}}
	if o.Entries != 0 {
		b.entries = o.Entries
	}
	if o.Bytes != 0 {
		b.bytes = o.Bytes
	}
	if b.now == nil {
		b.now = time.Now
	}
	b.ring.next, b.ring.prev = &b.ring, &b.ring
	made[c].Add(1)
	return b
}

// Cache is which cache b is.
func (b *Bounded[K, V]) Cache() Cache { return b.c }

// Get returns k's value and marks it used; a miss while the cache is
// switched off (On).
func (b *Bounded[K, V]) Get(k K) (V, bool) {
	var zero V
	if !On(b.c) {
		return zero, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.m[k]
	if !ok {
		return zero, false
	}
	now := b.now()
	if b.idle > 0 && now.Sub(n.seen) > b.idle {
		b.remove(n)
		return zero, false
	}
	n.seen = now
	b.unlink(n)
	b.pushFront(n)
	return n.v, true
}

// Peek returns k's value as Get does, without marking it used and
// whether the switch is on: for a writer that compares what it holds.
func (b *Bounded[K, V]) Peek(k K) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n, ok := b.m[k]; ok {
		return n.v, true
	}
	var zero V
	return zero, false
}

// Put keeps v under k, replacing what k held, and drops the least
// recently used entries past the bounds and those idle past the Spec's
// Idle. A value larger than Bytes/64 is not kept (nor is k's old one).
// It reports whether v was kept.
func (b *Bounded[K, V]) Put(k K, v V) bool {
	size := 0
	if b.size != nil {
		size = b.size(k, v)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n, ok := b.m[k]; ok {
		b.remove(n)
	}
	if b.bytes > 0 && size > b.bytes/64 {
		return false
	}
	now := b.now()
	n := &node[K, V]{k: k, v: v, size: size, seen: now}
	b.m[k] = n
	b.pushFront(n)
	b.held += size
	for last := b.ring.prev; last != n; last = b.ring.prev {
		if len(b.m) <= b.entries && (b.bytes <= 0 || b.held <= b.bytes) && (b.idle <= 0 || now.Sub(last.seen) <= b.idle) {
			break
		}
		b.remove(last)
	}
	return true
}

// Delete drops k's entry.
func (b *Bounded[K, V]) Delete(k K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n, ok := b.m[k]; ok {
		b.remove(n)
	}
}

// DeleteFunc drops every entry drop reports true for; drop runs with
// the cache locked and must not call it.
func (b *Bounded[K, V]) DeleteFunc(drop func(K, V) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.m {
		if drop(n.k, n.v) {
			b.remove(n)
		}
	}
}

// Range calls f for each entry until it returns false; f runs with the
// cache locked and must not call it.
func (b *Bounded[K, V]) Range(f func(K, V) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.m {
		if !f(n.k, n.v) {
			return
		}
	}
}

// Clear drops every entry.
func (b *Bounded[K, V]) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.m)
	b.ring.next, b.ring.prev = &b.ring, &b.ring
	b.held = 0
}

// Len is the entries held and their bytes.
func (b *Bounded[K, V]) Len() (entries, bytes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m), b.held
}

// Called with mu held, as the three below.
func (b *Bounded[K, V]) remove(n *node[K, V]) {
	b.unlink(n)
	delete(b.m, n.k)
	b.held -= n.size
}

func (b *Bounded[K, V]) unlink(n *node[K, V]) {
	n.prev.next, n.next.prev = n.next, n.prev
}

func (b *Bounded[K, V]) pushFront(n *node[K, V]) {
	n.prev, n.next = &b.ring, b.ring.next
	b.ring.next.prev = n
	b.ring.next = n
}
