package generation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/provider"
)

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
	m := r.s.modelOf(ctx, g)
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
	} else if st, err = r.look(ctx, p, m, g, job); err != nil {
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
		if err := r.markSubmitted(ctx, g.ID, found, provider.Status{State: provider.StateQueued, Message: submittedTo(p.Name())}); err != nil {
			return 0, err
		}
		return 0, nil
	case err == nil:
		return r.submit(ctx, p, m, g) // the provider says there is none
	case errors.Is(err, provider.ErrResubmitOnce):
		// A synchronous call was cut off once (a crash mid-call): the
		// provider allows one more, which the vendor may bill too.
		r.cfg.Logger.Warn("runner: resubmitting once after an interrupted call; the provider may bill both", "generation", g.ID, "provider", p.Name())
		return r.submit(ctx, p, m, g)
	case !errors.Is(err, provider.ErrUnsupported):
		return 0, err
	}
	if dr, risky := provider.As[provider.DuplicateRisk](p); !risky || !dr.ResubmitMayDuplicate() {
		return r.submit(ctx, p, m, g) // idempotent submit: safe to repeat
	}
	// Resubmitting could run (and bill) the job twice: wait for the
	// provider's webhook to name it, within reason.
	waited := r.s.cfg.Now().Sub(g.UpdatedAt)
	limit := unknownSubmitWait(m)
	if waited >= limit {
		return 0, &provider.PermanentError{Message: fmt.Sprintf("%s did not confirm the submit and cannot be asked; not resubmitted, to avoid a duplicate paid job", p.Name())}
	}
	return min(limit-waited, 30*time.Second), nil
}

// nextPoll spaces status checks by the model's expected duration:
// adaptive backoff without webhooks, a slow safety poll with them.
func (r *Runner) nextPoll(p provider.Provider, m provider.Model, g *Generation, st provider.Status, checks int64, submittedAt time.Time) time.Duration {
	if !r.cfg.PollOnly {
		now := r.s.cfg.Now()
		var running time.Duration
		if !st.StartedAt.IsZero() {
			running = max(now.Sub(st.StartedAt), time.Millisecond) // started: known to run
		}
		return provider.NextPollElapsed(m.ExpectedDuration, now.Sub(submittedAt), running, st.Progress, r.webhooks(p), provider.Jitter(0.1))
	}
	progressed := st.Progress > g.Progress+0.005 || (g.Status == StatusQueued && st.State == provider.StateRunning)
	return provider.NextPoll(m.ExpectedDuration, r.s.cfg.Now().Sub(submittedAt), int(checks), progressed, r.webhooks(p), provider.Jitter(0.1))
}

// markSubmitting records that the provider is about to be called, unless
// the owner's outputs at the provider and this one's would pass the
// in-flight maximum: both are
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
			// Outputs count, not generations; one larger than the cap
			// runs alone rather than never.
			if n > 0 && n+int64(g.Params.Outputs()) > int64(limit) {
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
	c.Message = fmt.Sprintf("%d of your outputs are in flight (limit %d); this one starts when one finishes", n, r.cfg.MaxInFlight(g.Owner))
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
		Input:           g.Params.Input,
		Deadline:        g.CreatedAt.Add(r.lifetime(g.Kind)),
	}
	if g.Params.Seed != nil {
		req.Seed = *g.Params.Seed
	}
	if g.Params.Count > 1 {
		req.Count = g.Params.Count
	}
	for _, f := range g.Params.files() {
		in, err := r.input(ctx, f)
		if err != nil {
			return 0, err
		}
		if f == g.Params.InputImage {
			req.InputImage = &in
		} else {
			req.Extra = append(req.Extra, in)
		}
	}
	if r.webhooks(p) {
		req.WebhookURL = r.cfg.WebhookBase + "/webhooks/" + p.Name()
	}
	if r.signal(p, m) == provider.SignalWaitOnCreate && !g.CancelRequested {
		if sw, ok := provider.As[provider.SubmitWaiter](p); ok && r.takeHeld(p.Name()) {
			return r.submitWaiting(ctx, sw, p, m, g, req)
		}
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
		return 0, submitError(err) // else the outcome is unknown: the next step reconciles
	}
	st := provider.Status{State: provider.StateQueued, Message: submittedTo(p.Name())}
	if err := r.recordSubmitted(ctx, m, g, job, st); err != nil {
		return 0, err
	}
	r.noteSubmitted(g, p.Name(), job.ID)
	// Look once right away: fast providers (the local one at latency 0)
	// are often done already; a streaming one holds its stream from here.
	st, err = r.look(ctx, p, m, g, job)
	if err != nil {
		return r.nextPoll(p, m, g, st, 1, r.s.cfg.Now()), nil
	}
	return r.observe(ctx, p, m, g, job, st, hook{})
}

// input hands one input file to the provider: a short-lived signed link
// of ours, and its bytes on demand (for providers that inline them).
func (r *Runner) input(ctx context.Context, f *InputFile) (provider.Input, error) {
	url, _, err := r.s.Link(ctx, f.StoredBlob)
	if err != nil {
		return provider.Input{}, err
	}
	key := f.Key
	in := provider.Input{MimeType: f.MimeType, URL: url, Open: func(ctx context.Context) (io.ReadCloser, error) {
		rc, _, err := r.s.cfg.Blobs.Open(ctx, key)
		return rc, err
	}}
	if f.Role != provider.RoleImage && f.Role != provider.RoleFirstFrame {
		in.Role = f.Role
	}
	return in, nil
}

// unknownSubmitWait is how long a submit whose outcome is unknown waits
// for the provider to name its job, when asking again could make (and
// bill) a second one.
func unknownSubmitWait(m provider.Model) time.Duration { return 4*m.ExpectedDuration + time.Minute }

// recordSubmitted records the job a submit made. The provider has it, so
// a refused write (the database down or restarting) is retried, backing
// off as claims do, for as long as a reconcile would wait for the job to
// be named, past this step's lease if need be: unrecorded, a job a
// provider cannot be asked about (fal) would wait for its webhook, and
// one it can be asked about costs a Find. A late record fills only a row
// still submitting (MarkSubmitted's guard): it never replaces a job
// another claim bound meanwhile.
func (r *Runner) recordSubmitted(ctx context.Context, m provider.Model, g *Generation, job provider.Job, st provider.Status) error {
	err := r.markSubmitted(ctx, g.ID, job, st)
	if err == nil {
		return nil
	}
	late := r.run.steps // not the step's: a lease lost to the outage must not end this
	if late == nil {
		return err // stepped outside Run (a test)
	}
	r.cfg.Logger.Warn("runner: the provider made the job but the database refused its record; retrying", "generation", g.ID, "job", job.ID, "err", err)
	return r.untilWritten(late, r.s.cfg.Now().Add(unknownSubmitWait(m)), func(ctx context.Context) error {
		return r.markSubmitted(ctx, g.ID, job, st)
	})
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
		outs, extra, err := r.copyOutputs(ctx, p, g, job, st.Outputs)
		if err != nil {
			return 0, err
		}
		ob, _ := json.Marshal(outs)
		msg := st.Message
		if msg == "" || !strings.Contains(msg, "before the cancel") {
			msg = "completed: " + words.Count(len(outs), "output")
			if strings.HasPrefix(st.Message, provider.ResubmittedNote) {
				msg += "; " + st.Message // the provider says how it got there
			}
		}
		if extra > 0 {
			msg += fmt.Sprintf("; the provider returned %d more than the %d charged for, not kept", extra, len(outs))
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
		r.providerFailed(ctx, g, msg, st.NotBilled, h)
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

// submittedTo is the status message of a job its provider accepted.
func submittedTo(provider string) string { return "submitted to the " + provider + " provider" }

// submitRefused is a vendor's refusal of a submit for good (a
// provider.PermanentError from Submit: invalid input, a refused key, an
// unknown model): it made no job, so the generation fails refunded,
// whatever the vendor bills for jobs that fail.
type submitRefused struct{ *provider.PermanentError }

func (e *submitRefused) Unwrap() error { return e.PermanentError }

// submitError is a Submit's error, marked as a refusal when it is one.
func submitError(err error) error {
	var perm *provider.PermanentError
	if errors.As(err, &perm) {
		return &submitRefused{perm}
	}
	return err
}
