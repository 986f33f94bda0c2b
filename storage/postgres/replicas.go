package postgres

import (
	"context"
	"time"

	"github.com/darkroom-mcp/darkroom/storage/postgres/pgdb"
)

// Heartbeat keeps this replica's row in the replicas table fresh every
// every (default 2 s) until ctx ends, and after each beat calls live
// with the number of replicas seen within three beats (itself included):
// what per-caller rate limits are split by (limit.Split). A failed beat
// keeps the last count (a database that is down fails readiness anyway).
// At the end the row is deleted, so the others' shares grow at once
// rather than after three beats.
func (d *DB) Heartbeat(ctx context.Context, every time.Duration, live func(n int)) {
	if every <= 0 {
		every = 2 * time.Second
	}
	window := 3*every + every/2
	beat := func() {
		n, err := d.queries.ReplicaHeartbeat(ctx, pgdb.ReplicaHeartbeatParams{ID: d.origin, LiveMs: window.Milliseconds()})
		if err == nil {
			live(int(n))
		}
	}
	beat()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			bye, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = d.queries.ReplicaGone(bye, d.origin)
			return
		case <-t.C:
			beat()
		}
	}
}
