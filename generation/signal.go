package generation

import (
	"context"
	"errors"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// How the runner learns that a provider's job ended (issue 39): each
// adapter declares its signal (provider.Signaller). Where darkroom has a
// public URL and the adapter takes webhooks, the webhook is the signal
// and nothing else is held. Otherwise:
//
//   - stream (fal): every look at a submitted job, the one right after
//     submit included, holds the provider's status stream (Watcher) until
//     the job ends, instead of one Status call;
//   - wait-on-create (Replicate, models expected under a minute): the
//     submit holds the create open until the job ends (SubmitWaiter);
//   - synchronous and poll: as before, Submit and Status calls, the polls
//     spaced by provider.NextPollElapsed.
//
// A held stream or create is a synchronous call under the step's lease:
// the lease is renewed while it is held; it ends when the lease is lost,
// when a cancel is asked (a change of the row wakes the step, which reads
// it), and when the runner starts draining; at most Held of them per
// provider are held at once, beyond which the job is polled; and while it
// waits its step gives its worker back (idle), so held calls never keep
// other generations from being stepped. A stream that cannot be opened, drops, stalls or ends without
// the job's end is followed at once by a Status call, and that
// generation is polled for streamPause before it is streamed again: the
// job is never lost, and a stream never makes one.

// streamPause is how long a generation whose stream failed is polled
// before its next stream.
const streamPause = time.Minute

// waitOnCreate is the wait asked of a provider that holds its create
// (Replicate takes at most 60 s).
const waitOnCreate = 60 * time.Second

// signal is how the runner learns that p's jobs of model m end.
func (r *Runner) signal(p provider.Provider, m provider.Model) provider.Signal {
	switch {
	case r.webhooks(p):
		return provider.SignalWebhook
	case r.cfg.PollOnly:
		return provider.SignalPoll
	}
	return provider.SignalOf(p, m, false)
}

// takeHeld reserves one of the provider's held calls, if one is free.
func (r *Runner) takeHeld(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[name] >= r.cfg.Held {
		return false
	}
	r.held[name]++
	return true
}

func (r *Runner) giveHeld(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held[name]--
}

// Held is how many streams and waiting creates of provider name are held
// now.
func (r *Runner) Held(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[name]
}

// heldNow is how many calls are held now, all providers.
func (r *Runner) heldNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.held {
		n += v
	}
	return n
}

// holdCtx is ctx for a held call of generation id: it also ends when the
// runner starts draining and when a cancel is asked for id. stop releases
// it.
func (r *Runner) holdCtx(ctx context.Context, id string) (_ context.Context, stop func()) {
	hctx, cancel := context.WithCancel(ctx)
	stopDrain := func() bool { return false }
	if r.run.holding != nil {
		stopDrain = context.AfterFunc(r.run.holding, cancel)
	}
	hub := r.s.Hub()
	done := make(chan struct{})
	if hub != nil {
		ch, release := hub.Watch(id)
		go func() {
			defer close(done)
			for {
				// The watch is taken before the read: no change is missed,
				// a cancel asked before the hold included.
				row, err := r.s.store.Generation(hctx, id)
				if err == nil && row.CancelRequested == 1 {
					release()
					cancel()
					return
				}
				select {
				case <-hctx.Done():
					release()
					return
				case <-ch:
				}
				release()
				ch, release = hub.Watch(id)
			}
		}()
	} else {
		close(done)
	}
	return hctx, func() {
		cancel()
		stopDrain()
		<-done
	}
}

// look observes a submitted job: through its stream when its provider
// streams (and a held call is free, and its last stream did not fail
// lately), else with one Status call. A stream that ends without the job's
// end is followed by a Status call at once.
func (r *Runner) look(ctx context.Context, p provider.Provider, m provider.Model, g *Generation, job provider.Job) (provider.Status, error) {
	w, ok := provider.As[provider.Watcher](p)
	if !ok || r.signal(p, m) != provider.SignalStream || r.streamPaused(g.ID) || !r.takeHeld(p.Name()) {
		return p.Status(ctx, job)
	}
	hctx, stop := r.holdCtx(ctx, g.ID)
	var st provider.Status
	var err error
	r.idle(ctx, func() { st, err = w.Watch(hctx, job, r.progress(ctx, g)) })
	stop()
	r.giveHeld(p.Name())
	if err == nil && st.State.Terminal() {
		return st, nil
	}
	if ctx.Err() != nil {
		return st, ctx.Err() // the lease is lost or the runner stops: the next claim looks
	}
	if hctx.Err() == nil || errors.Is(err, provider.ErrStreamStalled) {
		// Dropped, stalled or refused, not ended by us: poll a while.
		r.cfg.Logger.Info("runner: status stream ended before the job; polling", "generation", g.ID, "provider", p.Name(), "err", err)
		r.pauseStream(g.ID)
	}
	return p.Status(ctx, job)
}

// progress is a stream's progress hook for g: a change of message or
// percentage is recorded (at most one a second), so get_generation, the
// viewer and task status show it while the stream is held.
func (r *Runner) progress(ctx context.Context, g *Generation) func(provider.Status) {
	var last time.Time
	msg, prog := g.StatusMessage, g.Progress
	return func(st provider.Status) {
		now := r.s.cfg.Now()
		if st.State.Terminal() || (st.Message == msg && st.Progress == prog) || now.Sub(last) < time.Second {
			return
		}
		last, msg, prog = now, st.Message, st.Progress
		c := change(g.ID, EventProgress, activeStatus(st.State))
		c.Message, c.Progress = st.Message, st.Progress
		if c.Message == "" {
			c.Message = string(c.To)
		}
		if _, err := r.s.apply(ctx, c); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("runner: record stream progress", "generation", g.ID, "err", err)
		}
	}
}

func (r *Runner) streamPaused(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.streamFailed[id]
	if ok && r.s.cfg.Now().Sub(at) >= streamPause {
		delete(r.streamFailed, id)
		return false
	}
	return ok
}

func (r *Runner) pauseStream(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.s.cfg.Now()
	for k, at := range r.streamFailed {
		if now.Sub(at) >= streamPause {
			delete(r.streamFailed, k)
		}
	}
	r.streamFailed[id] = now
}

// submitWaiting is submit through a create held open until the job ends
// (its signal is wait-on-create and a held call was free; the caller
// gives it back). A create cut by a cancel or a drain is an unknown
// outcome like any lost reply: the next step reconciles it (Find), at
// once.
func (r *Runner) submitWaiting(ctx context.Context, sw provider.SubmitWaiter, p provider.Provider, m provider.Model, g *Generation, req provider.Request) (time.Duration, error) {
	hctx, stop := r.holdCtx(ctx, g.ID)
	var job provider.Job
	var st provider.Status
	var err error
	r.idle(ctx, func() { job, st, err = sw.SubmitWait(hctx, req, waitOnCreate) })
	cut := hctx.Err() != nil && ctx.Err() == nil
	stop()
	r.giveHeld(p.Name())
	if errors.Is(err, provider.ErrNotCreated) {
		if rerr := r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error { return tx.ResetSubmitting(ctx, g.ID) }); rerr != nil {
			return 0, rerr
		}
		return 0, err
	}
	if err != nil {
		if cut {
			return 0, nil // reconciled at once by the next step
		}
		return 0, submitError(err) // else the outcome is unknown: the next step reconciles
	}
	if err := r.recordSubmitted(ctx, m, g, job, provider.Status{State: provider.StateQueued, Message: submittedTo(p.Name())}); err != nil {
		return 0, err
	}
	r.noteSubmitted(g, p.Name(), job.ID)
	return r.observe(ctx, p, m, g, job, st, hook{})
}

// workerKey marks the context of a step run by a worker of Run (it holds
// one of r.sem's slots).
type workerKey struct{}

// idle runs fn, a held call, with the step's worker given back to Run
// (which may claim another generation meanwhile), and takes a worker
// again before it returns. Outside Run's workers it just runs fn.
func (r *Runner) idle(ctx context.Context, fn func()) {
	if ctx.Value(workerKey{}) == nil {
		fn()
		return
	}
	<-r.sem
	r.Kick()
	defer func() { r.sem <- struct{}{} }()
	fn()
}
