// Package replicate is darkroom's adapter for Replicate predictions
// (https://api.replicate.com/v1).
//
// Wire facts it relies on (Replicate's HTTP API reference):
//
//   - create: POST /v1/models/{owner}/{name}/predictions {input} for
//     official models, or POST /v1/predictions {version, input} for a
//     version (a non-official model's, pinned or latest); optional
//     webhook + webhook_events_filter; the Cancel-After header sets a
//     deadline (we send Request.Deadline; at least MinCancelAfter).
//     Prefer: wait=n (1–60 s) holds the create until the prediction ends
//     (201, its final output) or n runs out (202, its current state);
//     sent only through SubmitWait (signal.go).
//   - get: GET /v1/predictions/{id}; cancel: POST /v1/predictions/{id}/cancel.
//   - statuses starting, processing, succeeded, failed, canceled, aborted.
//   - webhooks are signed with Standard Webhooks (see webhook.go).
//   - outputs live on replicate.delivery and are deleted after 1 hour.
//
// Replicate has no idempotency key. Find reconciles a lost submit by
// listing recent predictions; see find.go for what it matches on and its
// limits.
package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/fetch"
	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
	"github.com/darkroom-mcp/darkroom/provider/internal/seen"
)

// Name is the provider's id in the catalog.
const Name = "replicate"

// DefaultBaseURL is Replicate's API origin.
const DefaultBaseURL = "https://api.replicate.com"

// DefaultOutputHosts are the hosts Replicate serves outputs from.
var DefaultOutputHosts = []string{"replicate.delivery", "*.replicate.delivery"}

// Config configures a Provider. Only Token is required.
type Config struct {
	// Token is the API token (REPLICATE_API_TOKEN, read by the caller).
	Token string
	// BaseURL is the API origin (default DefaultBaseURL), without /v1.
	BaseURL string
	// Models are the catalog entries to serve; entries of other providers
	// are ignored. nil means the embedded default catalog.
	Models []catalog.Entry
	// WebhookSecret is the signing secret ("whsec_..."). Empty: call
	// LoadWebhookSecret at start, which asks Replicate for it.
	WebhookSecret string
	// WebhookEvents is webhook_events_filter (default start, completed).
	WebhookEvents []string
	// WebhookTolerance is the accepted clock skew of webhook-timestamp
	// (default 5 minutes).
	WebhookTolerance time.Duration
	// ReplayCache bounds the remembered webhook-ids (default 10000).
	ReplayCache int
	// CreatesPerMinute and RequestsPerMinute are the outbound limits per
	// token (defaults 600 and 3000, Replicate's documented limits);
	// negative disables one.
	CreatesPerMinute  int
	RequestsPerMinute int
	// MaxRateWait is how long a call may wait for the limiter before it
	// fails with a RetryableError (default 2 s; negative: never wait).
	MaxRateWait time.Duration
	// WaitBelow: a model expected to finish within it is submitted with
	// its create held (Prefer: wait, SubmitWait) where there is no
	// webhook (default and most MaxWait).
	WaitBelow time.Duration
	// HTTPClient sends API requests (nil: one with RequestTimeout).
	HTTPClient     *http.Client
	RequestTimeout time.Duration
	// Fetch is the output download policy; Hosts defaults to
	// DefaultOutputHosts.
	Fetch fetch.Options
	// FindPages bounds the list pages Find reads (100 predictions each;
	// default 3). FindWindow is how far back it looks (default 90 min).
	FindPages  int
	FindWindow time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Resolve gives the entry of a provider-qualified model id
	// ("replicate:owner/name"), built from its schema (modelschema); nil:
	// only the curated catalog is served.
	Resolve func(ctx context.Context, id string) (catalog.Entry, error)
}

// Provider is the Replicate adapter. It is safe for concurrent use.
type Provider struct {
	cfg      Config
	base     string
	http     *httpx.Client
	waitHTTP *httpx.Client // creates held by Prefer: wait (signal.go)
	fetch    *fetch.Fetcher
	models   catalog.Set
	replay   *seen.Set

	secretMu sync.RWMutex
	secret   []byte

	subMu   sync.Mutex
	submits map[string]submitRecord // by idempotency key, see find.go
}

// CheckEntry is what Replicate asks of a catalog entry: an endpoint is
// an official model's "owner/name" (or a pinned version instead), and
// each role's file goes in a named input field.
func CheckEntry(e catalog.Entry) error {
	if e.Endpoint != "" && strings.Count(e.Endpoint, "/") != 1 {
		return fmt.Errorf("replicate endpoint %q is not owner/name", e.Endpoint)
	}
	return e.RoleFields()
}

// New builds a Provider.
func New(cfg Config) (*Provider, error) {
	if cfg.Token == "" {
		return nil, errors.New("replicate: an API token is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Models == nil {
		cfg.Models = catalog.Default()
	}
	if err := catalog.CheckEntries(catalog.ForProvider(cfg.Models, Name), CheckEntry); err != nil {
		return nil, err
	}
	if len(cfg.WebhookEvents) == 0 {
		cfg.WebhookEvents = []string{"start", "completed"}
	}
	if cfg.WebhookTolerance <= 0 {
		cfg.WebhookTolerance = 5 * time.Minute
	}
	if cfg.CreatesPerMinute == 0 {
		cfg.CreatesPerMinute = 600
	}
	if cfg.RequestsPerMinute == 0 {
		cfg.RequestsPerMinute = 3000
	}
	if cfg.WaitBelow <= 0 || cfg.WaitBelow > MaxWait {
		cfg.WaitBelow = MaxWait
	}
	if cfg.FindPages <= 0 {
		cfg.FindPages = 3
	}
	if cfg.FindWindow <= 0 {
		cfg.FindWindow = 90 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Fetch.Hosts == nil {
		cfg.Fetch.Hosts = DefaultOutputHosts
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("replicate: bad base URL %q", cfg.BaseURL)
	}
	p := &Provider{
		cfg:  cfg,
		base: strings.TrimSuffix(cfg.BaseURL, "/"),
		http: httpx.New(httpx.Config{
			Provider: Name, AuthValue: "Bearer " + cfg.Token, HTTPClient: cfg.HTTPClient, Timeout: cfg.RequestTimeout,
			PerMinute: map[httpx.Class]int{httpx.Create: cfg.CreatesPerMinute, httpx.Other: cfg.RequestsPerMinute},
			MaxWait:   cfg.MaxRateWait, Now: cfg.Now,
		}),
		waitHTTP: httpx.New(httpx.Config{
			Provider: Name, AuthValue: "Bearer " + cfg.Token, HTTPClient: waitClient(cfg.HTTPClient),
			PerMinute: map[httpx.Class]int{httpx.Create: cfg.CreatesPerMinute, httpx.Other: cfg.RequestsPerMinute},
			MaxWait:   cfg.MaxRateWait, Now: cfg.Now,
		}),
		fetch:   fetch.New(cfg.Fetch),
		replay:  seen.New(cfg.ReplayCache, 2*cfg.WebhookTolerance, cfg.Now),
		submits: map[string]submitRecord{},
	}
	p.models = catalog.NewSet(cfg.Models, Name)
	if cfg.WebhookSecret != "" {
		if err := p.SetWebhookSecret(cfg.WebhookSecret); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Models implements provider.Provider.
func (p *Provider) Models() []provider.Model { return p.models.Models() }

// jobData is what Job.Data holds.
type jobData struct {
	Model string `json:"modelId,omitempty"`
}

func makeJob(id, model string) provider.Job {
	b, _ := json.Marshal(jobData{Model: model})
	return provider.Job{ID: id, Data: b}
}

// prediction is Replicate's prediction object (the fields we read).
type prediction struct {
	ID          string         `json:"id"`
	Model       string         `json:"model"`
	Version     string         `json:"version"`
	Input       map[string]any `json:"input"`
	Output      any            `json:"output"`
	Error       any            `json:"error"`
	Logs        string         `json:"logs"`
	Status      string         `json:"status"`
	CreatedAt   string         `json:"created_at"`
	StartedAt   string         `json:"started_at"`
	DataRemoved bool           `json:"data_removed"`
	Webhook     string         `json:"webhook"`
}

func (pr prediction) created() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, pr.CreatedAt)
	return t
}

// Submit implements provider.Provider.
func (p *Provider) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	job, _, _, err := p.create(ctx, req, 0)
	return job, err
}

// create makes the prediction, holding the call up to wait (Prefer:
// wait) when wait is set, and returns the prediction its reply carried.
func (p *Provider) create(ctx context.Context, req provider.Request, wait time.Duration) (provider.Job, prediction, catalog.Entry, error) {
	fail := func(err error) (provider.Job, prediction, catalog.Entry, error) {
		return provider.Job{}, prediction{}, catalog.Entry{}, err
	}
	e, ok, err := p.entry(ctx, req.Model.ID)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(&provider.PermanentError{Message: fmt.Sprintf("replicate does not serve model %q here", req.Model.ID)})
	}
	input, err := e.BuildInput(req)
	if err != nil {
		return fail(err)
	}
	body := map[string]any{"input": input}
	endpoint := p.base + "/v1/models/" + e.Endpoint + "/predictions"
	if e.Version != "" {
		endpoint = p.base + "/v1/predictions"
		body["version"] = e.Version
	}
	if req.WebhookURL != "" {
		wh, err := WithKey(req.WebhookURL, req.IdempotencyKey)
		if err != nil {
			return fail(err)
		}
		body["webhook"] = wh
		body["webhook_events_filter"] = p.cfg.WebhookEvents
	}
	hdr := http.Header{}
	now := p.cfg.Now()
	if !req.Deadline.IsZero() {
		left := req.Deadline.Sub(now)
		if left < MinCancelAfter {
			// Replicate refuses a shorter Cancel-After. Sending 5 s would
			// run the prediction past the deadline, when darkroom has
			// already given the generation up: it would be paid for and
			// never collected. So it ends here, unsent and uncharged.
			return fail(&provider.PermanentError{Message: "the generation's deadline passed before it was submitted (less than Replicate's 5 s minimum remained)"})
		}
		hdr.Set("Cancel-After", FormatCancelAfter(left))
	}
	client := p.http
	if wait > 0 {
		// Held up to wait, then answered: a client of its own, whose
		// bound is the wait and the usual request time after it.
		hdr.Set("Prefer", fmt.Sprintf("wait=%d", int64(wait/time.Second)))
		client = p.waitHTTP
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait+p.timeout())
		defer cancel()
	}
	p.remember(req.IdempotencyKey, e, input, req.Seed == 0, now)
	resp, err := client.Do(ctx, httpx.Create, http.MethodPost, endpoint, body, hdr)
	if err != nil {
		return fail(httpx.SubmitErr(err, nil))
	}
	if err := p.http.Err(resp); err != nil {
		if errors.Is(err, provider.ErrNotFound) {
			return fail(&provider.PermanentError{Message: fmt.Sprintf("replicate does not know model %s: %s", e.Endpoint, httpx.Message(resp.Body))})
		}
		return fail(httpx.SubmitErr(err, resp))
	}
	var pr prediction
	if err := json.Unmarshal(resp.Body, &pr); err != nil || pr.ID == "" {
		// Created or not, we cannot tell: leave it to Find.
		return fail(&provider.RetryableError{Err: fmt.Errorf("replicate: unreadable create reply (%d)", resp.Status)})
	}
	return makeJob(pr.ID, e.ID), pr, e, nil
}

// MinCancelAfter is the shortest Cancel-After Replicate takes: "The
// minimum allowed duration is 5 seconds" (its OpenAPI document,
// parameters_cancel_after_header, as mirrored in tryAGI/Replicate at
// 6c8ab8e, 2026-04-09; vendors-2026-12.md item 9).
const MinCancelAfter = 5 * time.Second

// FormatCancelAfter renders a Cancel-After value: whole hours ("6h"),
// minutes ("90m") or seconds ("45s"), rounded up to the second.
func FormatCancelAfter(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	switch {
	case s%3600 == 0:
		return strconv.FormatInt(s/3600, 10) + "h"
	case s%60 == 0:
		return strconv.FormatInt(s/60, 10) + "m"
	default:
		return strconv.FormatInt(s, 10) + "s"
	}
}

// WithKey adds the idempotency key to a webhook URL (see
// provider.WebhookKeyParam).
func WithKey(webhook, key string) (string, error) {
	u, err := url.Parse(webhook)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", &provider.PermanentError{Message: fmt.Sprintf("bad webhook URL %q", webhook)}
	}
	if key != "" {
		q := u.Query()
		q.Set(provider.WebhookKeyParam, key)
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

func (p *Provider) entryFor(ctx context.Context, job provider.Job, pr *prediction) catalog.Entry {
	var d jobData
	if len(job.Data) > 0 && json.Unmarshal(job.Data, &d) == nil {
		if e, ok, _ := p.entry(ctx, d.Model); ok {
			return e
		}
	}
	if pr != nil {
		if e, ok := p.entryForPrediction(*pr); ok {
			return e
		}
	}
	return catalog.Entry{} // outputs at the root of "output", type unknown
}

func (p *Provider) entryForPrediction(pr prediction) (catalog.Entry, bool) {
	for _, e := range p.models.Entries() {
		if (e.Endpoint != "" && e.Endpoint == pr.Model) || (e.Version != "" && pr.Version != "" && strings.HasSuffix(e.Version, pr.Version)) {
			return e, true
		}
	}
	return catalog.Entry{}, false
}

func (p *Provider) predictionURL(id string) string {
	return p.base + "/v1/predictions/" + url.PathEscape(id)
}

// Status implements provider.Provider.
func (p *Provider) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	pr, err := p.get(ctx, job.ID)
	if err != nil {
		return provider.Status{}, err
	}
	return toStatus(pr, p.entryFor(ctx, job, &pr)), nil
}

func (p *Provider) get(ctx context.Context, id string) (prediction, error) {
	if id == "" {
		return prediction{}, fmt.Errorf("replicate: %w: empty job id", provider.ErrNotFound)
	}
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, p.predictionURL(id), nil, nil)
	if err != nil {
		return prediction{}, err
	}
	if err := p.http.Err(resp); err != nil {
		return prediction{}, err
	}
	var pr prediction
	if err := json.Unmarshal(resp.Body, &pr); err != nil {
		return prediction{}, &provider.RetryableError{Err: fmt.Errorf("replicate: unreadable prediction: %w", err)}
	}
	return pr, nil
}

// Cancel implements provider.Provider.
func (p *Provider) Cancel(ctx context.Context, job provider.Job) (provider.Status, error) {
	if job.ID == "" {
		return provider.Status{}, fmt.Errorf("replicate: %w: empty job id", provider.ErrNotFound)
	}
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodPost, p.predictionURL(job.ID)+"/cancel", nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	if err := p.http.Err(resp); err != nil {
		return provider.Status{}, err
	}
	var pr prediction
	if json.Unmarshal(resp.Body, &pr) != nil || pr.Status == "" {
		return p.Status(ctx, job) // the reply did not carry the prediction
	}
	return toStatus(pr, p.entryFor(ctx, job, &pr)), nil
}

// OpenOutput implements provider.Provider: the URL must be on Replicate's
// delivery hosts (Config.Fetch).
func (p *Provider) OpenOutput(ctx context.Context, job provider.Job, out provider.Output) (io.ReadCloser, error) {
	rc, err := p.fetch.Open(ctx, out.URL)
	if err != nil {
		return nil, fetch.ProviderError(Name, err)
	}
	return rc, nil
}

// toStatus maps a prediction onto darkroom's Status.
func toStatus(pr prediction, e catalog.Entry) provider.Status {
	switch pr.Status {
	case "starting":
		return provider.Status{State: provider.StateQueued, Message: "starting: waiting for a Replicate worker"}
	case "processing":
		st := provider.Status{State: provider.StateRunning, Message: "running"}
		st.StartedAt, _ = time.Parse(time.RFC3339Nano, pr.StartedAt)
		if pct, ok := LogProgress(pr.Logs); ok {
			st.Progress = pct / 100
			st.Message = fmt.Sprintf("running: %.0f%%", pct)
		}
		return st
	case "succeeded":
		if pr.DataRemoved {
			return provider.Status{State: provider.StateFailed, Error: "Replicate has deleted this prediction's outputs (API outputs are kept 1 hour)"}
		}
		return provider.Status{State: provider.StateCompleted, Progress: 1, Message: "succeeded", Outputs: e.Outputs(pr.Output)}
	case "failed":
		msg := clip.Message(httpx.Text(pr.Error))
		if msg == "" {
			msg = "the prediction failed at Replicate without a message"
		}
		return provider.Status{State: provider.StateFailed, Error: msg}
	case "canceled":
		return provider.Status{State: provider.StateCancelled, Message: "canceled at Replicate"}
	case "aborted":
		// Deadline (Cancel-After) hit before it started; not charged. Not
		// a cancellation anyone asked for, so it ends failed.
		return provider.Status{State: provider.StateFailed, Error: "Replicate aborted the prediction: its deadline passed before it started (not charged)"}
	default:
		return provider.Status{State: provider.StateQueued, Message: fmt.Sprintf("Replicate status %q", pr.Status)}
	}
}

var pctRE = regexp.MustCompile(`(\d{1,3}(?:\.\d+)?)\s?%`)
var stepRE = regexp.MustCompile(`\b(\d{1,6})/(\d{1,6})\b`)

// LogProgress finds the latest progress percentage in prediction logs
// (tqdm bars "45%|████▌ | 9/20", or "step 9/20"). ok is false when the
// logs show none.
func LogProgress(logs string) (pct float64, ok bool) {
	lines := strings.FieldsFunc(logs, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-50; i-- {
		line := lines[i]
		if m := pctRE.FindAllStringSubmatch(line, -1); m != nil {
			v, err := strconv.ParseFloat(m[len(m)-1][1], 64)
			if err == nil && v >= 0 && v <= 100 {
				return v, true
			}
		}
		if m := stepRE.FindAllStringSubmatch(line, -1); m != nil {
			a, _ := strconv.Atoi(m[len(m)-1][1])
			b, _ := strconv.Atoi(m[len(m)-1][2])
			if b > 0 && a <= b {
				return float64(a) * 100 / float64(b), true
			}
		}
	}
	return 0, false
}
