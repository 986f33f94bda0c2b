package fal_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// fuzzNow is the fuzz target's clock (the emulator's start).
var fuzzNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// FuzzParseWebhook feeds ParseWebhook arbitrary deliveries (seeded with
// genuine ones, testdata/fuzz/FuzzParseWebhook): it must not panic, and
// a delivery verifies only if it carries fal's signature (ED25519 is
// deterministic, so the one valid signature) of exactly its request id,
// user id, timestamp (within 5 minutes) and body, a body about that
// request; a key from the URL survives only for our own account.
func FuzzParseWebhook(f *testing.F) {
	em := emulator.New(emulator.Options{Clock: emulator.NewClock(fuzzNow)})
	f.Cleanup(em.Close)
	p, err := fal.New(fal.Config{Key: "k", QueueURL: em.Fal.URL, WebhookJWKSURL: em.FalJWKSURL(), WebhookUserID: emulator.DefaultFalUserID,
		Now: func() time.Time { return fuzzNow }})
	if err != nil {
		f.Fatal(err)
	}
	const id = "00000000-0000-4000-8000-000000000001"
	body := `{"gateway_request_id":"` + id + `","payload":{"images":[]},"request_id":"` + id + `","status":"OK"}`
	ts := strconv.FormatInt(fuzzNow.Unix(), 10)
	sig := emulator.SignFal(emulator.DefaultFalSigningKey, id, emulator.DefaultFalUserID, ts, []byte(body))
	f.Add(id, emulator.DefaultFalUserID, ts, sig, body, "gen-1")
	f.Add(id, "someone", ts, sig, body, "gen-1")
	f.Add(id, emulator.DefaultFalUserID, ts, strings.ToUpper(sig), body, "")
	f.Add(id, emulator.DefaultFalUserID, "1767268000", sig, body, "")
	f.Add("", "", "", "", "{}", "")
	f.Fuzz(func(t *testing.T, reqID, user, ts, sig, body, key string) {
		h := http.Header{}
		h.Set("X-Fal-Webhook-Request-Id", reqID)
		h.Set("X-Fal-Webhook-User-Id", user)
		h.Set("X-Fal-Webhook-Timestamp", ts)
		h.Set("X-Fal-Webhook-Signature", sig)
		ev, err := p.ParseWebhook(context.Background(), h, url.Values{provider.WebhookKeyParam: {key}}, []byte(body))
		if err != nil {
			if ev.Trusted || ev.Duplicate || ev.Key != "" || ev.Status != nil {
				t.Fatalf("refused delivery yields %+v", ev)
			}
			return
		}
		want := emulator.SignFal(emulator.DefaultFalSigningKey, reqID, user, ts, []byte(body))
		if !ev.Trusted || ev.JobID != reqID || !strings.EqualFold(sig, want) {
			t.Fatalf("verified without fal's signature: %+v (sig %q)", ev, sig)
		}
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || sec < fuzzNow.Add(-5*time.Minute).Unix() || sec > fuzzNow.Add(5*time.Minute).Unix() {
			t.Fatalf("verified outside the window: ts %q", ts)
		}
		if ev.Key != "" && (user != emulator.DefaultFalUserID || ev.Key != key) {
			t.Fatalf("key %q passed on for account %q", ev.Key, user)
		}
	})
}
