package generation

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// twoRunning starts two generations at the (slow) local provider, stops
// the runner and returns them with their job ids.
func twoRunning(t *testing.T) (*life, [2]Row) {
	t.Helper()
	l := startLife(t, t.TempDir(), true)
	t.Cleanup(l.end)
	ctx := context.Background()
	var rows [2]Row
	for _, prompt := range []string{"a heron", "a crane"} {
		g, _, err := l.svc.Create(ctx, "alice", CreateRequest{ModelID: "local-sketch", Prompt: prompt})
		if err != nil {
			t.Fatal(err)
		}
		l.waitForJob(t, g.ID)
	}
	l.stop() // nothing steps from here on
	l.stop = func() {}
	ids, err := l.db.QueryInt("SELECT COUNT(*) FROM generations WHERE provider_job_id != ''")
	if err != nil || ids != 2 {
		t.Fatalf("%d jobs, %v", ids, err)
	}
	rs, err := l.svc.store.ListGenerations(ctx, ListQuery{Owner: "alice", Limit: 2})
	if err != nil || len(rs) != 2 {
		t.Fatal(err)
	}
	copy(rows[:], rs)
	return l, rows
}

func (l *life) deliveriesFor(t *testing.T, id string) int {
	t.Helper()
	n, err := l.db.QueryInt("SELECT COUNT(*) FROM webhook_deliveries WHERE generation_id = ?", id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWebhookBinding: a delivery is stored only for the generation
// holding the job its signed content names; a key (never signed by
// itself) binds only a generation with no job yet; an untrusted event
// binds nothing. Then a stored delivery naming another job is never
// applied to the generation it was filed under.
func TestWebhookBinding(t *testing.T) {
	ctx := context.Background()
	l, rows := twoRunning(t)
	a, b := rows[0], rows[1]
	failed := func(job, key, id string, trusted bool) provider.WebhookEvent {
		return provider.WebhookEvent{DeliveryID: id, JobID: job, Key: key, Trusted: trusted,
			Status: &provider.Status{State: provider.StateFailed, Error: "as the webhook says"}}
	}
	cases := []struct {
		name   string
		ev     provider.WebhookEvent
		stored map[string]int // generation → deliveries after
	}{
		{"signed job of a, key of b", failed(a.ProviderJobID, b.ID, "d1", true), map[string]int{a.ID: 1, b.ID: 0}},
		{"unknown job, key of b (which has a job)", failed("job-of-nobody", b.ID, "d2", true), map[string]int{a.ID: 1, b.ID: 0}},
		{"untrusted, job of b", failed(b.ProviderJobID, b.ID, "d3", false), map[string]int{a.ID: 1, b.ID: 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := l.runner.Webhook(ctx, "local", c.ev); err != nil {
				t.Fatal(err)
			}
			for id, want := range c.stored {
				if got := l.deliveriesFor(t, id); got != want {
					t.Fatalf("%d deliveries for %s, want %d", got, id, want)
				}
			}
		})
	}
	// Filed under b by a bug or an old version, about a's job: read past.
	if err := l.svc.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		_, err := tx.InsertDelivery(ctx, Delivery{Provider: "local", DeliveryID: "d4", GenerationID: b.ID,
			Event: `{"DeliveryID":"d4","JobID":"` + a.ProviderJobID + `","Trusted":true,"Status":{"State":"failed","Error":"not b's"}}`, ReceivedAt: time.Now()})
		if err == nil {
			err = tx.WakeNow(ctx, b.ID, time.Now())
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Step every due generation once, synchronously (both were woken),
	// as a runner started afresh would.
	runner := NewRunner(l.svc, RunnerConfig{})
	if err := l.svc.store.Update(ctx, func(ctx context.Context, tx Tx) error { return tx.ReleaseLeases(ctx) }); err != nil {
		t.Fatal(err)
	}
	for {
		var row Row
		var claimed bool
		now := time.Now()
		if err := l.svc.store.Update(ctx, func(ctx context.Context, tx Tx) (err error) {
			row, claimed, err = tx.Claim(ctx, runner.id, now.Add(time.Minute), now)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !claimed {
			break
		}
		runner.step(ctx, row)
	}
	if g, _ := l.svc.Get(ctx, "alice", a.ID); g.Status != StatusFailed || g.ErrorMessage != "as the webhook says" {
		t.Fatalf("a: %s %q", g.Status, g.ErrorMessage)
	}
	g, _ := l.svc.Get(ctx, "alice", b.ID)
	seq, err := l.svc.store.LastPendingDelivery(ctx, b.ID)
	if err != nil || seq != 0 || g.Status.Terminal() {
		t.Fatalf("b: %s %q, delivery %d left (%v): a delivery about another job was applied or not read", g.Status, g.ErrorMessage, seq, err)
	}
}

// stubParser answers ParseWebhook with a fixed event or error and records
// what it was asked to forget.
type stubParser struct {
	ev      provider.WebhookEvent
	err     error
	forgot  []string
	replays map[string]bool
}

func (p *stubParser) ParseWebhook(context.Context, http.Header, url.Values, []byte) (provider.WebhookEvent, error) {
	ev := p.ev
	if p.err == nil && p.replays[ev.DeliveryID] {
		ev.Duplicate = true
	}
	if p.err == nil {
		p.replays[ev.DeliveryID] = true
	}
	return ev, p.err
}

func (p *stubParser) ForgetWebhook(id string) {
	p.forgot = append(p.forgot, id)
	delete(p.replays, id)
}

// TestDeliverNeverSuppressesGenuine: a verified delivery that could not be
// stored is forgotten by the parser, so the provider's retry is taken;
// an unverifiable one is refused for a retry and only wakes the
// generation holding its claimed job.
func TestDeliverNeverSuppressesGenuine(t *testing.T) {
	ctx := context.Background()
	l, rows := twoRunning(t)
	a := rows[0]
	fs := &failingStore{Store: l.svc.store}
	l.svc.store = fs
	p := &stubParser{ev: provider.WebhookEvent{DeliveryID: "d1", JobID: a.ProviderJobID, Trusted: true}, replays: map[string]bool{}}

	fs.down.Store(true)
	if err := l.runner.Deliver(ctx, "local", p, nil, nil, nil); !errors.Is(err, errDiskFull) {
		t.Fatalf("store failed: %v", err)
	}
	if len(p.forgot) != 1 || p.forgot[0] != "d1" {
		t.Fatalf("forgot %v", p.forgot)
	}
	fs.down.Store(false)
	if err := l.runner.Deliver(ctx, "local", p, nil, nil, nil); err != nil || l.deliveriesFor(t, a.ID) != 1 {
		t.Fatalf("retry: %v, %d stored", err, l.deliveriesFor(t, a.ID))
	}

	// Unverifiable: refused, nothing stored, the holder of the job woken
	// (next check now), at most once per unverifiedWakeEvery.
	if err := l.svc.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		return tx.Reschedule(ctx, rows[1].ID, "", time.Now().Add(time.Hour), time.Now(), false)
	}); err != nil {
		t.Fatal(err)
	}
	next := func() time.Time {
		r, err := l.svc.store.Generation(ctx, rows[1].ID)
		if err != nil {
			t.Fatal(err)
		}
		return r.NextCheckAt
	}
	far := next()
	p = &stubParser{ev: provider.WebhookEvent{JobID: rows[1].ProviderJobID}, err: provider.ErrWebhookUnverifiable, replays: map[string]bool{}}
	if err := l.runner.Deliver(ctx, "local", p, nil, nil, nil); !errors.Is(err, provider.ErrWebhookUnverifiable) {
		t.Fatal(err)
	}
	if l.deliveriesFor(t, rows[1].ID) != 0 || !next().Before(far) {
		t.Fatalf("unverifiable: %d stored, next check %s (was %s)", l.deliveriesFor(t, rows[1].ID), next(), far)
	}
}
