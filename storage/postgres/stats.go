package postgres

import (
	"context"
	"time"

	"github.com/darkroom-mcp/darkroom/metrics"
)

// Stats reads the gauges a metrics scrape reports, from the live rows
// only (the partial indexes keep finished generations out of it).
func (d *DB) Stats(ctx context.Context, now time.Time) (metrics.Gauges, error) {
	g := metrics.Gauges{Active: map[string]int64{}}
	rows, err := d.Pool.Query(ctx, `SELECT status, COUNT(*) FROM generations
		WHERE status IN ('reserved', 'queued', 'running') GROUP BY status`)
	if err != nil {
		return g, err
	}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return g, err
		}
		g.Active[st] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return g, err
	}
	var oldest int64
	if err := d.Pool.QueryRow(ctx, `SELECT COUNT(*), COALESCE(MIN(next_check_at), 0)::bigint FROM generations
		WHERE next_check_at IS NOT NULL AND next_check_at <= $1 AND lease_until < $1`, now.UnixMilli()).Scan(&g.Due, &oldest); err != nil {
		return g, err
	}
	if oldest > 0 {
		g.OldestDue = time.UnixMilli(oldest)
	}
	err = d.Pool.QueryRow(ctx, `SELECT COUNT(*) FROM generations WHERE next_check_at IS NOT NULL AND lease_until >= $1`, now.UnixMilli()).Scan(&g.Leased)
	return g, err
}

// Leased counts the generations whose lease has expired: the replicas'
// runners take these over (live leases are other replicas' work).
func (d *DB) Leased(ctx context.Context) (int64, error) {
	var n int64
	err := d.Pool.QueryRow(ctx, `SELECT COUNT(*) FROM generations WHERE lease_until > 0 AND lease_until < $1`, time.Now().UnixMilli()).Scan(&n)
	return n, err
}

// Probe runs an empty write transaction: nil when the database accepts
// writes.
func (d *DB) Probe(ctx context.Context) error {
	return d.Write(ctx, func(ctx context.Context, tx *Tx) error {
		_, err := tx.p.Exec(ctx, `UPDATE generations SET lease_until = lease_until WHERE false`)
		return err
	})
}

// OnCommit sets the observer of every write transaction: how many writes
// it held (more than one only for one owner's batch, ownerbatch.go), how
// long it took and its failure. Set it before the
// first write.
func (d *DB) OnCommit(fn func(batch int, took time.Duration, err error)) { d.onCommit = fn }
