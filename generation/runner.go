package generation

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/gif"  // DecodeConfig for output dimensions
	_ "image/jpeg" // likewise
	_ "image/png"  // likewise
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/storage/blob"
)

// RunnerConfig tunes the runner.
type RunnerConfig struct {
	// Workers bounds generations stepped at once.
	Workers int
	// Lease is how long a claimed generation is ours before another runner
	// may take it (crash recovery).
	Lease time.Duration
	// MaxOutputBytes caps one output file.
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
	// MaxInFlight caps an owner's generations at the provider at once;
	// more wait queued (0 or nil: no cap).
	MaxInFlight func(owner string) int
	Logger      *slog.Logger
	// Drain is how long steps in flight may take to finish once Run's
	// context ends; then they are cancelled and their leases released.
	Drain time.Duration
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
	wg    sync.WaitGroup
	run   runState // drain.go
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
	if cfg.MaxOutputBytes == 0 {
		cfg.MaxOutputBytes = 2 << 30
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
	r := &Runner{s: s, cfg: cfg, id: NewID(), kick: s.kicks, sem: make(chan struct{}, cfg.Workers), fails: map[string]int{}, storageDown: map[string]time.Time{}, woken: map[string]time.Time{}}
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
			r.step(r.run.steps, row)
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
	next, err := r.advance(actx, g, row)
	cancel()
	if hold.lost() || errors.Is(err, errLeaseLost) {
		return // another claim holds the row now: its step decides
	}
	var se *storageError
	if errors.As(err, &se) {
		next, err = r.storageOutage(ctx, g, se)
		if next < 0 {
			return
		}
	} else {
		r.mu.Lock()
		delete(r.storageDown, g.ID)
		r.mu.Unlock()
	}
	if err != nil {
		var perm *provider.PermanentError
		if errors.As(err, &perm) {
			r.fail(ctx, g.ID, ErrorProvider, perm.Message)
			return
		}
		r.mu.Lock()
		r.fails[g.ID]++
		n := r.fails[g.ID]
		r.mu.Unlock()
		r.cfg.Logger.Warn("runner: step failed", "generation", g.ID, "attempt", n, "err", err)
		if n >= r.cfg.MaxAttempts {
			r.fail(ctx, g.ID, ErrorInternal, fmt.Sprintf("gave up after %d attempts: %v", n, err))
			return
		}
		next = backoff(n)
		var re *provider.RetryableError
		if errors.As(err, &re) && re.After > next {
			next = re.After
		}
	} else {
		r.mu.Lock()
		delete(r.fails, g.ID)
		r.mu.Unlock()
	}
	if next < 0 {
		r.wakeOwner(ctx, g.Owner)
		return // terminal; nothing to reschedule
	}
	if r.pastLifetime(g) {
		r.abandon(ctx, g, ErrorProvider, r.lifetimeMessage(g, row))
		return
	}
	// A delivery stored while we stepped found the row leased, so its
	// wake-up did nothing: the reschedule looks again at once. Deciding
	// this inside the reschedule's transaction leaves no moment when the
	// row looks idle with a delivery unseen.
	// The reschedule hands the lease back: no renewal may race it.
	if hold.stop(); hold.lost() {
		return
	}
	// A database that refuses writes (down, restarting) is retried with
	// backoff while the lease lasts, so the row is not stuck leased (up
	// to a whole lease) once it is back.
	for wait := outageFirstWait; ; wait = min(2*wait, outageMaxWait) {
		now := r.s.cfg.Now()
		err := r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
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
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if !now.Add(wait).Before(hold.until) {
			// The lease runs out and the row is claimed again then.
			r.cfg.Logger.Error("runner: reschedule", "generation", g.ID, "err", err)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	r.Kick() // the loop recomputes its next wake-up
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
	r.mu.Lock()
	delete(r.fails, g.ID)
	delete(r.storageDown, g.ID)
	r.mu.Unlock()
	c := change(g.ID, EventAbandon, "")
	c.ErrorKind, c.ErrorMessage = kind, why
	c.Message = fmt.Sprintf("failed: %s; %s refunded", why, credits(g.Credits))
	after, err := r.s.apply(ctx, c)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Error("runner: record abandon", "generation", g.ID, "err", err)
		}
		return
	}
	r.wakeOwner(ctx, g.Owner)
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
func backoff(n int) time.Duration {
	d := time.Second << min(n-1, 6)
	d = min(d, time.Minute)
	return d/2 + rand.N(d/2+1)
}

// advance moves g one step on and returns when to look again (negative:
// never, it is terminal).
func (r *Runner) advance(ctx context.Context, g *Generation, row Row) (time.Duration, error) {
	if g.Status.Terminal() || g.Status == StatusReserved {
		return -1, nil
	}
	p, ok := r.s.providers[g.Provider]
	if !ok {
		return 0, &provider.PermanentError{Message: fmt.Sprintf("provider %q is not configured on this server", g.Provider)}
	}
	m, _ := r.s.Model(g.ModelID)
	var job provider.Job
	switch row.SubmitState {
	case "":
		if g.CancelRequested {
			return r.cancelUnsubmitted(ctx, g)
		}
		held, err := r.markSubmitting(ctx, g, row.Attempts)
		if errors.Is(err, errNoLongerQueued) {
			return -1, nil // cancelled meanwhile (or gone): nothing to do
		}
		if errors.Is(err, errLeaseLost) {
			r.cfg.Logger.Warn("runner: lease lost before submit; not submitted", "generation", g.ID)
			return 0, err // the claim holding the row submits
		}
		if err != nil || held >= 0 {
			return r.holdOverCap(ctx, g, held, err)
		}
		return r.submit(ctx, p, m, g)
	case "submitting":
		return r.reconcile(ctx, p, m, g)
	}
	if err := json.Unmarshal([]byte(row.ProviderJob), &job); err != nil {
		return 0, fmt.Errorf("decode provider job: %w", err)
	}
	if row.CancelRequested == 1 {
		// Ask the provider once; afterwards polling tells how it ended.
		st, err := p.Cancel(ctx, job)
		if err != nil {
			return 0, err
		}
		if err := r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error { return tx.MarkCancelSent(ctx, g.ID) }); err != nil {
			return 0, err
		}
		return r.observe(ctx, p, m, g, job, st, hook{})
	}
	hook, err := r.pendingWebhook(ctx, g.ID, job.ID)
	if err != nil {
		return 0, err
	}
	var st provider.Status
	if hook.ok && hook.ev.Trusted && hook.ev.Status != nil && hook.ev.JobID == job.ID {
		st = *hook.ev.Status // a signed delivery states the status: no call needed
	} else if st, err = p.Status(ctx, job); err != nil {
		return 0, err
	}
	return r.observe(ctx, p, m, g, job, st, hook)
}

// reconcile settles a submit whose outcome is unknown (a crash or a lost
// reply between MarkSubmitting and MarkSubmitted) without ever making a
// second job where the provider cannot tell.
func (r *Runner) reconcile(ctx context.Context, p provider.Provider, m provider.Model, g *Generation) (time.Duration, error) {
	hook, err := r.pendingWebhook(ctx, g.ID, "")
	if err != nil {
		return 0, err
	}
	if hook.upto > 0 {
		// A trusted delivery bound to this generation by its key names
		// the job its submit made. Rebuild it for the generation's own
		// model and confirm it with one Status call before binding it
		// (the deliveries stay stored until that succeeds). A job the
		// provider does not show us is not ours: the next one is tried.
		rb, _ := provider.As[provider.JobRebuilder](p)
		for _, id := range hook.jobs {
			if rb == nil {
				break
			}
			job, err := rb.RebuildJob(m, id)
			if err != nil {
				continue
			}
			st, err := p.Status(ctx, job)
			var perm *provider.PermanentError
			if errors.Is(err, provider.ErrNotFound) || errors.As(err, &perm) {
				r.cfg.Logger.Warn("runner: webhook names a job the provider does not confirm", "generation", g.ID, "job", id, "err", err)
				continue
			}
			if err != nil {
				return 0, err
			}
			if err := r.markSubmitted(ctx, g.ID, job, st); err != nil {
				return 0, err
			}
			return r.observe(ctx, p, m, g, job, st, hook)
		}
		// Nothing here binds a job: the deliveries are spent.
		if err := r.consume(ctx, g.ID, hook); err != nil {
			return 0, err
		}
	}
	found, ok, err := p.Find(ctx, g.ID)
	switch {
	case err == nil && ok:
		if err := r.markSubmitted(ctx, g.ID, found, provider.Status{State: provider.StateQueued, Message: "submitted to " + p.Name()}); err != nil {
			return 0, err
		}
		return 0, nil
	case err == nil:
		return r.submit(ctx, p, m, g) // the provider says there is none
	case !errors.Is(err, provider.ErrUnsupported):
		return 0, err
	}
	if dr, risky := provider.As[provider.DuplicateRisk](p); !risky || !dr.ResubmitMayDuplicate() {
		return r.submit(ctx, p, m, g) // idempotent submit: safe to repeat
	}
	// Resubmitting could run (and bill) the job twice: wait for the
	// provider's webhook to name it, within reason.
	waited := r.s.cfg.Now().Sub(g.UpdatedAt)
	limit := 4*m.ExpectedDuration + time.Minute
	if waited >= limit {
		return 0, &provider.PermanentError{Message: fmt.Sprintf("%s did not confirm the submit and cannot be asked; not resubmitted, to avoid a duplicate paid job", p.Name())}
	}
	return min(limit-waited, 30*time.Second), nil
}

// Webhook takes a verified (Trusted) delivery for provider name: it is
// stored (once per delivery id) for the generation it binds to, and that
// generation is looked at now. It returns only once the delivery is
// durable, so the caller may then acknowledge it; a delivery for no
// generation of ours is dropped.
//
// Binding goes by what the delivery's signature covers: the generation
// holding the job it names; else, when the adapter vouched for its Key
// (see provider.WebhookEvent), the generation of that key, only while
// that generation has no job yet (its submit's outcome is unknown). An
// untrusted event binds nothing: at most it wakes the generation already
// holding the job it claims.
func (r *Runner) Webhook(ctx context.Context, name string, ev provider.WebhookEvent) error {
	if !ev.Trusted {
		r.wakeJob(ctx, name, ev.JobID)
		return nil
	}
	id := ""
	if ev.JobID != "" {
		row, err := r.s.store.GenerationByJob(ctx, name, ev.JobID)
		switch {
		case err == nil && row.Status.Terminal():
			r.s.cfg.Metrics.Webhook(name, "ignored")
			return nil // already ended: nothing to do
		case err == nil:
			id = row.ID
		case !errors.Is(err, ErrNotFound):
			return err
		}
	}
	if id == "" && ev.Key != "" && ev.JobID != "" {
		row, err := r.s.store.Generation(ctx, ev.Key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if err == nil && row.Provider == name && !row.Status.Terminal() && row.SubmitState == "submitting" {
			id = row.ID
		}
	}
	if id == "" {
		r.s.cfg.Metrics.Webhook(name, "ignored")
		return nil // not ours (or purged): nothing to do
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	delivery := ev.DeliveryID
	if delivery == "" {
		sum := sha256.Sum256(body)
		delivery = "sha256:" + hex.EncodeToString(sum[:])
	}
	now := r.s.cfg.Now()
	verdict := "accepted"
	if err := r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		fresh, err := tx.InsertDelivery(ctx, Delivery{Provider: name, DeliveryID: delivery, GenerationID: id, Event: string(body), ReceivedAt: now})
		verdict = map[bool]string{true: "accepted", false: "duplicate"}[fresh]
		if err != nil || !fresh {
			return err
		}
		return tx.WakeNow(ctx, id, now)
	}); err != nil {
		return err
	}
	r.s.cfg.Metrics.Webhook(name, verdict)
	r.Kick()
	return nil
}

// unverifiedWakeEvery bounds how often deliveries that could not be
// verified may wake one generation.
const unverifiedWakeEvery = 30 * time.Second

// wakeJob makes the generation already holding provider name's job jobID
// look at it now, at most once per unverifiedWakeEvery: all an unverified
// delivery may cause is a Status call the runner would make anyway.
func (r *Runner) wakeJob(ctx context.Context, name, jobID string) {
	if jobID == "" {
		return
	}
	row, err := r.s.store.GenerationByJob(ctx, name, jobID)
	if err != nil || row.Status.Terminal() || row.SubmitState != "submitted" {
		return
	}
	now := r.s.cfg.Now()
	r.mu.Lock()
	for id, at := range r.woken {
		if now.Sub(at) >= unverifiedWakeEvery || now.Before(at) {
			delete(r.woken, id)
		}
	}
	_, recent := r.woken[row.ID]
	if !recent {
		r.woken[row.ID] = now
	}
	r.mu.Unlock()
	if recent {
		return
	}
	if err := r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error { return tx.WakeNow(ctx, row.ID, now) }); err == nil {
		r.Kick()
	}
}

// ErrMalformedWebhook wraps a delivery the provider's parser could not
// read.
var ErrMalformedWebhook = errors.New("malformed webhook delivery")

// Deliver verifies a raw delivery with the provider's parser and takes
// it (see Webhook). A bad signature is provider.ErrWebhookUnauthenticated
// and changes nothing; a delivery that cannot be verified now is
// provider.ErrWebhookUnverifiable (to be retried by the provider) and at
// most wakes the generation holding the job it claims; a body the parser
// cannot read wraps ErrMalformedWebhook. Deduplication (the parser's,
// then webhook_deliveries') happens only after verification; a verified
// delivery that could not be stored is forgotten by the parser, so its
// retry is taken.
//
// A panic in the parser (or below) is logged and returned as an error,
// answered as a delivery not stored: the provider retries it, polling
// covers the job meanwhile, and the process keeps serving.
func (r *Runner) Deliver(ctx context.Context, name string, parser provider.WebhookParser, h http.Header, q url.Values, body []byte) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.cfg.Logger.Error("runner: webhook intake panicked", "provider", name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = fmt.Errorf("webhook intake for %s failed inside darkroom (logged)", name)
		}
	}()
	ev, err := parser.ParseWebhook(ctx, h, q, body)
	switch {
	case errors.Is(err, provider.ErrWebhookUnverifiable):
		r.wakeJob(ctx, name, ev.JobID)
		return err
	case errors.Is(err, provider.ErrWebhookUnauthenticated):
		return err
	case err != nil:
		return fmt.Errorf("%w: %v", ErrMalformedWebhook, err)
	case ev.Duplicate:
		r.s.cfg.Metrics.Webhook(name, "duplicate")
		return nil
	}
	if err := r.Webhook(ctx, name, ev); err != nil {
		if f, ok := parser.(provider.WebhookForgetter); ok && ev.DeliveryID != "" {
			f.ForgetWebhook(ev.DeliveryID)
		}
		return err
	}
	return nil
}

// hook is what a generation's stored deliveries say, and how far they
// were read.
type hook struct {
	ev   provider.WebhookEvent
	jobs []string // for a generation without a job: job ids its deliveries name, in order
	upto int64
	ok   bool
}

// pendingWebhook folds the generation's unconsumed deliveries, in arrival
// order, into the one to act on: the latest, except that a trusted
// terminal status is never replaced by a later non-terminal one (a late
// retry of an earlier delivery). jobID is the generation's job ("" when
// it has none yet): a delivery about another job is read past (consumed
// with the rest) but never acted on, and an untrusted one (none is stored
// any more) likewise.
func (r *Runner) pendingWebhook(ctx context.Context, id, jobID string) (hook, error) {
	ds, err := r.s.store.PendingDeliveries(ctx, id)
	if err != nil || len(ds) == 0 {
		return hook{}, err
	}
	var h hook
	for _, d := range ds {
		h.upto = d.Seq
		var ev provider.WebhookEvent
		if err := json.Unmarshal([]byte(d.Event), &ev); err != nil {
			r.cfg.Logger.Error("runner: undecodable webhook delivery", "generation", id, "seq", d.Seq, "err", err)
			continue
		}
		if !ev.Trusted || ev.JobID == "" {
			continue
		}
		if jobID == "" {
			if ev.Key == id && !slices.Contains(h.jobs, ev.JobID) {
				h.jobs = append(h.jobs, ev.JobID)
			}
			continue
		}
		if ev.JobID != jobID {
			continue
		}
		if h.ok && terminalWebhook(h.ev) && !terminalWebhook(ev) {
			continue
		}
		h.ev, h.ok = ev, true
	}
	return h, nil
}

func terminalWebhook(ev provider.WebhookEvent) bool {
	return ev.Trusted && ev.Status != nil && ev.Status.State.Terminal()
}

// apply makes a change and, in the same transaction, consumes the
// deliveries h folded (whether or not the change still applied: a
// terminal generation has no use for them).
func (r *Runner) apply(ctx context.Context, c Change, h hook) (*Generation, error) {
	if h.upto == 0 {
		return r.s.apply(ctx, c)
	}
	return r.s.change(ctx, c.ID, func(ctx context.Context, tx Tx, at time.Time) (bool, error) {
		c.At = at
		ok, err := tx.Apply(ctx, c)
		if err == nil {
			err = tx.ConsumeDeliveries(ctx, c.ID, h.upto, at)
		}
		return ok, err
	})
}

// consume marks the deliveries h folded as applied.
func (r *Runner) consume(ctx context.Context, id string, h hook) error {
	if h.upto == 0 {
		return nil
	}
	return r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		return tx.ConsumeDeliveries(ctx, id, h.upto, r.s.cfg.Now())
	})
}

// webhooks reports whether p's jobs announce their end by webhook.
func (r *Runner) webhooks(p provider.Provider) bool {
	_, ok := provider.As[provider.WebhookParser](p)
	return ok && r.cfg.WebhookBase != ""
}

// nextPoll spaces status checks by the model's expected duration:
// adaptive backoff without webhooks, a slow safety poll with them.
func (r *Runner) nextPoll(p provider.Provider, m provider.Model, g *Generation, st provider.Status, checks int64, submittedAt time.Time) time.Duration {
	progressed := st.Progress > g.Progress+0.005 || (g.Status == StatusQueued && st.State == provider.StateRunning)
	return provider.NextPoll(m.ExpectedDuration, r.s.cfg.Now().Sub(submittedAt), int(checks), progressed, r.webhooks(p), provider.Jitter(0.1))
}

// markSubmitting records that the provider is about to be called, unless
// the owner already has the in-flight maximum at the provider: both are
// decided in one transaction, so concurrent steps never exceed the cap.
// held is the owner's count in flight when the cap holds it back, else -1.
// The same transaction renews the step's lease (claim: the claim's
// attempts): the provider is called only by the claim holding the row.
func (r *Runner) markSubmitting(ctx context.Context, g *Generation, claim int64) (held int64, err error) {
	limit := 0
	if r.cfg.MaxInFlight != nil {
		limit = r.cfg.MaxInFlight(g.Owner)
	}
	now := r.s.cfg.Now()
	gone := false
	lost := false
	err = r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		held, gone, lost = -1, false, false
		ok, err := tx.RenewLease(ctx, g.ID, r.id, claim, now.Add(r.cfg.Lease))
		if err != nil || !ok {
			lost = err == nil
			return err
		}
		if limit > 0 {
			if err := tx.LockOwner(ctx, g.Owner); err != nil {
				return err
			}
			n, err := tx.CountInFlight(ctx, g.Owner)
			if err != nil {
				return err
			}
			if n >= int64(limit) {
				held = n
				return nil
			}
		}
		c := change(g.ID, EventSubmit, "")
		c.At = now
		ok, err = tx.Apply(ctx, c)
		gone = err == nil && !ok // an outcome, not a failed write
		return err
	})
	switch {
	case err == nil && lost:
		err = errLeaseLost
	case err == nil && gone:
		err = errNoLongerQueued
	}
	return held, err
}

var errNoLongerQueued = errors.New("no longer queued")

// holdOverCap keeps a generation queued while its owner has the maximum in
// flight, and says when to look again.
func (r *Runner) holdOverCap(ctx context.Context, g *Generation, n int64, err error) (time.Duration, error) {
	if err != nil {
		return 0, err
	}
	c := change(g.ID, EventProgress, StatusQueued)
	r.s.cfg.Metrics.InFlightHold()
	c.Message = fmt.Sprintf("%d of your generations are in flight (limit %d); this one starts when one finishes", n, r.cfg.MaxInFlight(g.Owner))
	_, err = r.s.apply(ctx, c)
	// The end of one of the owner's generations wakes this one; the long
	// fallback only covers an end seen by another process.
	return time.Minute, err
}

func (r *Runner) cancelUnsubmitted(ctx context.Context, g *Generation) (time.Duration, error) {
	_, _, err := r.s.cancel(ctx, g.ID)
	return -1, err
}

func (r *Runner) submit(ctx context.Context, p provider.Provider, m provider.Model, g *Generation) (time.Duration, error) {
	req := provider.Request{
		IdempotencyKey:  g.ID,
		Model:           m,
		Prompt:          g.Prompt,
		NegativePrompt:  g.Params.NegativePrompt,
		AspectRatio:     g.Params.AspectRatio,
		DurationSeconds: g.Params.DurationSeconds,
		Deadline:        g.CreatedAt.Add(r.lifetime(g.Kind)),
	}
	if g.Params.Seed != nil {
		req.Seed = *g.Params.Seed
	}
	if in := g.Params.InputImage; in != nil {
		url, _, err := r.s.Link(ctx, *in)
		if err != nil {
			return 0, err
		}
		key := in.Key
		req.InputImage = &provider.Input{MimeType: in.MimeType, URL: url, Open: func(ctx context.Context) (io.ReadCloser, error) {
			rc, _, err := r.s.cfg.Blobs.Open(ctx, key)
			return rc, err
		}}
	}
	if r.webhooks(p) {
		req.WebhookURL = r.cfg.WebhookBase + "/webhooks/" + p.Name()
	}
	job, err := p.Submit(ctx, req)
	if errors.Is(err, provider.ErrNotCreated) {
		// Surely no job: the next attempt may submit afresh.
		if rerr := r.s.store.Update(ctx, func(ctx context.Context, tx Tx) error { return tx.ResetSubmitting(ctx, g.ID) }); rerr != nil {
			return 0, rerr
		}
		return 0, err
	}
	if err != nil {
		return 0, err // outcome unknown: the next step reconciles
	}
	st := provider.Status{State: provider.StateQueued, Message: "submitted to " + p.Name()}
	if err := r.markSubmitted(ctx, g.ID, job, st); err != nil {
		return 0, err
	}
	r.noteSubmitted(g, p.Name(), job.ID)
	// Look once right away: fast providers (the local one at latency 0)
	// are often done already.
	st, err = p.Status(ctx, job)
	if err != nil {
		return r.nextPoll(p, m, g, st, 1, r.s.cfg.Now()), nil
	}
	return r.observe(ctx, p, m, g, job, st, hook{})
}

func (r *Runner) markSubmitted(ctx context.Context, id string, job provider.Job, st provider.Status) error {
	jb, _ := json.Marshal(job)
	c := change(id, EventSubmitted, activeStatus(st.State))
	c.Job, c.JobID, c.Message, c.Progress = string(jb), job.ID, st.Message, st.Progress
	_, err := r.s.apply(ctx, c)
	return err
}

// observe records a provider status and decides when to look again. The
// webhook deliveries h folded (if any) are consumed in the same
// transaction as the change they cause.
func (r *Runner) observe(ctx context.Context, p provider.Provider, m provider.Model, g *Generation, job provider.Job, st provider.Status, h hook) (time.Duration, error) {
	switch st.State {
	case provider.StateCompleted:
		if g.CancelRequested {
			// The job finished before the cancel landed: it completes.
			st.Message = "completed before the cancel request reached the provider"
		}
		outs, err := r.copyOutputs(ctx, p, g, job, st.Outputs)
		if err != nil {
			return 0, err
		}
		ob, _ := json.Marshal(outs)
		msg := st.Message
		if msg == "" || !strings.Contains(msg, "before the cancel") {
			msg = fmt.Sprintf("completed: %d output(s)", len(outs))
		}
		c := change(g.ID, EventComplete, "")
		c.Message, c.Outputs = msg, string(ob)
		_, err = r.apply(ctx, c, h)
		return -1, err
	case provider.StateFailed:
		msg := st.Error
		if msg == "" {
			msg = "the provider reported a failure without a message"
		}
		r.failWith(ctx, g.ID, ErrorProvider, msg, h)
		return -1, nil
	case provider.StateCancelled:
		c := change(g.ID, EventCancelled, "")
		c.Message = "cancelled by the provider at our request"
		_, err := r.apply(ctx, c, h)
		return -1, err
	}
	status := activeStatus(st.State)
	msg := st.Message
	if msg == "" {
		msg = string(status)
	}
	c := change(g.ID, EventProgress, status)
	c.Message, c.Progress = msg, st.Progress
	after, err := r.apply(ctx, c, h)
	if err != nil {
		return 0, err
	}
	if after.Status != g.Status {
		r.s.noteStatus(after, string(after.Status))
	}
	return r.nextPoll(p, m, g, st, after.Checks, after.SubmittedAt), nil
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

// copyOutputs streams every provider output into the blob store. A
// generation is completed only once all its outputs are ours.
func (r *Runner) copyOutputs(ctx context.Context, p provider.Provider, g *Generation, job provider.Job, outs []provider.Output) ([]Output, error) {
	if len(outs) == 0 {
		return nil, &provider.PermanentError{Message: "the provider reported success but returned no output"}
	}
	res := make([]Output, 0, len(outs))
	for i, o := range outs {
		out, err := r.copyOne(ctx, p, g, job, i, o)
		if err != nil {
			return nil, fmt.Errorf("copy output %d: %w", i, err)
		}
		res = append(res, out)
	}
	return res, nil
}

func (r *Runner) copyOne(ctx context.Context, p provider.Provider, g *Generation, job provider.Job, i int, o provider.Output) (Output, error) {
	rc, err := p.OpenOutput(ctx, job, o)
	if err != nil {
		return Output{}, err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	head, _ := br.Peek(64 << 10) // short read at EOF is fine
	mime := sniffMedia(head)
	if mime == "" {
		return Output{}, &provider.PermanentError{Message: "the provider returned an output that is not an image or video"}
	}
	out := Output{}
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(head)); err == nil {
		out.Width, out.Height = cfg.Width, cfg.Height
	}
	if g.Kind == provider.KindVideo {
		out.DurationSeconds = float64(g.Params.DurationSeconds)
	}
	key := blob.Key(g.Owner, g.ID, i, extFor(mime))
	src := &readErr{r: br}
	obj, err := r.s.cfg.Blobs.Put(ctx, key, src, mime, r.cfg.MaxOutputBytes)
	if src.err != nil {
		return Output{}, fmt.Errorf("read output from %s: %w", p.Name(), src.err) // the provider side failed, not storage
	}
	if errors.Is(err, blob.ErrTooLarge) {
		return Output{}, &provider.PermanentError{Message: fmt.Sprintf("output %d is larger than the %d-byte limit", i, r.cfg.MaxOutputBytes)}
	}
	if err != nil {
		return Output{}, &storageError{err}
	}
	out.StoredBlob = StoredBlob{Key: obj.Key, MimeType: obj.ContentType, Bytes: obj.Size, SHA256: obj.SHA256}
	out.Preview = r.s.makePreview(ctx, g, i, out.StoredBlob)
	return out, nil
}

// readErr remembers a read failure, to tell a provider download that broke
// from a storage write that failed.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// sniffMedia names the media type from magic bytes; "" when it is neither
// an image nor a video we hand out.
func sniffMedia(b []byte) string {
	if m := SniffImage(b); m != "" {
		return m
	}
	if len(b) >= 12 && string(b[4:8]) == "ftyp" {
		return "video/mp4"
	}
	switch m := http.DetectContentType(b); m {
	case "image/gif", "video/webm":
		return m
	}
	return ""
}

func extFor(mime string) string {
	switch mime {
	case "image/jpeg":
		return "jpg"
	default:
		_, ext, _ := strings.Cut(mime, "/")
		return ext
	}
}
