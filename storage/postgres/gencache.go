package postgres

import (
	"context"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/internal/rowcache"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgdb"
)

// The generation read cache: an owner's reads of its generation
// (OwnedGeneration: get_generation, waits, resources, the viewer) are
// answered from memory between changes, under the same rule as the task
// cache (package rowcache): a row's version only grows and a cached entry
// is replaced only by a higher one; a committed change drops the entry on
// the replica that made it (forget, before the writer hears back) and,
// by its notification carrying the new version, on every other
// (listen.go); a live row is served only while the listener's fence is
// fresh; each (re)connect flushes the live rows, each resync drops those
// whose version moved on. The runner's own reads (Generation, Claim)
// never use it: they decide, so they read the database.
//
// The statements that change only the runner's bookkeeping (lease,
// schedule, attempts, the submit marker) announce nothing, so a cached
// row's bookkeeping fields may be up to one resync old; no owner's read
// shows them.
func newGenCache() *rowcache.Cache[generation.Row] {
	return rowcache.New(rowcache.Config[generation.Row]{
		Cache:   caches.GenerationRows,
		Version: func(r *generation.Row) int64 { return r.Version },
		// A terminal row can still lose its outputs to retention (noted),
		// and then only be purged (noted): it is settled once expired.
		Live:  func(r *generation.Row) bool { return !r.Status.Terminal() || !r.OutputsExpired },
		Owner: func(r *generation.Row) string { return r.Owner },
		Size:  (*generation.Row).Size,
	})
}

// forget drops the generations a local transaction noted from the cache.
func (d *DB) forget(notes []note) {
	for _, n := range notes {
		if n.channel == chanGeneration {
			d.gens.Invalidate(n.id)
		}
	}
}

// revalidateGenerations is the generation cache's part of a resync.
func (d *DB) revalidateGenerations(ctx context.Context) error {
	return d.gens.Revalidate(ctx, func(ctx context.Context, ids []string) (map[string]int64, error) {
		rs, err := d.queries.GenerationVersions(ctx, ids)
		return versions(rs, err, func(r pgdb.GenerationVersionsRow) (string, int64) { return r.ID, r.Version })
	})
}

// versions is a version query's rows by id.
func versions[R any](rs []R, err error, idVersion func(R) (string, int64)) (map[string]int64, error) {
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rs))
	for _, r := range rs {
		id, v := idVersion(r)
		out[id] = v
	}
	return out, nil
}
