// Package postgres is darkroom's engine for more than one machine: it
// implements the store contracts of package generation (Generations) and
// tasks (Tasks) on PostgreSQL through pgx, for several replicas sharing
// one database. Each write is one transaction (one owner's writes waiting
// at once may share one: ownerbatch.go); the decisions that must not race
// take an advisory lock on the owner (LockOwner) inside it.
package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/rowcache"
	sqlfiles "github.com/darkroom-mcp/darkroom/sqlfiles"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgdb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the database handle.
type DB struct {
	Pool     *pgxpool.Pool
	queries  *pgdb.Queries
	onCommit func(batch int, took time.Duration, err error) // stats.go
	// origin tags this handle's notifications, so that its own listener
	// skips them: this replica already woke its waiters after commit.
	origin   string
	listener atomic.Uint32                   // backend pid of the listening connection (listen.go)
	fence    *Fence                          // fence.go
	gens     *rowcache.Cache[generation.Row] // owners' generation reads (gencache.go)
	owners   ownerBatches                    // one owner's writes waiting at once (ownerbatch.go)
}

// Tx is what a write function sees. It implements generation.Tx and
// tasks.Tx, so a generation and its task change in one unit of work.
type Tx struct {
	reads // its queries, bound to the transaction
	p     *pipe
	// notes are the changes to announce to other replicas, sent by
	// pg_notify inside the transaction just before commit (listen.go).
	notes []note
}

// Exec runs a statement sqlc does not cover (tests set up rows with it).
func (t *Tx) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	return t.p.Exec(ctx, query, args...)
}

// Open connects to the database at url (postgres://...), applies the
// migrations (once, whichever replica starts first) and returns the
// handle.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, pool, sqlfiles.PostgresSchema, "postgres/schema"); err != nil {
		pool.Close()
		return nil, err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	d := &DB{Pool: pool, queries: pgdb.New(pool), origin: hex.EncodeToString(b),
		fence: NewFence(nil, FenceEvery, FenceWindow), gens: newGenCache()}
	d.gens.Share(d.fence.Fresh)
	return d, nil
}

// Close closes the pool.
func (d *DB) Close() error {
	d.Pool.Close()
	return nil
}

// maxRetries bounds the reruns of a write that lost a serialization
// conflict or a deadlock.
const maxRetries = 5

// Write runs fn inside one transaction and returns once it is committed,
// or fn's error (rolled back). A transaction that loses a serialization
// conflict or a deadlock runs again, so fn may run more than once and
// must act only through tx.
func (d *DB) Write(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error {
	var err error
	for range maxRetries {
		if err = d.write(ctx, 1, fn); !retryable(err) {
			break
		}
	}
	// A queued insert's failure surfaces at a later statement or at commit.
	return duplicateKey(err)
}

// write runs fn (n writes of a batch, or one) in one transaction.
func (d *DB) write(ctx context.Context, n int, fn func(ctx context.Context, tx *Tx) error) error {
	// Once begun, a write runs to the end (as on the embedded engine): a
	// caller that gives up must still learn whether it committed.
	ctx = context.WithoutCancel(ctx)
	start := time.Now()
	conn, err := d.Pool.Acquire(ctx)
	if err != nil {
		d.committed(start, n, err)
		return fmt.Errorf("begin: %w", err)
	}
	// The pool drops a connection left in a transaction or broken.
	defer conn.Release()
	p := &pipe{conn: conn.Conn()}
	p.queued = append(p.queued, queuedExec{sql: "BEGIN"}) // sent with the first statement
	t := &Tx{reads: reads{pgdb.New(p)}, p: p}
	if err := fn(ctx, t); err != nil {
		p.rollback(ctx)
		return err
	}
	if err := d.announce(ctx, t); err != nil {
		p.rollback(ctx)
		d.committed(start, n, err)
		return err
	}
	if err = p.commit(ctx); err != nil {
		p.rollback(ctx)
	}
	// Before the writer hears back, whatever the commit's outcome: its
	// next read must not find the row as it was.
	d.forget(t.notes)
	d.committed(start, n, err)
	return err
}

func (d *DB) committed(start time.Time, n int, err error) {
	if d.onCommit != nil {
		d.onCommit(n, time.Since(start), err)
	}
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// migrationLock is the advisory lock id replicas take to migrate one at a
// time ("darkroom" in ASCII).
const migrationLock = 0x6461726b726f6f6d

// migrate applies the numbered schema files newer than the recorded
// version, each in its own transaction, under a session advisory lock so
// that replicas starting at once migrate one after the other.
func migrate(ctx context.Context, pool *pgxpool.Pool, files fs.FS, dir string) error {
	steps, err := sqlfiles.Migrations(files, dir)
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLock)); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrationLock))
	}()
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS darkroom_schema (version INTEGER NOT NULL)"); err != nil {
		return err
	}
	var version int
	if err := conn.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM darkroom_schema").Scan(&version); err != nil {
		return err
	}
	for _, s := range steps {
		if s.N <= version {
			continue
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, s.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO darkroom_schema (version) VALUES ($1)", s.N)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", s.Name, err)
		}
	}
	return nil
}
