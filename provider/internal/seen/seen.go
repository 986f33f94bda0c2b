// Package seen is a bounded set of recently seen ids with a time to live,
// used to drop replayed or retried webhook deliveries.
package seen

import (
	"container/list"
	"sync"
	"time"
)

// Set remembers ids for TTL, at most Max of them (the oldest go first).
// It is safe for concurrent use.
type Set struct {
	mu  sync.Mutex
	ttl time.Duration
	max int
	now func() time.Time
	m   map[string]*list.Element
	l   *list.List // of entry, oldest first
}

type entry struct {
	id string
	at time.Time
}

// New returns a set; now nil means time.Now.
func New(max int, ttl time.Duration, now func() time.Time) *Set {
	if max <= 0 {
		max = 10000
	}
	if now == nil {
		now = time.Now
	}
	return &Set{ttl: ttl, max: max, now: now, m: map[string]*list.Element{}, l: list.New()}
}

// Add records id and reports whether it was already there (and not
// expired).
func (s *Set) Add(id string) (dup bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.evict(now)
	if _, ok := s.m[id]; ok {
		return true
	}
	s.m[id] = s.l.PushBack(entry{id: id, at: now})
	for s.l.Len() > s.max {
		s.remove(s.l.Front())
	}
	return false
}

// Has reports whether id is held (and not expired), without adding it.
func (s *Set) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evict(s.now())
	_, ok := s.m[id]
	return ok
}

// Forget removes id, so a later delivery with it is handled again (for a
// delivery that could not be processed).
func (s *Set) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[id]; ok {
		s.remove(e)
	}
}

// Len is the number of ids held.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.l.Len()
}

func (s *Set) evict(now time.Time) {
	for e := s.l.Front(); e != nil; e = s.l.Front() {
		if now.Sub(e.Value.(entry).at) < s.ttl {
			return
		}
		s.remove(e)
	}
}

func (s *Set) remove(e *list.Element) {
	delete(s.m, e.Value.(entry).id)
	s.l.Remove(e)
}
