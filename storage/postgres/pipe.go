package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipe is a write transaction's connection that saves round trips: the
// statements whose answer nobody reads (BEGIN, the owner's lock, the
// inserts, the notifications) are queued and sent with the next statement
// that must be answered, or with COMMIT, in one batch (one round trip).
// PostgreSQL still runs them in order, each with its own snapshot, so a
// read sent after a queued lock sees what the lock's previous holder
// committed. A queued statement's error is the error of the statement
// that carried it (the first failure in the batch), so it reaches fn at
// its next read or the caller at commit.
type pipe struct {
	conn   *pgx.Conn
	queued []queuedExec
	sent   bool // something reached the server: a rollback is needed
	later  bool // Exec queues instead of sending (see deferred)
}

type queuedExec struct {
	sql  string
	args []any
}

// deferred runs fn with its Exec calls queued: for statements whose
// result is only their error.
func (p *pipe) deferred(fn func() error) error {
	p.later = true
	defer func() { p.later = false }()
	return fn()
}

func (p *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if p.later {
		p.queued = append(p.queued, queuedExec{sql, args})
		return pgconn.CommandTag{}, nil
	}
	if len(p.queued) == 0 {
		p.sent = true
		return p.conn.Exec(ctx, sql, args...)
	}
	br, n := p.send(ctx, sql, args)
	if err := drain(br, n); err != nil {
		_ = br.Close()
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := p.flush(ctx); err != nil {
		return nil, err
	}
	p.sent = true
	return p.conn.Query(ctx, sql, args...)
}

func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if len(p.queued) == 0 {
		p.sent = true
		return p.conn.QueryRow(ctx, sql, args...)
	}
	br, n := p.send(ctx, sql, args)
	if err := drain(br, n); err != nil {
		_ = br.Close()
		return errRow{err}
	}
	return batchRow{br.QueryRow(), br}
}

// send sends the queued statements (n) and then sql, in one batch.
func (p *pipe) send(ctx context.Context, sql string, args []any) (br pgx.BatchResults, n int) {
	b := &pgx.Batch{}
	for _, q := range p.queued {
		b.Queue(q.sql, q.args...)
	}
	b.Queue(sql, args...)
	n = len(p.queued)
	p.queued, p.sent = nil, true
	return p.conn.SendBatch(ctx, b), n
}

// drain reads the n queued statements' results: the first error is the
// batch's (the rest only say the transaction is aborted).
func drain(br pgx.BatchResults, n int) error {
	var first error
	for range n {
		if _, err := br.Exec(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// flush sends what is queued, alone.
func (p *pipe) flush(ctx context.Context) error {
	if len(p.queued) == 0 {
		return nil
	}
	_, err := p.Exec(ctx, "SELECT 1")
	return err
}

// commit sends what is queued with COMMIT: one round trip.
func (p *pipe) commit(ctx context.Context) error {
	tag, err := p.Exec(ctx, "COMMIT")
	if err == nil && tag.String() != "COMMIT" {
		// COMMIT of an aborted transaction answers ROLLBACK, not an error.
		err = fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
	}
	return err
}

// rollback ends the transaction if any of it reached the server.
func (p *pipe) rollback(ctx context.Context) {
	p.queued = nil
	if p.sent {
		_, _ = p.conn.Exec(ctx, "ROLLBACK")
	}
}

type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil && !errors.Is(cerr, pgx.ErrNoRows) {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
