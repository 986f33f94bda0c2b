package replicate

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
)

// Webhooks. Replicate POSTs the prediction object to the webhook URL for
// each event in webhook_events_filter, signed with Standard Webhooks:
//
//	webhook-id:        msg_... (same on retries of one delivery)
//	webhook-timestamp: unix seconds
//	webhook-signature: "v1,<base64 HMAC-SHA256>" (several, space-separated,
//	                   during secret rotation)
//
// The signed content is "<id>.<timestamp>.<body>" and the key is the
// base64 part of the "whsec_..." secret. A delivery verifies when any v1
// signature matches (constant-time), its timestamp is within
// WebhookTolerance of now, and its webhook-id was not seen before (a
// bounded set remembers ids for twice the tolerance).

// SetWebhookSecret installs the signing secret ("whsec_<base64>").
func (p *Provider) SetWebhookSecret(s string) error {
	raw := strings.TrimPrefix(strings.TrimSpace(s), "whsec_")
	key, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(key) == 0 {
		return fmt.Errorf("replicate: webhook secret is not whsec_<base64>")
	}
	p.secretMu.Lock()
	p.secret = key
	p.secretMu.Unlock()
	return nil
}

// LoadWebhookSecret asks Replicate for the account's default webhook
// signing secret (GET /v1/webhooks/default/secret) and installs it.
func (p *Provider) LoadWebhookSecret(ctx context.Context) error {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, p.base+"/v1/webhooks/default/secret", nil, nil)
	if err != nil {
		return err
	}
	if err := p.http.Err(resp); err != nil {
		return err
	}
	var v struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(resp.Body, &v); err != nil || v.Key == "" {
		return fmt.Errorf("replicate: unreadable webhook secret reply")
	}
	return p.SetWebhookSecret(v.Key)
}

// Sign computes the webhook-signature value for a delivery (used by tests
// and the emulator).
func Sign(secret, id, timestamp string, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body)), nil
}

func mac(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// ParseWebhook implements provider.WebhookParser. Only a delivery whose
// signature verifies yields an event; its JobID is the prediction id in
// the signed body, and nothing from the URL is used (Key stays empty: a
// Replicate delivery updates only the generation already holding the
// prediction; a lost submit reply is reconciled by Find). Replays are
// recognised (webhook-id) only after verification.
func (p *Provider) ParseWebhook(_ context.Context, h http.Header, _ url.Values, body []byte) (provider.WebhookEvent, error) {
	p.secretMu.RLock()
	key := p.secret
	p.secretMu.RUnlock()
	if key == nil {
		// Not a verdict on the delivery: the claimed prediction may be
		// re-read by the generation that holds it, nothing more.
		var pr prediction
		_ = json.Unmarshal(body, &pr)
		return provider.WebhookEvent{JobID: pr.ID}, fmt.Errorf("%w: no webhook secret configured", provider.ErrWebhookUnverifiable)
	}
	id, ts, sigs := h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature")
	if id == "" || ts == "" || sigs == "" {
		return provider.WebhookEvent{}, fmt.Errorf("%w: missing webhook-id, webhook-timestamp or webhook-signature", provider.ErrWebhookUnauthenticated)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return provider.WebhookEvent{}, fmt.Errorf("%w: bad webhook-timestamp", provider.ErrWebhookUnauthenticated)
	}
	skew := p.cfg.Now().Unix() - sec
	if math.Abs(float64(skew)) > p.cfg.WebhookTolerance.Seconds() {
		return provider.WebhookEvent{}, fmt.Errorf("%w: timestamp %ds away from now", provider.ErrWebhookUnauthenticated, skew)
	}
	want := mac(key, id, ts, body)
	ok := false
	for _, s := range strings.Fields(sigs) {
		ver, b64, found := strings.Cut(s, ",")
		if !found || ver != "v1" {
			continue
		}
		got, err := base64.StdEncoding.Strict().DecodeString(b64) // one encoding per MAC: its canonical one
		if err == nil && hmac.Equal(got, want) {
			ok = true // keep looping: constant work whatever matched
		}
	}
	if !ok {
		return provider.WebhookEvent{}, fmt.Errorf("%w: no matching v1 signature", provider.ErrWebhookUnauthenticated)
	}
	var pr prediction
	if err := json.Unmarshal(body, &pr); err != nil || pr.ID == "" {
		return provider.WebhookEvent{}, fmt.Errorf("replicate: webhook body is not a prediction")
	}
	if p.replay.Add(id) {
		return provider.WebhookEvent{DeliveryID: id, Duplicate: true, JobID: pr.ID, Trusted: true}, nil
	}
	e, _ := p.entryForPrediction(pr)
	st := toStatus(pr, e)
	return provider.WebhookEvent{DeliveryID: id, JobID: pr.ID, Status: &st, Trusted: true}, nil
}

// ForgetWebhook implements provider.WebhookForgetter.
func (p *Provider) ForgetWebhook(id string) { p.replay.Forget(id) }

// RebuildJob implements provider.JobRebuilder.
func (p *Provider) RebuildJob(m provider.Model, id string) (provider.Job, error) {
	if id == "" {
		return provider.Job{}, fmt.Errorf("replicate: no prediction id")
	}
	return makeJob(id, m.ID), nil
}
