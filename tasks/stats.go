package tasks

import "sync/atomic"

type cacheStats struct{ hits, misses atomic.Uint64 }

// CacheStats reports the task reads answered from the read cache and
// those that went to the backend, since start.
func (s *Store) CacheStats() (hits, misses uint64) {
	return s.stats.hits.Load(), s.stats.misses.Load()
}
