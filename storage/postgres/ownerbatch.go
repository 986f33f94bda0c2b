package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// maxOwnerBatch bounds how many of one owner's waiting writes share a
// transaction.
const maxOwnerBatch = 64

// ownerBatches groups one owner's writes that wait at once on this
// replica into one transaction. Such writes take the owner's lock, which
// PostgreSQL holds until the commit's WAL flush, so they would otherwise
// run one flush at a time; in a batch the lock is taken and the commit
// flushed once for all of them, each write still deciding in turn after
// the ones before it (the engine's group commit, per owner, as the
// embedded engine's writer does for every write). Only one owner's lock
// is ever held by a batch, so batches on different replicas cannot
// deadlock on each other's owners.
type ownerBatches struct {
	mu sync.Mutex
	// waiting holds, by owner, the writes that arrived while a batch of
	// that owner runs (present, maybe empty, while one runs).
	waiting map[string][]*ownerWrite
}

type ownerWrite struct {
	ctx context.Context
	fn  func(ctx context.Context, tx *Tx) error
	err chan error
}

// WriteOwned is Write for a write that takes owner's lock (LockOwner):
// the first runs at once; those arriving while it runs wait and then
// share one transaction. Once queued, a write runs even if ctx ends
// before its batch commits (the caller must learn whether it did); one
// whose ctx ended before its batch began does not run.
func (d *DB) WriteOwned(ctx context.Context, owner string, fn func(ctx context.Context, tx *Tx) error) error {
	w := &ownerWrite{ctx: ctx, fn: fn, err: make(chan error, 1)}
	b := &d.owners
	b.mu.Lock()
	if q, running := b.waiting[owner]; running {
		b.waiting[owner] = append(q, w)
		b.mu.Unlock()
		return <-w.err
	}
	if b.waiting == nil {
		b.waiting = map[string][]*ownerWrite{}
	}
	b.waiting[owner] = nil
	b.mu.Unlock()
	d.ownerBatch(owner, []*ownerWrite{w})
	return <-w.err
}

// ownerBatch commits batch, then hands what arrived meanwhile to a batch
// of its own, so that the writer that began it is answered at once.
func (d *DB) ownerBatch(owner string, batch []*ownerWrite) {
	d.commitOwned(batch)
	b := &d.owners
	b.mu.Lock()
	next := b.waiting[owner]
	switch {
	case len(next) == 0:
		delete(b.waiting, owner)
	case len(next) > maxOwnerBatch:
		next, b.waiting[owner] = next[:maxOwnerBatch], next[maxOwnerBatch:]
	default:
		b.waiting[owner] = nil
	}
	b.mu.Unlock()
	if len(next) > 0 {
		go d.ownerBatch(owner, next)
	}
}

// commitOwned runs the writes of batch in one transaction, in order, and
// answers each. When the transaction fails for sure (a write's error, or
// PostgreSQL's answer to COMMIT), which write caused it cannot always be
// told (a queued statement's error surfaces at a later one), so each
// runs again alone and its own outcome stands. A COMMIT whose outcome is
// unknown (the connection lost) is that answer for all of them, as for a
// write alone.
func (d *DB) commitOwned(batch []*ownerWrite) {
	live := batch[:0:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.err <- err
			continue
		}
		live = append(live, w)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		live[0].err <- d.Write(live[0].ctx, live[0].fn)
		return
	}
	atCommit := false
	err := d.write(context.Background(), len(live), func(ctx context.Context, tx *Tx) error {
		atCommit = false
		for _, w := range live {
			if err := w.fn(context.WithoutCancel(w.ctx), tx); err != nil {
				return err
			}
		}
		atCommit = true
		return nil
	})
	var pe *pgconn.PgError
	if err != nil && (!atCommit || errors.As(err, &pe)) {
		for _, w := range live {
			w.err <- d.Write(w.ctx, w.fn)
		}
		return
	}
	for _, w := range live {
		w.err <- duplicateKey(err)
	}
}
