package limit

import "sync"

// Slots bounds how many of something (open listen streams) each key holds
// at once. It is safe for concurrent use; a key holding none takes no
// memory.
type Slots struct {
	mu  sync.Mutex
	max int
	n   map[string]int
}

// NewSlots returns Slots allowing max per key (max < 1: none).
func NewSlots(max int) *Slots { return &Slots{max: max, n: map[string]int{}} }

// SetMax changes the bound; slots already held are kept.
func (s *Slots) SetMax(max int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max = max
}

// Max is the bound in force.
func (s *Slots) Max() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// Acquire takes one of key's slots, or reports false when key holds the
// bound already. release gives it back (once; later calls do nothing).
func (s *Slots) Acquire(key string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[key] >= s.max {
		return nil, false
	}
	s.n[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.n[key]--; s.n[key] <= 0 {
				delete(s.n, key)
			}
		})
	}, true
}

// Held is the number of slots key holds.
func (s *Slots) Held(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[key]
}
