package generation

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// runState is what Run shares with its steps: their own context (which
// outlives Run's by up to RunnerConfig.Drain) and whether Run is alive.
type runState struct {
	steps    context.Context
	abort    context.CancelFunc
	holding  context.Context // ends when draining starts: held streams and creates let go (signal.go)
	letGo    context.CancelFunc
	alive    atomic.Bool
	draining atomic.Bool
}

func (r *Runner) started(ctx context.Context) {
	r.run.steps, r.run.abort = context.WithCancel(context.WithoutCancel(ctx))
	r.run.holding, r.run.letGo = context.WithCancel(r.run.steps)
	r.run.draining.Store(false)
	r.run.alive.Store(true)
}

// stopped drains: steps in flight get up to Drain to finish (each then
// reschedules its generation, which releases its lease); the rest are
// cancelled and their leases released, so that the next runner on this
// database takes them over at once.
func (r *Runner) stopped() {
	r.run.draining.Store(true)
	r.run.letGo() // a held stream or create ends now; its step polls once and hands the row back
	defer r.run.alive.Store(false)
	inFlight := len(r.sem) + r.heldNow() // a held call's step gave its worker back
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	finished := inFlight == 0
	if !finished && r.cfg.Drain > 0 {
		t := time.NewTimer(r.cfg.Drain)
		select {
		case <-done:
			finished = true
		case <-t.C:
		}
		t.Stop()
	}
	left := len(r.sem) + r.heldNow()
	r.run.abort()
	<-done
	if finished && inFlight == 0 && r.cfg.Drain == 0 {
		return // nothing was stepping: no leases of ours to release
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error { return tx.ReleaseRunnerLeases(ctx, r.id) })
	if err != nil {
		r.cfg.Logger.Error("runner: release leases at stop", "err", err)
	}
	r.cfg.Logger.Info("runner stopped", "stepsInFlight", inFlight, "finished", inFlight-left, "handedBack", left)
}

// Starting marks the runner alive before Run's goroutine is scheduled,
// for a caller that starts Run in the background and is ready at once.
func (r *Runner) Starting() { r.run.alive.Store(true) }

// Alive reports nil while Run is running and not draining.
func (r *Runner) Alive() error {
	switch {
	case r.run.draining.Load() && r.run.alive.Load():
		return errors.New("draining: shutting down")
	case !r.run.alive.Load():
		return errors.New("not running")
	}
	return nil
}
