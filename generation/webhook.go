package generation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

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
