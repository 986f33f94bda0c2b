// Package caches is the one list of darkroom's caches, so that a reader
// can count them, and the switch with which a benchmark turns one off to
// measure what it buys (cmd/darkroom's BenchmarkCaches). Every cache asks
// On before it answers; nothing but a benchmark ever turns one off.
package caches

import "sync/atomic"

// Cache names one cache.
type Cache int

// darkroom's caches, one per layer.
const (
	// GenerationRows is the engines' generation row cache: SQLite's
	// (storage/sqlite: genCache), invalidated by its writer's hook, and
	// PostgreSQL's owner reads (storage/postgres: gencache.go), versioned
	// and fenced as TaskRows.
	GenerationRows Cache = iota
	// TaskRows is the task store's row cache (tasks: newTaskCache). On a
	// shared engine (PostgreSQL) it serves a live task only while the
	// listener's fence is fresh (storage/postgres: Fence), and a cached
	// row is replaced only by a higher version.
	TaskRows
	// Replies is the dispatcher's cache of encoded replies: tasks/get's
	// and the lean reads' (tasks: replyCache).
	Replies
	// RequestMeta is the decoded _meta objects of requests on the lean
	// path (tasks: metaCache).
	RequestMeta
	// Previews is the output previews' bytes (preview: Cache).
	Previews
	count
)

var names = [count]string{"generation rows", "task rows", "encoded replies", "request _meta", "previews"}

func (c Cache) String() string { return names[c] }

var off [count]atomic.Bool

// On reports whether c answers: always, except while a benchmark measures
// the path without it.
func On(c Cache) bool { return !off[c].Load() }

// Disable turns c off until restore is called; for benchmarks only.
func Disable(c Cache) (restore func()) {
	off[c].Store(true)
	return func() { off[c].Store(false) }
}
