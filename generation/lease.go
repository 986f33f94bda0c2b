package generation

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errLeaseLost ends a step whose lease another claim took over: whatever
// it was doing is now that claim's to do, so it writes nothing more.
var errLeaseLost = errors.New("lease lost to another claim")

// leaseHold keeps a claimed generation's lease alive while its step runs:
// a provider submit or an output copy may outlast the lease, and an
// expired lease lets another runner (replica) claim the row and submit
// again. It renews every Lease/3 in the row guard (lease owner and the
// claim's attempts); a renewal that finds the lease gone, or none
// succeeding before the lease runs out, cancels the step's context, so
// the step's remaining writes fail instead of racing the new holder.
type leaseHold struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	stopCh chan struct{}
	done   chan struct{}
	once   sync.Once
	// until is when the lease as last renewed runs out; read it only
	// after stop.
	until time.Time
}

func (r *Runner) holdLease(parent context.Context, row Row) *leaseHold {
	ctx, cancel := context.WithCancelCause(parent)
	h := &leaseHold{ctx: ctx, cancel: cancel, stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		r.renewLoop(h, row)
	}()
	return h
}

// renewLoop runs until stop or the step's context ends.
func (r *Runner) renewLoop(h *leaseHold, row Row) {
	every := max(r.cfg.Lease/3, time.Millisecond)
	h.until = row.LeaseUntil
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-h.stopCh:
			return
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		now := r.s.cfg.Now()
		next := now.Add(r.cfg.Lease)
		var held bool
		err := r.s.store.Update(h.ctx, func(ctx context.Context, tx Tx) error {
			var err error
			held, err = tx.RenewLease(ctx, row.ID, r.id, row.Attempts, next)
			return err
		})
		switch {
		case err == nil && held:
			h.until = next
		case err == nil:
			// Not ours any more. A step that just ended the generation
			// released the lease itself (terminal rows hold none): that
			// is not a loss, and its last writes (waking the owner's
			// queue) go on.
			if g, gerr := r.s.store.Generation(h.ctx, row.ID); gerr == nil && g.Status.Terminal() {
				return
			}
			r.cfg.Logger.Warn("runner: lease lost while stepping; the step stops", "generation", row.ID)
			h.cancel(errLeaseLost)
			return
		case h.ctx.Err() != nil:
			return
		default:
			// The database refuses writes: retry on the next tick, unless
			// the lease runs out first, when another claim may take it.
			if !r.s.cfg.Now().Add(every).Before(h.until) {
				r.cfg.Logger.Warn("runner: lease could not be renewed before it expired; the step stops", "generation", row.ID, "err", err)
				h.cancel(errLeaseLost)
				return
			}
		}
		t.Reset(every)
	}
}

// stop ends the renewals (idempotent) and waits for the renewer; after
// it, lost reports whether the lease was lost.
func (h *leaseHold) stop() {
	h.once.Do(func() { close(h.stopCh) })
	<-h.done
}

func (h *leaseHold) lost() bool { return errors.Is(context.Cause(h.ctx), errLeaseLost) }
