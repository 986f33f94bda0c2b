// Package caches is darkroom's one cache type and the one list of its
// caches, so that a reader can count them: Bounded (bounded.go) is the
// only cache in the code, and New builds one only for a cache named here,
// with its key, bounds and invalidating event in its Spec (specs, below).
// The switch with which a benchmark turns a cache off to measure what it
// buys (cmd/darkroom's BenchmarkCaches, which measures every one) is here
// too: every Get asks On before it answers; nothing but a benchmark ever
// turns one off.
//
// The caches, where they live (one eviction for all: least recently used
// out past the entries or bytes, and whatever nobody read for Idle):
//
//   - generation rows: storage/sqlite/gencache.go (under the writer's
//     pre-update hook) and storage/postgres/gencache.go, both a
//     rowcache.Cache (internal/rowcache: versions, epochs, the fence);
//   - task rows: tasks/store.go (newTaskCache), a rowcache.Cache;
//   - encoded replies: tasks/replies.go;
//   - previews: preview/cache.go;
//   - schema models: provider/modelschema/registry.go, which also answers
//     generation.Service's lookups of qualified models (Models.Known: the
//     resolvedModels map generation kept beside it is gone);
//   - schema misses: provider/modelschema/registry.go (remember);
//   - model searches: provider/modelschema/catalog.go;
//   - task index: gentask/mirror.go.
//
// Two memos of one value are not keyed and stay as they are: fal's JWKS
// (provider/fal/webhook.go: fal allows at most 24 h) and a vendor's last
// ping (cmd/darkroom/vendorready.go: 15 s). Each exists so that a remote
// party is not asked per request, not to save CPU.
//
// Kept maps that are not caches stay where they are, each because it is
// state (dropping an entry changes an answer), not a copy of something
// that can be read again: rate limiter buckets, replay sets, waiters,
// in-flight work. TestNoOtherCaches (caches_test.go) scans the code and
// fails on any sync.Map, container/list, map kept beside a mutex or
// cache-named type outside this package not listed there with its
// reason, and on a cache listed here that no code builds.
package caches

import (
	"sync/atomic"
	"time"
)

// Cache names one cache.
type Cache int

// darkroom's caches, one per layer.
const (
	// GenerationRows is the engines' generation row cache: SQLite's
	// (storage/sqlite: gencache.go) and PostgreSQL's owner reads
	// (storage/postgres: gencache.go, through internal/rowcache).
	GenerationRows Cache = iota
	// TaskRows is the task store's row cache (tasks: newTaskCache,
	// through internal/rowcache).
	TaskRows
	// Replies is the dispatcher's cache of encoded replies: tasks/get's
	// and the lean reads' (tasks: replies.go).
	Replies
	// Previews is the output previews' bytes (preview: Cache).
	Previews
	// SchemaModels is the models the schema registry resolved
	// (provider/modelschema: Registry), qualified ones and curated
	// entries' schemas; generation.Service reads its qualified models
	// here (Models.Known).
	SchemaModels
	// SchemaMisses is the lasting failures of the schema registry's
	// fetches (provider/modelschema: Registry.remember).
	SchemaMisses
	// Searches is search_models' complete pages (provider/modelschema:
	// Catalog).
	Searches
	// TaskIndex is the task that follows each generation (gentask:
	// Mirror).
	TaskIndex
	count
)

// PollIdle is the idle time after which the polling caches drop an
// entry: far above any poll interval (at most 5 s) and the resync (2 s),
// so a row being polled or waited on never leaves for being idle.
const PollIdle = 2 * time.Minute

// MissTTL is how long a schema fetch's lasting failure is answered again
// without asking the provider: long enough that a caller repeating an
// unknown id costs the provider nothing, short enough that a model just
// published is soon found.
const MissTTL = 2 * time.Minute

// SearchTTL is how long a search's results are reused.
const SearchTTL = 5 * time.Minute

// Spec is what a cache is: what it holds and by what key, its bounds,
// and what makes an entry leave before its bounds do.
type Spec struct {
	Name string
	Key  string
	// Entries bounds the entries, Bytes (when not 0) the bytes they hold
	// as the cache's Size counts them; an entry larger than Bytes/64 is
	// not kept (it would push many small ones out). Idle (when not 0)
	// drops an entry nobody read for that long, so a cache holds what is
	// in use now, not everything since the start up to its bound.
	Entries int
	Bytes   int
	Idle    time.Duration
	// Invalidated is the event that drops or replaces an entry.
	Invalidated string
}

var specs = [count]Spec{
	GenerationRows: {Name: "generation rows", Key: "generation id", Entries: 16_384, Bytes: 32 << 20, Idle: PollIdle,
		Invalidated: "SQLite: the writer's pre-update hook on any write of the row, when its transaction ends; " +
			"PostgreSQL: a local commit, a notification of a higher version, a listener reconnect (live rows), a resync whose version query moved on; " +
			"on a shared engine a live row is served only while the listener's fence is fresh"},
	TaskRows: {Name: "task rows", Key: "task id", Entries: 100_000, Bytes: 64 << 20, Idle: PollIdle,
		Invalidated: "Store.Notify after each committed change; on a shared engine as generation rows on PostgreSQL"},
	Replies: {Name: "encoded replies", Key: "task or generation id, kind and era; reused only for an equal key (the task's state, a generation's view)",
		Entries: 8_192, Bytes: 32 << 20, Idle: PollIdle, Invalidated: "a new key: the entry is replaced"},
	Previews: {Name: "previews", Key: "blob key", Entries: 4_096, Bytes: 16 << 20, Idle: PollIdle,
		Invalidated: "none needed: a preview never changes (a deleted output's entry ages out)"},
	SchemaModels: {Name: "schema models", Key: "qualified model id (with the curated entry's id for a curated model's schema)", Entries: 4_096,
		Invalidated: "a fetch (first, or the background refresh past Config.Refresh) replaces it"},
	SchemaMisses: {Name: "schema misses", Key: "qualified model id (as schema models)", Entries: 1_024, Idle: MissTTL,
		Invalidated: "MissTTL after it was kept (checked on read); a model found drops it"},
	Searches: {Name: "model searches", Key: "kind and query (lower case)", Entries: 256, Idle: SearchTTL,
		Invalidated: "SearchTTL after it was kept (checked on read)"},
	TaskIndex: {Name: "task index", Key: "generation id", Entries: 100_000, Bytes: 16 << 20, Idle: PollIdle,
		Invalidated: "none needed: the task following a generation never changes"},
}

func (c Cache) String() string { return specs[c].Name }

// Spec is c's spec.
func (c Cache) Spec() Spec { return specs[c] }

// All is every cache, in order.
func All() []Cache {
	out := make([]Cache, count)
	for i := range out {
		out[i] = Cache(i)
	}
	return out
}

var (
	off  [count]atomic.Bool
	made [count]atomic.Int64
)

// On reports whether c answers: always, except while a benchmark measures
// the path without it.
func On(c Cache) bool { return !off[c].Load() }

// Disable turns c off until restore is called; for benchmarks only.
func Disable(c Cache) (restore func()) {
	off[c].Store(true)
	return func() { off[c].Store(false) }
}

// Made is how many Bounded of c this process has built (tests: every
// listed cache is built by the code that names it).
func Made(c Cache) int64 { return made[c].Load() }
