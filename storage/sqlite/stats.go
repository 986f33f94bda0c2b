package sqlite

import (
	"context"
	"time"

	"github.com/darkroom-mcp/darkroom/metrics"
)

// Stats reads the scrape-time gauges on the read pool: live generations
// by status (a partial index holds only those), the runner's due queue
// and the leases held.
func (d *DB) Stats(ctx context.Context, now time.Time) (metrics.Gauges, error) {
	g := metrics.Gauges{Active: map[string]int64{}}
	rows, err := d.Read.QueryContext(ctx, `SELECT status, COUNT(*) FROM generations
		WHERE status IN ('reserved', 'queued', 'running') GROUP BY status`)
	if err != nil {
		return g, err
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return g, err
		}
		g.Active[st] = n
	}
	if err := rows.Err(); err != nil {
		return g, err
	}
	var oldest int64
	if err := d.Read.QueryRowContext(ctx, `SELECT COUNT(*), CAST(COALESCE(MIN(next_check_at), 0) AS INTEGER) FROM generations
		WHERE next_check_at IS NOT NULL AND next_check_at <= ? AND lease_until = 0`, now.UnixMilli()).Scan(&g.Due, &oldest); err != nil {
		return g, err
	}
	if oldest > 0 {
		g.OldestDue = time.UnixMilli(oldest)
	}
	err = d.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM generations WHERE next_check_at IS NOT NULL AND lease_until > 0`).Scan(&g.Leased)
	return g, err
}

// Leased counts the generations leased now: at start, before the runner
// takes them over, these are the takeovers.
func (d *DB) Leased(ctx context.Context) (int64, error) {
	var n int64
	err := d.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM generations WHERE lease_until > 0`).Scan(&n)
	return n, err
}

// Probe runs an empty write transaction through the writer: nil when the
// store accepts writes (the writer loop is alive and the write lock can
// be taken and committed).
func (d *DB) Probe(ctx context.Context) error {
	return d.Write(ctx, func(ctx context.Context, tx *Tx) error {
		_, err := tx.tx.ExecContext(ctx, `UPDATE generations SET lease_until = lease_until WHERE 0`)
		return err
	})
}

// OnCommit sets the observer of every group commit: how many writes it
// carried, how long it took and the transaction's own failure (nil when
// it committed). Set it before the first write.
func (d *DB) OnCommit(fn func(batch int, took time.Duration, err error)) { d.onCommit = fn }
