package fal

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Webhook verification, as fal documents it: every delivery carries
//
//	X-Fal-Webhook-Request-Id: the request id
//	X-Fal-Webhook-User-Id:    the account that made the request
//	X-Fal-Webhook-Timestamp:  unix seconds
//	X-Fal-Webhook-Signature:  hex ED25519 signature
//
// over "request_id\nuser_id\ntimestamp\nsha256hex(body)", by one of the
// OKP/Ed25519 keys of fal's JWKS (DefaultJWKSURL; keys may be cached up
// to 24 h). A delivery verifies when some key accepts the signature and
// the timestamp is within WebhookTolerance of now.
//
// fal signs every account's deliveries with the same keys, so a valid
// signature proves fal sent it, not that the request is ours: anyone with
// a fal account can have fal post a signed delivery to our URL with any
// query string. Hence the request id binds (request ids come from our own
// submit replies), and the darkroom_key in the URL is passed on (as
// WebhookEvent.Key) only when the signed user id is our account's: the
// configured WebhookUserID, else the one learnt from a verified delivery
// about a request this process submitted; with neither known it is
// passed on, and the runner's Status call with our key, at the
// generation's own model, is what confirms the job.

// DefaultJWKSURL is where fal publishes its webhook signing keys.
const DefaultJWKSURL = "https://rest.alpha.fal.ai/.well-known/jwks.json"

// maxJWKSAge is the longest fal allows keys to be cached.
const maxJWKSAge = 24 * time.Hour

// webhookBody is fal's webhook delivery (the fields we read).
type webhookBody struct {
	RequestID        string `json:"request_id"`
	GatewayRequestID string `json:"gateway_request_id"`
	Status           string `json:"status"` // OK | ERROR
}

// ParseWebhook implements provider.WebhookParser: see the comment above.
// A verified event is Trusted but carries no Status (the runner reads it
// with one Status call); deliveries are deduplicated on request_id (fal
// retries up to 10 times over 2 hours), after verification only.
func (p *Provider) ParseWebhook(ctx context.Context, h http.Header, q url.Values, body []byte) (provider.WebhookEvent, error) {
	reqID := h.Get("X-Fal-Webhook-Request-Id")
	user := h.Get("X-Fal-Webhook-User-Id")
	ts := h.Get("X-Fal-Webhook-Timestamp")
	sigHex := h.Get("X-Fal-Webhook-Signature")
	if reqID == "" || user == "" || ts == "" || sigHex == "" {
		return provider.WebhookEvent{}, fmt.Errorf("%w: missing X-Fal-Webhook-* headers", provider.ErrWebhookUnauthenticated)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return provider.WebhookEvent{}, fmt.Errorf("%w: bad X-Fal-Webhook-Timestamp", provider.ErrWebhookUnauthenticated)
	}
	if skew := p.cfg.Now().Unix() - sec; skew > int64(p.cfg.WebhookTolerance/time.Second) || -skew > int64(p.cfg.WebhookTolerance/time.Second) {
		return provider.WebhookEvent{}, fmt.Errorf("%w: timestamp %ds away from now", provider.ErrWebhookUnauthenticated, skew)
	}
	sig, err := hex.DecodeString(sigHex)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return provider.WebhookEvent{}, fmt.Errorf("%w: X-Fal-Webhook-Signature is not a hex ED25519 signature", provider.ErrWebhookUnauthenticated)
	}
	msg := SignedMessage(reqID, user, ts, body)
	ok, err := p.keys.verify(ctx, msg, sig)
	if err != nil {
		// Not a verdict: the claimed request may be re-read by the
		// generation holding it, nothing more.
		return provider.WebhookEvent{JobID: reqID}, fmt.Errorf("%w: fal's signing keys: %v", provider.ErrWebhookUnverifiable, err)
	}
	if !ok {
		return provider.WebhookEvent{}, fmt.Errorf("%w: no fal key accepts the signature", provider.ErrWebhookUnauthenticated)
	}
	var b webhookBody
	if err := json.Unmarshal(body, &b); err != nil || b.RequestID == "" {
		return provider.WebhookEvent{}, fmt.Errorf("fal: webhook body lacks request_id")
	}
	if b.RequestID != reqID {
		return provider.WebhookEvent{}, fmt.Errorf("fal: webhook body is about request %q, its signature about %q", b.RequestID, reqID)
	}
	ev := provider.WebhookEvent{DeliveryID: reqID, JobID: reqID, Trusted: true}
	if p.hooks.Add(reqID) {
		ev.Duplicate = true
		return ev, nil
	}
	if key := q.Get(provider.WebhookKeyParam); key != "" && p.ownAccount(reqID, user) {
		ev.Key = key
	}
	return ev, nil
}

// ForgetWebhook implements provider.WebhookForgetter.
func (p *Provider) ForgetWebhook(requestID string) { p.hooks.Forget(requestID) }

// RebuildJob implements provider.JobRebuilder.
func (p *Provider) RebuildJob(m provider.Model, requestID string) (provider.Job, error) {
	return p.JobFor(m.ID, requestID)
}

// ownAccount reports whether a verified delivery's user id may be ours,
// learning our account from deliveries about requests this process
// submitted.
func (p *Provider) ownAccount(requestID, user string) bool {
	if p.cfg.WebhookUserID != "" {
		return user == p.cfg.WebhookUserID
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.account == "" && p.mine.Has(requestID) {
		p.account = user
	}
	return p.account == "" || p.account == user
}

// SignedMessage is what fal signs for a delivery.
func SignedMessage(requestID, userID, timestamp string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte(requestID + "\n" + userID + "\n" + timestamp + "\n" + hex.EncodeToString(sum[:]))
}

// jwks fetches and caches fal's public keys, for at most ttl (≤ 24 h).
// A signature no cached key accepts refetches the set (fal may have
// rotated it), and a failed fetch is not retried, for refetchEvery, so
// forged deliveries cannot make us hammer fal.
type jwks struct {
	url    string
	client *http.Client
	now    func() time.Time
	ttl    time.Duration

	mu      sync.Mutex // held across a fetch: one at a time
	keys    []ed25519.PublicKey
	fetched time.Time // of keys
	tried   time.Time // last fetch attempt
	lastErr error     // of that attempt
}

const refetchEvery = time.Minute

// verify reports whether a key of fal's accepts sig over msg; an error
// means it cannot be told now.
func (j *jwks) verify(ctx context.Context, msg, sig []byte) (bool, error) {
	keys, err := j.get(ctx, false)
	if err != nil {
		return false, err
	}
	if anyAccepts(keys, msg, sig) {
		return true, nil
	}
	fresh, err := j.get(ctx, true)
	if err != nil || fresh == nil {
		return false, err // nil, nil: refetched moments ago, nothing new
	}
	return anyAccepts(fresh, msg, sig), nil
}

func anyAccepts(keys []ed25519.PublicKey, msg, sig []byte) bool {
	ok := false
	for _, k := range keys {
		if ed25519.Verify(k, msg, sig) {
			ok = true
		}
	}
	return ok
}

// get returns the cached keys, fetching them when absent or expired;
// refetch asks for a new set even if the cached one is current (nil, nil
// when one was fetched moments ago).
func (j *jwks) get(ctx context.Context, refetch bool) ([]ed25519.PublicKey, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	current := j.keys != nil && now.Sub(j.fetched) < j.ttl && !now.Before(j.fetched)
	if current && !refetch {
		return j.keys, nil
	}
	if !j.tried.IsZero() && !now.Before(j.tried) && now.Sub(j.tried) < refetchEvery {
		switch {
		case j.lastErr != nil:
			return nil, fmt.Errorf("fetch failed moments ago: %w", j.lastErr)
		case refetch:
			return nil, nil
		}
		return j.keys, nil
	}
	j.tried = now
	keys, err := j.fetch(ctx)
	j.lastErr = err
	if err != nil {
		return nil, err
	}
	j.keys, j.fetched = keys, now
	return keys, nil
}

func (j *jwks) fetch(ctx context.Context) ([]ed25519.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := j.client.Do(req) // no Authorization: our key goes to the queue only
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", j.url, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	keys, err := ParseJWKS(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", j.url, err)
	}
	return keys, nil
}

// ParseJWKS reads the OKP/Ed25519 keys of a JSON Web Key Set; other keys
// are skipped. It fails when none is usable.
func ParseJWKS(b []byte) ([]ed25519.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Use string `json:"use"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	var keys []ed25519.PublicKey
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(k.X, "="))
		if err != nil || len(x) != ed25519.PublicKeySize {
			continue
		}
		keys = append(keys, ed25519.PublicKey(x))
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS holds no Ed25519 key")
	}
	return keys, nil
}
