package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/internal/rowcache"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The generation read cache. SQLite is single-process and every write goes
// through the one writer connection, so this engine sees every change to
// a generations row: SQLite's pre-update hook on the writer reports the id
// of each row any statement inserts, updates or deletes (sqlc queries,
// Tx.Exec, migrations alike), so no write method can forget to
// invalidate. The ids collected during a transaction are dropped from the
// cache once it has ended (committed or rolled back), before any of its
// writers hears back, so a caller's read after its own write never sees
// the old row.
//
// The rows are a rowcache.Cache (caches.GenerationRows): a read that
// misses takes its id's epoch before the query and stores the row only
// if no invalidation of that id happened since, so a read that raced a
// write (read the old row, then the commit invalidated it) does not put
// the old row back.
type genCache struct {
	rows *rowcache.Cache[generation.Row]

	// pending collects, on the writer connection's goroutine only, the ids
	// the current transaction wrote; all is set when one could not be read.
	pending []string
	all     bool

	// afterRead, in tests, runs between a missing read's query and its
	// store, to make the race with a write deterministic.
	afterRead func(id string)
}

func newGenCache() *genCache { return &genCache{rows: newGenRows(0, 0)} }

// newGenRows is the row cache, bounded as caches.GenerationRows says
// unless entries or bytes replace its bounds (tests).
func newGenRows(entries, bytes int) *rowcache.Cache[generation.Row] {
	return rowcache.New(rowcache.Config[generation.Row]{
		Cache: caches.GenerationRows, Entries: entries, Bytes: bytes,
		Size:    (*generation.Row).Size,
		Version: func(r *generation.Row) int64 { return r.Version },
		Live:    func(r *generation.Row) bool { return true }, // one process: never asked
		Owner:   func(r *generation.Row) string { return r.Owner },
	})
}

// lookup returns the cached row of id, or (on a miss) the epoch to pass to
// put.
func (c *genCache) lookup(id string) (generation.Row, bool, rowcache.Epoch) {
	if r, ok := c.rows.Get(id); ok {
		return r, true, rowcache.Epoch{}
	}
	return generation.Row{}, false, c.rows.Epoch(id)
}

// put stores r (read from the database after lookup returned epoch) unless
// its id was invalidated since.
func (c *genCache) put(r generation.Row, epoch rowcache.Epoch) {
	if c.afterRead != nil {
		c.afterRead(r.ID)
	}
	c.rows.Put(r.ID, r, epoch)
}

// written is the writer connection's pre-update hook.
func (c *genCache) written(d sqlite.SQLitePreUpdateData) {
	if d.TableName != "generations" {
		return
	}
	// id is the table's first column (TestCacheIDColumn); UPDATE could
	// change it, so both of its images are read.
	var v [1]any
	if d.Op != sqlite3.SQLITE_INSERT {
		c.note(d.Old(v[:]...), v[0])
	}
	if d.Op != sqlite3.SQLITE_DELETE {
		c.note(d.New(v[:]...), v[0])
	}
}

func (c *genCache) note(err error, v any) {
	id, ok := v.(string)
	if err != nil || !ok {
		c.all = true
		return
	}
	c.pending = append(c.pending, id)
}

// begin forgets what an earlier transaction (or a migration) left pending.
func (c *genCache) begin() { c.pending, c.all = c.pending[:0], false }

// ended drops the rows the transaction that just ended wrote.
func (c *genCache) ended() {
	if len(c.pending) == 0 && !c.all {
		return
	}
	if c.all || len(c.pending) > caches.GenerationRows.Spec().Entries {
		c.rows.Flush()
	} else {
		for _, id := range c.pending {
			c.rows.Invalidate(id)
		}
	}
	c.begin()
}

// testDriver, in tests, registers their SQL functions on a writer's driver.
var testDriver func(*sqlite.Driver)

// hookedConnector opens the writer's connections with the cache's
// pre-update hook installed, on a driver of its own so no other
// connection in the process carries it.
type hookedConnector struct {
	drv *sqlite.Driver
	dsn string
}

func newHookedConnector(dsn string, c *genCache) *hookedConnector {
	drv := &sqlite.Driver{}
	if testDriver != nil {
		testDriver(drv)
	}
	drv.RegisterConnectionHook(func(conn sqlite.ExecQuerierContext, _ string) error {
		if h, ok := conn.(sqlite.HookRegisterer); ok {
			h.RegisterPreUpdateHook(c.written)
			return nil
		}
		return errNoHook
	})
	return &hookedConnector{drv: drv, dsn: dsn}
}

var errNoHook = errors.New("sqlite driver offers no pre-update hook")

func (h *hookedConnector) Connect(context.Context) (driver.Conn, error) { return h.drv.Open(h.dsn) }
func (h *hookedConnector) Driver() driver.Driver                        { return h.drv }

// cachedGeneration is the store's read of one generation by id: from the
// cache, or from the read pool (then cached).
func (d *DB) cachedGeneration(ctx context.Context, id string) (generation.Row, error) {
	r, ok, epoch := d.cache.lookup(id)
	if ok {
		return r, nil
	}
	r, err := read.Generation(d.Queries.GetGeneration(ctx, id))
	if err != nil {
		return r, err
	}
	d.cache.put(r, epoch)
	return r, nil
}
