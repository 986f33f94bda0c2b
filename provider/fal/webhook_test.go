package fal_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// attackerKey is a key fal never published.
var attackerKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))

// falHeader is a fal delivery header set, signed with key.
func falHeader(key ed25519.PrivateKey, reqID, user string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Fal-Webhook-Request-Id", reqID)
	h.Set("X-Fal-Webhook-User-Id", user)
	h.Set("X-Fal-Webhook-Timestamp", ts)
	h.Set("X-Fal-Webhook-Signature", emulator.SignFal(key, reqID, user, ts, body))
	return h
}

// genuineDelivery submits a job with webhooks at a receiver and returns
// the emulator's (signed) delivery of its end.
func genuineDelivery(t *testing.T, em *emulator.Emulator, p *fal.Provider, key string) (provider.Job, emulator.Delivery, *emulator.Receiver) {
	t.Helper()
	rc := emulator.NewReceiver(p)
	t.Cleanup(rc.Close)
	r := req(t, p, "fal-flux-schnell", key, "a fox")
	r.WebhookURL = rc.URL()
	job, err := p.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	before := len(em.Deliveries())
	em.Advance(time.Minute)
	ds := em.Deliveries()
	if len(ds) != before+1 {
		t.Fatalf("deliveries %d", len(ds)-before)
	}
	return job, ds[len(ds)-1], rc
}

func TestWebhookVerified(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{}, nil)
	job, d, rc := genuineDelivery(t, em, p, "gen-w")
	if d.Status != 200 {
		t.Fatalf("genuine delivery answered %d", d.Status)
	}
	u, _ := url.Parse(d.URL)
	if u.Query().Get(provider.WebhookKeyParam) != "gen-w" || len(u.Query()) != 1 {
		t.Fatalf("webhook URL %s", d.URL)
	}
	ev := <-rc.Events
	if !ev.Trusted || ev.Status != nil || ev.JobID != job.ID || ev.DeliveryID != job.ID || ev.Key != "gen-w" {
		t.Fatalf("event %+v", ev)
	}
	// The job rebuilt for our own model works like the submitted one.
	rebuilt, err := p.RebuildJob(model(t, p, "fal-flux-schnell"), ev.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Status(ctx, rebuilt); err != nil || st.State != provider.StateCompleted {
		t.Fatalf("%+v %v", st, err)
	}
	// fal's retry (or a replay within the window) is a duplicate...
	em.Redeliver(len(em.Deliveries()) - 1)
	if ev := <-rc.Events; !ev.Duplicate {
		t.Fatal("fal retry not deduplicated")
	}
	// ...unless the first could not be stored: then the retry counts.
	p.ForgetWebhook(job.ID)
	if ev, err := p.ParseWebhook(ctx, d.Header, u.Query(), d.Body); err != nil || ev.Duplicate {
		t.Fatalf("retry after a failed store: %+v %v", ev, err)
	}
	if n := em.Count("fal", emulator.OpJWKS); n != 1 {
		t.Fatalf("JWKS fetched %d times for 3 deliveries, want 1 (cached)", n)
	}
}

// TestWebhookForged: each delivery below is refused (ErrWebhookUnauthenticated)
// or unreadable, and none makes the genuine one, sent after it, a
// duplicate.
func TestWebhookForged(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{}, nil)
	rc := emulator.NewReceiver(p)
	defer rc.Close()
	r := req(t, p, "fal-flux-schnell", "gen-f", "a fox")
	r.WebhookURL = rc.URL()
	job, err := p.Submit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	// Hold the genuine delivery back: build it as the emulator would,
	// without posting it.
	em.Advance(time.Minute) // posts it to rc
	d := em.Deliveries()[0]
	<-rc.Events
	p.ForgetWebhook(job.ID) // as if it had not arrived yet

	now := em.Now()
	user := emulator.DefaultFalUserID
	key := emulator.DefaultFalSigningKey
	tampered := bytes.Replace(d.Body, []byte(`"OK"`), []byte(`"ER"`), 1)
	other := bytes.ReplaceAll(d.Body, []byte(job.ID), []byte("00000000-0000-4000-8000-999999999999"))
	mod := func(f func(h http.Header)) http.Header {
		h := d.Header.Clone()
		f(h)
		return h
	}
	cases := []struct {
		name   string
		header http.Header
		body   []byte
		err    error // nil: not verified for another reason (malformed)
	}{
		{"no signature headers", http.Header{}, d.Body, provider.ErrWebhookUnauthenticated},
		{"signature removed", mod(func(h http.Header) { h.Del("X-Fal-Webhook-Signature") }), d.Body, provider.ErrWebhookUnauthenticated},
		{"signed by a key fal never published", falHeader(attackerKey, job.ID, user, now, d.Body), d.Body, provider.ErrWebhookUnauthenticated},
		{"body tampered", d.Header, tampered, provider.ErrWebhookUnauthenticated},
		{"user id altered", mod(func(h http.Header) { h.Set("X-Fal-Webhook-User-Id", "someone") }), d.Body, provider.ErrWebhookUnauthenticated},
		{"request id altered", mod(func(h http.Header) { h.Set("X-Fal-Webhook-Request-Id", "x") }), d.Body, provider.ErrWebhookUnauthenticated},
		{"timestamp altered", mod(func(h http.Header) { h.Set("X-Fal-Webhook-Timestamp", strconv.FormatInt(now.Unix()+1, 10)) }), d.Body, provider.ErrWebhookUnauthenticated},
		{"stale", falHeader(key, job.ID, user, now.Add(-6*time.Minute), d.Body), d.Body, provider.ErrWebhookUnauthenticated},
		{"future", falHeader(key, job.ID, user, now.Add(6*time.Minute), d.Body), d.Body, provider.ErrWebhookUnauthenticated},
		{"signature not hex", mod(func(h http.Header) { h.Set("X-Fal-Webhook-Signature", "zz") }), d.Body, provider.ErrWebhookUnauthenticated},
		{"signature truncated", mod(func(h http.Header) { h.Set("X-Fal-Webhook-Signature", h.Get("X-Fal-Webhook-Signature")[:64]) }), d.Body, provider.ErrWebhookUnauthenticated},
		{"signed, but the body is about another request", falHeader(key, job.ID, user, now, other), other, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := p.ParseWebhook(ctx, c.header, url.Values{provider.WebhookKeyParam: {"gen-f"}}, c.body)
			if err == nil || (c.err != nil && !errors.Is(err, c.err)) || errors.Is(err, provider.ErrWebhookUnverifiable) {
				t.Fatalf("accepted or misjudged: %+v %v", ev, err)
			}
			if ev.Trusted || ev.Key != "" || ev.Duplicate {
				t.Fatalf("event from a refused delivery: %+v", ev)
			}
		})
	}
	// The genuine delivery still counts, once.
	ev, err := p.ParseWebhook(ctx, d.Header, url.Values{provider.WebhookKeyParam: {"gen-f"}}, d.Body)
	if err != nil || ev.Duplicate || !ev.Trusted || ev.JobID != job.ID {
		t.Fatalf("genuine after forgeries: %+v %v", ev, err)
	}
	if n := em.Count("fal", emulator.OpJWKS); n > 2 {
		t.Fatalf("forged deliveries made %d JWKS fetches (at most one refetch a minute)", n)
	}
}

// TestWebhookOtherAccount: fal signs every account's deliveries with the
// same keys, so anyone can have fal post a verified delivery to our URL
// with our generation's key in it. Once our account is known (configured,
// or learnt from a delivery about a request we made), such a delivery
// keeps its request id but never its key.
func TestWebhookOtherAccount(t *testing.T) {
	ctx := context.Background()
	q := url.Values{provider.WebhookKeyParam: {"victim"}}
	body := func(id string) []byte { return []byte(`{"request_id":"` + id + `","status":"OK","payload":{}}`) }
	cases := []struct {
		name    string
		userID  string // Config.WebhookUserID
		learn   bool   // a delivery about our own request came first
		wantKey bool
	}{
		{"account configured", emulator.DefaultFalUserID, false, false},
		{"account learnt", "", true, false},
		{"account unknown: the Status call with our key decides", "", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			em, p := setup(t, emulator.Options{}, func(cfg *fal.Config) { cfg.WebhookUserID = c.userID })
			if c.learn {
				_, d, rc := genuineDelivery(t, em, p, "mine")
				if ev := <-rc.Events; ev.Key != "mine" || d.Status != 200 {
					t.Fatalf("own delivery: %+v", ev)
				}
			}
			b := body("attacker-request")
			ev, err := p.ParseWebhook(ctx, falHeader(emulator.DefaultFalSigningKey, "attacker-request", "attacker", em.Now(), b), q, b)
			if err != nil || !ev.Trusted || ev.JobID != "attacker-request" || (ev.Key != "") != c.wantKey {
				t.Fatalf("%+v %v", ev, err)
			}
			// Our own account's deliveries keep their key.
			b = body("our-request")
			ev, err = p.ParseWebhook(ctx, falHeader(emulator.DefaultFalSigningKey, "our-request", emulator.DefaultFalUserID, em.Now(), b), q, b)
			if err != nil || ev.Key != "victim" {
				t.Fatalf("own account: %+v %v", ev, err)
			}
		})
	}
}

// TestWebhookKeys: fal's keys are fetched once and cached (at most 24 h),
// refetched when a signature needs a key fal rotated in, and a delivery
// that cannot be checked because the keys cannot be had is unverifiable
// (retry later), carrying only the claimed request id.
func TestWebhookKeys(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{}, nil)
	deliver := func(key ed25519.PrivateKey, id string) (provider.WebhookEvent, error) {
		b := []byte(`{"request_id":"` + id + `","status":"OK"}`)
		return p.ParseWebhook(ctx, falHeader(key, id, emulator.DefaultFalUserID, em.Now(), b), nil, b)
	}
	jwks := func() int { return em.Count("fal", emulator.OpJWKS) }

	em.Inject(emulator.Rule{Provider: "fal", Op: emulator.OpJWKS, Fault: emulator.Fault500, Times: 1})
	ev, err := deliver(emulator.DefaultFalSigningKey, "r1")
	if !errors.Is(err, provider.ErrWebhookUnverifiable) || ev.Trusted || ev.JobID != "r1" || ev.Key != "" {
		t.Fatalf("keys unavailable: %+v %v", ev, err)
	}
	// A failed fetch is not retried at once (deliveries cannot hammer fal)...
	if _, err := deliver(emulator.DefaultFalSigningKey, "r1"); !errors.Is(err, provider.ErrWebhookUnverifiable) || jwks() != 1 {
		t.Fatalf("refetched at once: %v, %d fetches", err, jwks())
	}
	// ...and the retry a minute later verifies, and is not a duplicate.
	em.Advance(time.Minute)
	if ev, err := deliver(emulator.DefaultFalSigningKey, "r1"); err != nil || !ev.Trusted || ev.Duplicate {
		t.Fatalf("after the keys came back: %+v %v", ev, err)
	}
	if _, err := deliver(emulator.DefaultFalSigningKey, "r2"); err != nil || jwks() != 2 {
		t.Fatalf("cached: %v, %d fetches", err, jwks())
	}
	// fal rotates in a new key: the cached set lacks it, one refetch finds it.
	rotated := ed25519.NewKeyFromSeed(sha256Of("rotated"))
	em.RotateFalKey(rotated)
	em.Advance(time.Minute)
	if ev, err := deliver(rotated, "r3"); err != nil || !ev.Trusted || jwks() != 3 {
		t.Fatalf("rotated key: %+v %v, %d fetches", ev, err, jwks())
	}
	// A key nobody published refetches at most once a minute.
	for i := range 5 {
		if _, err := deliver(attackerKey, "f"+strconv.Itoa(i)); !errors.Is(err, provider.ErrWebhookUnauthenticated) {
			t.Fatal(err)
		}
	}
	if jwks() != 3 {
		t.Fatalf("forgeries refetched the keys: %d fetches", jwks())
	}
	// After 24 h the cache is refreshed.
	em.Advance(24 * time.Hour)
	if _, err := deliver(rotated, "r4"); err != nil || jwks() != 4 {
		t.Fatalf("after 24 h: %v, %d fetches", err, jwks())
	}
}

func sha256Of(s string) []byte {
	b := sha256.Sum256([]byte(s))
	return b[:]
}
