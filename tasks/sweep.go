package tasks

import (
	"context"
	"time"
)

// sweepBatch bounds the rows one sweep transaction touches, so requests
// waiting on the single writer are never held up for long.
const sweepBatch = 500

// PurgeGrace is how long an expired task's row is kept before deletion.
// Expired tasks already read as not found; the grace only spares a busy
// writer.
const PurgeGrace = time.Hour

// Sweep fails live tasks that outlived their TTL and purges expired rows,
// in batches. It returns how many it failed and purged.
func (s *Store) Sweep(ctx context.Context) (failed, purged int, err error) {
	now := s.now()
	for {
		rows, err := s.db.ExpiredLiveTasks(ctx, now, sweepBatch)
		if err != nil || len(rows) == 0 {
			if err != nil {
				return failed, purged, err
			}
			break
		}
		var changed []string
		err = s.db.Update(ctx, func(ctx context.Context, tx Tx) error {
			changed = changed[:0]
			for _, r := range rows {
				ok, err := s.Finish(ctx, tx, r.TaskID, StatusFailed, "task expired: its ttlMs passed before it finished",
					nil, &Error{Code: CodeInternal, Message: "task expired before completion"})
				if err != nil {
					return err
				}
				if ok {
					changed = append(changed, r.TaskID)
				}
			}
			return nil
		})
		if err != nil {
			return failed, purged, err
		}
		for _, id := range changed {
			s.Notify(id)
		}
		failed += len(changed)
		if len(rows) < sweepBatch {
			break
		}
	}
	cutoff := now.Add(-PurgeGrace)
	for {
		var n int64
		err := s.db.Update(ctx, func(ctx context.Context, tx Tx) error {
			var err error
			n, err = tx.PurgeTasks(ctx, cutoff, sweepBatch)
			return err
		})
		if err != nil {
			return failed, purged, err
		}
		purged += int(n)
		if n < sweepBatch {
			return failed, purged, nil
		}
	}
}

// RunSweeper sweeps every interval until ctx ends.
func (s *Store) RunSweeper(ctx context.Context, every time.Duration, onErr func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.sweepOnce(ctx); err != nil && onErr != nil && ctx.Err() == nil {
				onErr(err)
			}
		}
	}
}

// sweepOnce sweeps, on one replica of the fleet when the store is shared
// (Exclusive): the others skip this round.
func (s *Store) sweepOnce(ctx context.Context) error {
	sweep := func(ctx context.Context) error {
		_, _, err := s.Sweep(ctx)
		return err
	}
	if s.exclusive == nil {
		return sweep(ctx)
	}
	return s.exclusive(ctx, "tasks.sweep", sweep)
}
