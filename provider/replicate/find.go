package replicate

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
)

// Reconciling a lost submit.
//
// What Replicate allows: no idempotency key on create, no metadata or tag
// field on a prediction, and no search. GET /v1/predictions lists the
// account's predictions newest first (100 a page, cursor in "next"), each
// with its id, model, version, input, status, created_at and urls. Inputs
// are deleted after 1 hour. Whether the listed object echoes the webhook
// URL is UNCONFIRMED.
//
// What we control and match on, strongest first:
//
//  1. the webhook URL: when webhooks are on it carries darkroom_key=<key>;
//     used if Replicate echoes "webhook" in the listed prediction;
//  2. an in-memory record of each submit made by this process (model,
//     the exact input sent, time sent): any listed prediction of that model
//     created after we sent it whose input has those values. This covers
//     the common case, a reply lost on the wire, while the process lives;
//  3. the seed: a request without a seed is sent with
//     catalog.DerivedSeed(key) (31 bits of a hash of the generation id), so
//     a listed prediction whose seed input equals it is ours. This survives
//     a restart.
//
// Limits: after a restart, a request that set its own seed, or a model
// without a seed input (e.g. Kling), can only be found through (1); if it
// cannot, Find answers not found and the runner's resubmit may duplicate
// the job. Find reads at most FindPages pages within FindWindow, so a
// reconciliation long after the fact, or on an account creating more than
// 100×FindPages predictions in that window, may miss. When several
// predictions match, the oldest wins (the first submit).

type submitRecord struct {
	model   string // catalog id
	input   map[string]any
	derived bool // seed was derived from the key
	sent    time.Time
}

const maxRecords = 4096

func (p *Provider) remember(key string, e catalog.Entry, input map[string]any, derived bool, now time.Time) {
	if key == "" {
		return
	}
	p.subMu.Lock()
	defer p.subMu.Unlock()
	if len(p.submits) >= maxRecords {
		for k, r := range p.submits {
			if now.Sub(r.sent) > p.cfg.FindWindow || len(p.submits) >= maxRecords {
				delete(p.submits, k)
			}
		}
	}
	p.submits[key] = submitRecord{model: e.ID, input: input, derived: derived, sent: now}
}

func (p *Provider) record(key string) (submitRecord, bool) {
	p.subMu.Lock()
	defer p.subMu.Unlock()
	r, ok := p.submits[key]
	return r, ok
}

// Find implements provider.Provider (see the comment above).
func (p *Provider) Find(ctx context.Context, key string) (provider.Job, bool, error) {
	if key == "" {
		return provider.Job{}, false, nil
	}
	rec, hasRec := p.record(key)
	seed := catalog.DerivedSeed(key)
	cutoff := p.cfg.Now().Add(-p.cfg.FindWindow)
	next := p.base + "/v1/predictions"
	var found *prediction
	for page := 0; page < p.cfg.FindPages && next != ""; page++ {
		resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, next, nil, nil)
		if err != nil {
			return provider.Job{}, false, err
		}
		if err := p.http.Err(resp); err != nil {
			return provider.Job{}, false, err
		}
		var list struct {
			Next    *string      `json:"next"`
			Results []prediction `json:"results"`
		}
		if err := json.Unmarshal(resp.Body, &list); err != nil {
			return provider.Job{}, false, &provider.RetryableError{Err: err}
		}
		older := false
		for i := range list.Results {
			pr := list.Results[i]
			if t := pr.created(); !t.IsZero() && t.Before(cutoff) {
				older = true
				continue
			}
			if p.matches(pr, key, seed, rec, hasRec) {
				found = &pr // newest first: the last match is the oldest
			}
		}
		next = ""
		if list.Next != nil && !older {
			next = p.sameOrigin(*list.Next)
		}
	}
	if found == nil {
		return provider.Job{}, false, nil
	}
	model := ""
	if hasRec {
		model = rec.model
	} else if e, ok := p.entryForPrediction(*found); ok {
		model = e.ID
	}
	return makeJob(found.ID, model), true, nil
}

// sameOrigin returns next when it stays on the API origin (the token
// must not follow a link elsewhere), else "".
func (p *Provider) sameOrigin(next string) string {
	u, err := url.Parse(next)
	b, _ := url.Parse(p.base)
	if err != nil || u.Scheme != b.Scheme || u.Host != b.Host {
		return ""
	}
	return next
}

func (p *Provider) matches(pr prediction, key string, seed int64, rec submitRecord, hasRec bool) bool {
	if pr.Webhook != "" {
		if u, err := url.Parse(pr.Webhook); err == nil && u.Query().Get(provider.WebhookKeyParam) == key {
			return true
		}
	}
	if hasRec {
		e, _ := p.models.Get(rec.model)
		if (e.Endpoint == "" || pr.Model == "" || pr.Model == e.Endpoint) &&
			!pr.created().Before(rec.sent.Add(-5*time.Minute)) && sameInput(rec.input, pr.Input) {
			return true
		}
		if !rec.derived {
			return false
		}
	}
	for _, e := range p.models.Entries() {
		if e.Input.Seed == "" {
			continue
		}
		if f, ok := pr.Input[e.Input.Seed].(float64); ok && int64(f) == seed {
			return true
		}
	}
	return false
}

// sameInput reports whether every field we sent is in got with the same
// JSON value.
func sameInput(sent, got map[string]any) bool {
	if got == nil {
		return false
	}
	for k, v := range sent {
		a, _ := json.Marshal(v)
		b, _ := json.Marshal(got[k])
		if !bytes.Equal(a, b) {
			return false
		}
	}
	return true
}
