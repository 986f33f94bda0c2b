// Package sqlite is darkroom's embedded engine: it implements the store
// contracts of package generation (Generations) and tasks (Tasks) on one
// SQLite file, with one writer connection fed by a group-commit loop and
// a separate read-only pool. All writes go through DB.Write; reads use
// the prepared sqlc queries on the read pool.
//
// Why one writer: a pool of BEGIN IMMEDIATE transactions starves under
// contention (SQLite's busy handler sleep-polls with no FIFO, so an unlucky
// writer waits out the whole busy_timeout and fails "database is locked").
// A single writer never contends, and by committing every waiting write in
// one transaction it pays one fsync for many creations.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	sqlfiles "github.com/darkroom-mcp/darkroom/sqlfiles"
	"github.com/darkroom-mcp/darkroom/storage/sqlite/sqlitedb"
	_ "modernc.org/sqlite" // driver "sqlite"
)

// maxBatch bounds how many waiting writes share one transaction.
const maxBatch = 128

// DB is the database handle shared by every package that persists state.
type DB struct {
	write *sql.DB
	// Read is a read-only pool; WAL lets it read while the writer commits.
	Read *sql.DB
	// Queries runs sqlc reads against Read, as prepared statements.
	Queries *sqlitedb.Queries
	// writeQ holds the same statements prepared on the writer.
	writeQ *sqlitedb.Queries
	// cache holds generation rows read by id (gencache.go); the writer's
	// pre-update hook invalidates them.
	cache *genCache

	reqs     chan *writeReq
	done     chan struct{}
	closeMu  sync.Mutex
	closed   bool
	loopDone chan struct{}
	onCommit func(batch int, took time.Duration, err error) // stats.go
}

type writeReq struct {
	ctx context.Context
	fn  func(ctx context.Context, tx *Tx) error
	err chan error
}

// Tx is what a write function sees: the sqlc queries bound to the shared
// transaction. It implements generation.Tx and tasks.Tx, so a generation
// and its task change in one unit of work.
type Tx struct {
	reads // its queries, bound to the transaction
	tx    *sql.Tx
}

// Exec runs a statement sqlc does not cover (tests set up rows with it).
func (t *Tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, query, args...)
}

// Open opens (creating if needed) the database file at path, applies
// migrations and starts the writer loop.
func Open(ctx context.Context, path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	// synchronous=FULL: every commit that precedes a reply carrying a new id
	// is on disk; with group commit that costs one fsync per batch.
	base := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)"
	cache := newGenCache()
	w := sql.OpenDB(newHookedConnector(base+"&_pragma=synchronous(FULL)&_txlock=immediate", cache))
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := migrate(ctx, w, sqlfiles.SQLiteSchema, "sqlite/schema"); err != nil {
		_ = w.Close()
		return nil, err
	}
	// mmap keeps reads of a large table from going through read() calls.
	r, err := sql.Open("sqlite", base+"&_pragma=query_only(1)&_pragma=mmap_size(268435456)")
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	n := max(4, runtime.GOMAXPROCS(0)*2)
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	// Prepared once: the hot paths (tasks/get, creations) would otherwise
	// re-parse their SQL on every call.
	rq, err := sqlitedb.Prepare(ctx, r)
	if err != nil {
		_ = w.Close()
		_ = r.Close()
		return nil, err
	}
	wq, err := sqlitedb.Prepare(ctx, w)
	if err != nil {
		_ = rq.Close()
		_ = w.Close()
		_ = r.Close()
		return nil, err
	}
	d := &DB{
		write:    w,
		Read:     r,
		Queries:  rq,
		writeQ:   wq,
		cache:    cache,
		reqs:     make(chan *writeReq, maxBatch),
		done:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	go d.loop()
	return d, nil
}

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("db: closed")

// Write runs fn inside a write transaction and returns once that
// transaction is durably committed (or fn's error). fn may share its
// transaction with other waiting writes; a failing fn is rolled back and
// does not disturb the others. fn may run more than once (a batch mate's
// failure reruns the batch without it), so it must act only through tx
// and set anything it captures afresh on each run. fn must not call Write.
func (d *DB) Write(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error {
	req := &writeReq{ctx: ctx, fn: fn, err: make(chan error, 1)}
	select {
	case d.reqs <- req:
	case <-d.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, wait for the outcome even if ctx ends: the write may
	// already be committed, and the caller must know.
	select {
	case err := <-req.err:
		return err
	case <-d.loopDone:
		select {
		case err := <-req.err:
			return err
		default:
			return ErrClosed
		}
	}
}

func (d *DB) loop() {
	defer close(d.loopDone)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		select {
		case req := <-d.reqs:
			batch = append(batch[:0], req)
		case <-d.done:
			d.drain()
			return
		}
	collect:
		for len(batch) < maxBatch {
			select {
			case req := <-d.reqs:
				batch = append(batch, req)
			default:
				break collect
			}
		}
		d.commit(batch)
	}
}

// drain fails writes still queued at Close.
func (d *DB) drain() {
	for {
		select {
		case req := <-d.reqs:
			req.err <- ErrClosed
		default:
			return
		}
	}
}

// commit runs a batch in one transaction, optimistically: each write runs
// straight in it, with no savepoint. When one fails, the transaction is
// rolled back and the batch runs again without it, so its error stands,
// its partial changes are gone, and every other write's outcome is that
// of the run that commits. Failing writes are rare (a lost race, a full
// disk); a savepoint around every write would copy each page it touches
// on every batch.
func (d *DB) commit(batch []*writeReq) {
	start, txErr := time.Now(), error(nil)
	errs := make([]error, len(batch))
	live := make([]int, 0, len(batch))
	for i, r := range batch {
		if errs[i] = r.ctx.Err(); errs[i] == nil {
			live = append(live, i)
		}
	}
	for len(live) > 0 {
		failed, err := d.run(batch, live, errs)
		if err != nil {
			txErr = err
			for _, i := range live {
				errs[i] = err
			}
			break
		}
		if failed < 0 {
			break
		}
		live = slices.Delete(live, failed, failed+1)
	}
	if d.onCommit != nil {
		d.onCommit(len(batch), time.Since(start), txErr)
	}
	for i, r := range batch {
		r.err <- errs[i]
	}
}

// run runs the live writes of batch in one transaction and commits it. It
// returns the position in live of the first write that failed (its error
// in errs, the transaction rolled back), or -1 once committed; err is a
// failure of the transaction itself.
func (d *DB) run(batch []*writeReq, live []int, errs []error) (failed int, err error) {
	d.cache.begin()
	tx, err := d.write.BeginTx(context.Background(), nil)
	if err != nil {
		return -1, fmt.Errorf("begin: %w", err)
	}
	// Whatever the outcome, the rows the transaction wrote leave the cache
	// once it has ended, before any of its writers hears back.
	defer d.cache.ended()
	t := &Tx{reads: reads{d.writeQ.WithTx(tx)}, tx: tx}
	for k, i := range live {
		// Once started, a write runs to the end: a statement interrupted
		// by its caller's cancellation would make SQLite roll back the
		// whole shared transaction, batch mates included.
		if errs[i] = batch[i].fn(context.WithoutCancel(batch[i].ctx), t); errs[i] != nil {
			_ = tx.Rollback()
			return k, nil
		}
	}
	if err := tx.Commit(); err != nil {
		return -1, fmt.Errorf("commit: %w", err)
	}
	return -1, nil
}

// Close stops the writer (failing writes not yet started) and closes both
// pools.
func (d *DB) Close() error {
	d.closeMu.Lock()
	if d.closed {
		d.closeMu.Unlock()
		return nil
	}
	d.closed = true
	close(d.done)
	d.closeMu.Unlock()
	<-d.loopDone
	return errors.Join(d.Queries.Close(), d.writeQ.Close(), d.write.Close(), d.Read.Close())
}
