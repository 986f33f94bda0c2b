package generation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// RunnerConfig tunes the runner.
type RunnerConfig struct {
	// Workers bounds generations stepped at once.
	Workers int
	// Lease is how long a claimed generation is ours before another runner
	// may take it (crash recovery).
	Lease time.Duration
	// MaxOutputBytes caps one output file (0: provider.MaxOutputBytes of
	// the generation's kind); a larger one fails the generation, refunded.
	MaxOutputBytes int64
	// MaxAttempts of consecutive failed steps before a generation fails
	// with an internal error.
	MaxAttempts int
	// MaxLifetime is how long after creation a generation of each kind
	// may stay live: past it the runner ends it failed, refunds it and
	// asks the provider to cancel (a kind missing here takes
	// DefaultMaxLifetime's).
	MaxLifetime map[provider.Kind]time.Duration
	// LastLook is how long a step may still run once its generation is
	// past its lifetime (default 10 min): the provider is looked at once
	// more (a job that just finished completes), and a call that hangs
	// is cut then, so that the generation is abandoned.
	LastLook time.Duration
	// StorageGiveUp is how long an output copy may keep failing on storage
	// before the generation fails (a darkroom failure, not the provider's).
	StorageGiveUp time.Duration
	// WebhookBase is darkroom's public base URL; when set, providers that
	// accept webhooks get {WebhookBase}/webhooks/{provider} per job and
	// are polled only as a slow safety net.
	WebhookBase string
	// MaxInFlight caps an owner's outputs at the provider at once;
	// more wait queued (0 or nil: no cap).
	MaxInFlight func(owner string) int
	Logger      *slog.Logger
	// Drain is how long steps in flight may take to finish once Run's
	// context ends; then they are cancelled and their leases released.
	Drain time.Duration
	// Held bounds the status streams and waiting creates held at once per
	// provider (signal.go; default 16). A held call gives its worker back
	// while it waits (Workers bounds steps doing work, not connections
	// waiting). A job beyond it is polled.
	Held int
	// PollOnly is the scheduler before issue 39: no streams or waiting
	// creates, and NextPoll's fixed caps (BenchmarkCompletionLag compares
	// the two in one run).
	PollOnly bool
}

// DefaultMaxLifetime is each kind's maximum lifetime unless configured:
// far beyond the catalog's expected durations (seconds for an image,
// minutes for a video), so only a job that will never finish meets it.
var DefaultMaxLifetime = map[provider.Kind]time.Duration{
	provider.KindImage: time.Hour,
	provider.KindVideo: 6 * time.Hour,
}

// Runner drives generations through the provider: a durable queue in the
// database (next_check_at, attempts, lease), so work survives restarts.
type Runner struct {
	s     *Service
	cfg   RunnerConfig
	id    string
	kick  chan struct{}
	sem   chan struct{}
	mu    sync.Mutex
	fails map[string]int // consecutive step failures, in memory only
	// storageDown records when output copies of a generation started
	// failing on storage.
	storageDown map[string]time.Time
	// woken: generations woken by unverified deliveries, and when.
	woken map[string]time.Time
	// held: streams and waiting creates held now, per provider;
	// streamFailed: generations whose stream failed lately, and when
	// (signal.go).
	held         map[string]int
	streamFailed map[string]time.Time
	// previewMarks: the last preview frame stored per generation
	// (livepreview.go).
	previewMarks map[string]previewMark
	wg           sync.WaitGroup
	run          runState // drain.go
}

// NewRunner builds a runner for the service; the service's writes that
// make work due wake it.
func NewRunner(s *Service, cfg RunnerConfig) *Runner {
	if cfg.Workers == 0 {
		cfg.Workers = 16
	}
	if cfg.Lease == 0 {
		cfg.Lease = 2 * time.Minute
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 12
	}
	lifetimes := maps.Clone(DefaultMaxLifetime)
	for k, d := range cfg.MaxLifetime {
		if d > 0 {
			lifetimes[k] = d
		}
	}
	cfg.MaxLifetime = lifetimes
	if cfg.LastLook == 0 {
		cfg.LastLook = 10 * time.Minute
	}
	if cfg.StorageGiveUp == 0 {
		cfg.StorageGiveUp = 30 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Held <= 0 {
		cfg.Held = 16
	}
	r := &Runner{s: s, cfg: cfg, id: NewID(), kick: s.kicks, sem: make(chan struct{}, cfg.Workers), fails: map[string]int{}, storageDown: map[string]time.Time{}, woken: map[string]time.Time{},
		held: map[string]int{}, streamFailed: map[string]time.Time{}, previewMarks: map[string]previewMark{}}
	return r
}

// Kick wakes the runner to look for due work.
func (r *Runner) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run processes due generations until ctx ends, then waits for steps in
// flight.
func (r *Runner) Run(ctx context.Context) error {
	r.started(ctx)
	defer r.stopped()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var out outage
	// One runner per SQLite database: leases left by a killed process are
	// ours to take over at once instead of after they expire. A database
	// refusing writes at start is waited out like one failing later.
	for {
		err := r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error { return tx.ReleaseLeases(ctx) })
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		timer.Reset(out.failed(r.cfg, time.Now(), fmt.Errorf("release stale leases: %w", err)))
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
		case <-timer.C:
		}
	}
	for {
		err := r.claimAll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var wait time.Duration
		if err != nil {
			// Writes fail (disk full, I/O error): back off instead of
			// retrying at once, and say so at a bounded rate. A kick
			// (sent only after a write of someone else's succeeded) ends
			// the wait early.
			wait = out.failed(r.cfg, time.Now(), err)
		} else {
			out.recovered(r.cfg, time.Now())
			wait = time.Minute
			if due, err := r.s.store.NextDueAt(ctx); err == nil && !due.IsZero() {
				wait = max(due.Sub(r.s.cfg.Now()), time.Millisecond)
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
		case <-timer.C:
		}
	}
}

// claimAll starts a step for every due generation, as workers allow; it
// returns the error of a claim that failed to write.
func (r *Runner) claimAll(ctx context.Context) error {
	for ctx.Err() == nil {
		select {
		case r.sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		var row Row
		var claimed bool
		now := r.s.cfg.Now()
		err := r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
			var err error
			// Nothing due is an outcome, not a failure (a failing write
			// makes its batch mates run again).
			row, claimed, err = tx.Claim(ctx, r.id, now.Add(r.cfg.Lease), now)
			return err
		})
		if err != nil || !claimed {
			<-r.sem
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-r.sem }()
			r.step(context.WithValue(r.run.steps, workerKey{}, true), row)
		}()
	}
	return nil
}

// Write outages: the runner's claims back off exponentially from
// outageFirstWait to outageMaxWait while the database refuses writes, and
// log at most one line per outageLogEvery (plus one when writes succeed
// again).
const (
	outageFirstWait = 50 * time.Millisecond
	outageMaxWait   = 5 * time.Second
	outageLogEvery  = time.Minute
)

// outage tracks consecutive failed claims (Run's goroutine only).
type outage struct {
	failures   int       // in a row
	since      time.Time // first of them
	logged     time.Time // last line about them
	suppressed int       // failures since that line
}

// failed records a failed claim and returns how long to wait.
func (o *outage) failed(cfg RunnerConfig, now time.Time, err error) time.Duration {
	if o.failures == 0 {
		o.since = now
	}
	o.failures++
	o.suppressed++
	wait := min(outageFirstWait<<min(o.failures-1, 20), outageMaxWait)
	if o.failures == 1 || now.Sub(o.logged) >= outageLogEvery {
		cfg.Logger.Error("runner: database writes fail; backing off", "err", err,
			"failures", o.failures, "since", o.since.UTC().Format(time.RFC3339), "suppressed", o.suppressed-1, "next_try_in", wait)
		o.logged, o.suppressed = now, 0
	}
	return wait
}

// recovered ends an outage after a claim wrote again.
func (o *outage) recovered(cfg RunnerConfig, now time.Time) {
	if o.failures == 0 {
		return
	}
	cfg.Logger.Info("runner: database writes succeed again", "failures", o.failures, "outage", now.Sub(o.since).Round(time.Millisecond))
	*o = outage{}
}

// step does one unit of work on a claimed generation and reschedules it.
func (r *Runner) step(ctx context.Context, row Row) {
	// A panic (in a provider adapter, most likely) ends this generation,
	// not the process. Deferred first, it runs after the lease stopped.
	defer r.crashed(ctx, row)
	hold := r.holdLease(ctx, row)
	defer hold.stop()
	ctx = hold.ctx
	g, err := fromRow(row)
	if err != nil {
		r.fail(ctx, row.ID, ErrorInternal, "corrupt record: "+err.Error())
		return
	}
	// Deliveries up to seen are this step's to act on; a newer one means
	// look again at once. One that could not be used (a failed call) waits
	// for the retry, like any other.
	seen, err := r.s.store.LastPendingDelivery(ctx, g.ID)
	if err != nil {
		r.cfg.Logger.Warn("runner: read webhook deliveries", "generation", g.ID, "err", err)
	}
	// A provider call that hangs is cut once the lifetime (plus the last
	// look) has passed, so that the check below can end it.
	actx, cancel := context.WithTimeout(ctx, max(g.CreatedAt.Add(r.lifetime(g.Kind)).Sub(r.s.cfg.Now()), 0)+r.cfg.LastLook)
	stopPreviews := r.pumpPreviews(actx, g)
	next, err := r.advance(actx, g, row)
	stopPreviews()
	cancel()
	if hold.lost() || errors.Is(err, errLeaseLost) {
		return // another claim holds the row now: its step decides
	}
	next, ended := r.settle(ctx, g, next, err)
	if ended || next < 0 {
		r.forgetPreview(g.ID)
	}
	if ended {
		return
	}
	if next < 0 {
		r.wakeOwner(ctx, g.Owner)
		return // terminal; nothing to reschedule
	}
	if r.pastLifetime(g) {
		r.abandon(ctx, g, ErrorProvider, r.lifetimeMessage(g, row))
		return
	}
	// The reschedule hands the lease back: no renewal may race it.
	if hold.stop(); hold.lost() {
		return
	}
	if r.reschedule(ctx, g, row, seen, next, hold.until) {
		r.Kick() // the loop recomputes its next wake-up
	}
}

// settle takes the outcome of advance: a storage failure waits for
// storage, an output darkroom refused fails the generation refunded, a
// provider's permanent error fails it, a refusal by the adapter's own
// bound on calls at once waits queued (no attempt spent), another
// error counts an attempt (failing it after MaxAttempts) and backs off.
// It returns when to look again; ended: the generation was ended here.
func (r *Runner) settle(ctx context.Context, g *Generation, next time.Duration, err error) (_ time.Duration, ended bool) {
	var se *storageError
	if errors.As(err, &se) {
		next, err = r.storageOutage(ctx, g, se)
		if next < 0 {
			return next, true
		}
	} else {
		r.mu.Lock()
		delete(r.storageDown, g.ID)
		r.mu.Unlock()
	}
	if err == nil {
		r.mu.Lock()
		delete(r.fails, g.ID)
		r.mu.Unlock()
		return next, false
	}
	var refused *refusedOutput
	if errors.As(err, &refused) {
		if _, err := r.refundedFailure(ctx, g, ErrorProvider, refused.msg+"; nothing was kept", hook{}); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Error("runner: record failure", "generation", g.ID, "err", err)
		}
		return -1, true
	}
	var perm *provider.PermanentError
	if errors.As(err, &perm) {
		var sr *submitRefused
		r.providerFailed(ctx, g, perm.Message, errors.As(err, &sr), hook{})
		return -1, true
	}
	if errors.Is(err, provider.ErrAtCapacity) {
		return atCapacityWait(err), false
	}
	r.mu.Lock()
	r.fails[g.ID]++
	n := r.fails[g.ID]
	r.mu.Unlock()
	r.cfg.Logger.Warn("runner: step failed", "generation", g.ID, "attempt", n, "err", err)
	if n >= r.cfg.MaxAttempts {
		r.fail(ctx, g.ID, ErrorInternal, fmt.Sprintf("gave up after %d attempts: %v", n, err))
		return -1, true
	}
	next = backoff(n)
	var re *provider.RetryableError
	if errors.As(err, &re) && re.After > next {
		next = re.After
	}
	return next, false
}

// reschedule hands the row back, due in next, and reports whether it
// did. A delivery stored while we stepped (newer than seen) found the
// row leased, so its wake-up did nothing: the reschedule looks again at
// once. Deciding this inside the reschedule's transaction leaves no
// moment when the row looks idle with a delivery unseen.
//
// A database that refuses writes (down, restarting) is retried with
// backoff while the lease lasts (until), so the row is not stuck leased
// (up to a whole lease) once it is back.
func (r *Runner) reschedule(ctx context.Context, g *Generation, row Row, seen int64, next time.Duration, until time.Time) bool {
	err := r.untilWritten(ctx, until, func(ctx context.Context) error {
		now := r.s.cfg.Now()
		return r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
			at := now.Add(next)
			last, err := tx.LastPendingDelivery(ctx, g.ID)
			if err != nil {
				return err
			}
			if last > seen {
				at = now
			}
			return tx.Reschedule(ctx, g.ID, r.id, at, now, row.CancelRequested != 0)
		})
	})
	if err != nil && ctx.Err() == nil {
		// The lease runs out and the row is claimed again then.
		r.cfg.Logger.Error("runner: reschedule", "generation", g.ID, "err", err)
	}
	return err == nil
}

// untilWritten runs write until it succeeds, backing off as claims do
// (outageFirstWait doubling to outageMaxWait) while the database refuses
// writes; it gives up with the last error when ctx ends or the next try
// would come after until.
func (r *Runner) untilWritten(ctx context.Context, until time.Time, write func(context.Context) error) error {
	err := write(ctx)
	for wait := outageFirstWait; err != nil; wait = min(2*wait, outageMaxWait) {
		if ctx.Err() != nil || !r.s.cfg.Now().Add(wait).Before(until) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		err = write(ctx)
	}
	return nil
}

// lifetime is the maximum lifetime of a generation of kind k.
func (r *Runner) lifetime(k provider.Kind) time.Duration {
	if d, ok := r.cfg.MaxLifetime[k]; ok {
		return d
	}
	return slices.Max(slices.Collect(maps.Values(r.cfg.MaxLifetime)))
}

// pastLifetime reports whether g has been live longer than its kind
// allows.
func (r *Runner) pastLifetime(g *Generation) bool {
	return !g.Status.Terminal() && r.s.cfg.Now().Sub(g.CreatedAt) > r.lifetime(g.Kind)
}

// lifetimeMessage says why a generation past its lifetime ended.
func (r *Runner) lifetimeMessage(g *Generation, row Row) string {
	limit := humanDuration(r.lifetime(g.Kind))
	if row.SubmitState == "" {
		return fmt.Sprintf("the %s did not start within %s, the longest this server keeps one waiting", g.Kind, limit)
	}
	return fmt.Sprintf("%s took the %s but did not finish it within %s, the longest this server waits for one",
		providerLabel(g.Provider), g.Kind, limit)
}

func providerLabel(name string) string {
	if name == "" {
		return "the provider"
	}
	return "the provider (" + name + ")"
}

// humanDuration writes d for a person: "1 hour", "90 minutes", "6 hours".
func humanDuration(d time.Duration) string {
	plural := func(n int64, unit string) string {
		if n == 1 {
			return "1 " + unit
		}
		return fmt.Sprintf("%d %ss", n, unit)
	}
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	}
	return plural(int64((d+time.Second-1)/time.Second), "second")
}

// abandon ends a live generation failed with credits refunded (the
// lifecycle's abandon event: a compare-and-set, so a generation that
// ended meanwhile keeps its end), then asks the provider, once and
// without waiting on it, to cancel a job it holds. Deciding first means
// a provider that hangs on Cancel too cannot keep the generation live.
func (r *Runner) abandon(ctx context.Context, g *Generation, kind ErrorKind, why string) {
	after, err := r.refundedFailure(ctx, g, kind, why, hook{})
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Error("runner: record abandon", "generation", g.ID, "err", err)
		}
		return
	}
	if after.Status != StatusFailed || after.ErrorMessage != why {
		return // it ended otherwise meanwhile
	}
	r.cfg.Logger.Warn("runner: gave up on a generation", "generation", g.ID, "provider", g.Provider, "reason", why)
	// The job as stored now (the step may have submitted it); the lease
	// ended with the change, so nothing below depends on it.
	ctx = context.WithoutCancel(ctx)
	row, err := r.s.store.Generation(ctx, g.ID)
	p, ok := r.s.providers[g.Provider]
	var job provider.Job
	if err != nil || !ok || row.SubmitState != "submitted" || json.Unmarshal([]byte(row.ProviderJob), &job) != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, abandonCancelWait)
	defer cancel()
	if err := safeCall(func() error { _, err := p.Cancel(cctx, job); return err }); err != nil {
		r.cfg.Logger.Warn("runner: cancel of an abandoned job", "generation", g.ID, "provider", g.Provider, "err", err)
	}
}

func credits(n int64) string {
	if n == 1 {
		return "its 1 credit was"
	}
	return fmt.Sprintf("its %d credits were", n)
}

// abandonCancelWait bounds the cancel request for an abandoned job.
const abandonCancelWait = 30 * time.Second

// safeCall runs fn, turning a panic into an error.
func safeCall(fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return fn()
}

// crashed is step's last defer: a panic anywhere in the step (a provider
// adapter's Submit, Status, Cancel, Find or output download, most
// likely) is logged with its stack and ends the generation failed,
// refunded, instead of the process. A bug that panics would panic again
// on every retry, so there is none.
func (r *Runner) crashed(ctx context.Context, row Row) {
	v := recover()
	if v == nil {
		return
	}
	r.cfg.Logger.Error("runner: step panicked", "generation", row.ID, "provider", row.Provider, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	g, err := fromRow(row)
	if err != nil {
		r.fail(ctx, row.ID, ErrorInternal, "an internal error stopped it (logged on the server)")
		return
	}
	r.abandon(ctx, g, ErrorInternal, "an internal error in darkroom stopped it while it talked to "+providerLabel(g.Provider)+" (logged on the server)")
}

// storageError marks a failure to write outputs into our own store: the
// provider's job is done, so the runner waits for storage instead of
// counting attempts.
type storageError struct{ err error }

func (e *storageError) Error() string { return "storage: " + e.err.Error() }
func (e *storageError) Unwrap() error { return e.err }

// storageOutage keeps the generation running with a message saying it
// waits for storage, retrying with backoff, and fails it (inside
// darkroom) once storage has been failing for StorageGiveUp.
func (r *Runner) storageOutage(ctx context.Context, g *Generation, se *storageError) (time.Duration, error) {
	now := r.s.cfg.Now()
	r.mu.Lock()
	since, ok := r.storageDown[g.ID]
	if !ok {
		since = now
		r.storageDown[g.ID] = now
	}
	r.mu.Unlock()
	if now.Sub(since) >= r.cfg.StorageGiveUp {
		r.mu.Lock()
		delete(r.storageDown, g.ID)
		r.mu.Unlock()
		r.fail(ctx, g.ID, ErrorInternal, fmt.Sprintf("output storage unreachable for %s: %v", r.cfg.StorageGiveUp, se.err))
		return -1, nil
	}
	msg := fmt.Sprintf("running: the result is ready; waiting for storage to come back (since %s): %v", since.UTC().Format(time.RFC3339), se.err)
	c := change(g.ID, EventProgress, StatusRunning)
	c.Message, c.Progress = msg, g.Progress
	_, err := r.s.apply(ctx, c)
	return min(backoff(int(now.Sub(since)/time.Second)+1), 30*time.Second), err
}

// backoff is exponential with jitter, 1 s doubling to a 60 s cap.
// atCapacityWait is how long a generation refused by its adapter's own
// bound on calls at once waits queued before it is tried again: the
// adapter's hint (default 2 s) plus up to a quarter more, so the ones
// refused together do not all come back at once. It spends no attempt
// (settle): the calls in flight may take minutes, and waiting for them
// is not failing.
func atCapacityWait(err error) time.Duration {
	d := 2 * time.Second
	var re *provider.RetryableError
	if errors.As(err, &re) && re.After > 0 {
		d = re.After
	}
	return d + rand.N(d/4+1)
}

func backoff(n int) time.Duration {
	d := time.Second << min(n-1, 6)
	d = min(d, time.Minute)
	return d/2 + rand.N(d/2+1)
}

// wakeOwner starts the owner's generations held back by the in-flight
// cap, now that one of theirs has ended (no timer: the end wakes them).
func (r *Runner) wakeOwner(ctx context.Context, owner string) {
	if r.cfg.MaxInFlight == nil {
		return
	}
	err := r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		return tx.WakeOwnerQueued(ctx, owner, r.s.cfg.Now())
	})
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Error("runner: wake held generations", "owner", owner, "err", err)
		}
		return
	}
	r.Kick()
}

func (r *Runner) fail(ctx context.Context, id string, kind ErrorKind, msg string) {
	r.failWith(ctx, id, kind, msg, hook{})
}

// providerFailed ends g failed with the provider's reason. Where the
// vendor bills no refused or failed request (provider.RefundsFailures),
// or not this one (notBilled: provider.Status.NotBilled), the credits
// are refunded too.
func (r *Runner) providerFailed(ctx context.Context, g *Generation, msg string, notBilled bool, h hook) {
	rf, ok := provider.As[provider.RefundsFailures](r.s.providers[g.Provider])
	if !notBilled && (!ok || !rf.RefundsFailures()) {
		r.failWith(ctx, g.ID, ErrorProvider, msg, h)
		return
	}
	if _, err := r.refundedFailure(ctx, g, ErrorProvider, msg, h); err != nil && ctx.Err() == nil {
		r.cfg.Logger.Error("runner: record failure", "generation", g.ID, "err", err)
	}
}

// refundedFailure ends g failed for why with its credits refunded (the
// abandon event), folding the deliveries h names, and wakes its owner's
// queued generations.
func (r *Runner) refundedFailure(ctx context.Context, g *Generation, kind ErrorKind, why string, h hook) (*Generation, error) {
	r.mu.Lock()
	delete(r.fails, g.ID)
	delete(r.storageDown, g.ID)
	r.mu.Unlock()
	c := change(g.ID, EventAbandon, "")
	c.ErrorKind, c.ErrorMessage = kind, why
	c.Message = fmt.Sprintf("failed: %s; %s refunded", why, credits(g.Credits))
	after, err := r.apply(ctx, c, h)
	if err != nil {
		return nil, err
	}
	r.wakeOwner(ctx, g.Owner)
	return after, nil
}

// failWith is fail, consuming the deliveries h folded in the same
// transaction.
func (r *Runner) failWith(ctx context.Context, id string, kind ErrorKind, msg string, h hook) {
	r.mu.Lock()
	delete(r.fails, id)
	r.mu.Unlock()
	c := change(id, EventFail, "")
	c.Message, c.ErrorKind, c.ErrorMessage = "failed: "+msg, kind, msg
	if kind == ErrorInternal {
		c.Message = "failed inside darkroom: " + msg
	}
	g, err := r.apply(ctx, c, h)
	if err != nil && ctx.Err() == nil {
		r.cfg.Logger.Error("runner: record failure", "generation", id, "err", err)
	}
	if g != nil {
		r.wakeOwner(ctx, g.Owner)
	}
}
