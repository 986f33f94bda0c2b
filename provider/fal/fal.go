// Package fal is darkroom's adapter for the fal.ai queue
// (https://queue.fal.run).
//
// Wire facts it relies on (fal's queue API reference):
//
//   - submit: POST {queue}/{model_id}[/{subpath}] with the JSON input,
//     Authorization: Key $FAL_KEY; the reply has request_id, status_url,
//     response_url and cancel_url. fal says not to build these ("Do not
//     build these URLs yourself": fal.ai/docs/api-reference/inference-api,
//     2026), so they are persisted in Job.Data and used for every later
//     call of the request, as long as they are on the queue's origin
//     (our key goes with each call). Only a URL fal did not give us (a
//     job learnt from a webhook, a record without it, a reply pointing
//     elsewhere) is rebuilt, as fal-js builds it (queueApp).
//   - status: GET status_url?logs=1 → IN_QUEUE (queue_position),
//     IN_PROGRESS (logs), COMPLETED; result: GET response_url. A
//     COMPLETED request whose result answers 5xx marked as fal's request
//     error ended failed inside the app (see result).
//   - cancel: PUT cancel_url → CANCELLATION_REQUESTED (202),
//     ALREADY_COMPLETED (400), NOT_FOUND (404), OK.
//   - webhook: ?fal_webhook=<url> on submit; fal POSTs {request_id,
//     gateway_request_id, status OK|ERROR, payload} when the request is
//     done, retrying up to 10 times over 2 hours, signed with ED25519
//     keys from fal's JWKS (see webhook.go). A verified delivery names
//     the request; its state is read with a Status call.
//   - limits are concurrency, not RPM; excess requests queue at fal.
//
// fal has no idempotency key (none is documented) and no way to list
// requests by something we set, so Find answers ErrUnsupported and the
// Provider implements provider.DuplicateRisk: a submit whose reply was
// lost must not be resubmitted blindly. The key travels in the webhook
// URL, so a verified webhook from our own account can still tie the job
// to its generation (see webhook.go for what makes that safe).
package fal

import (
	"cmp"
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
	"github.com/darkroom-mcp/darkroom/provider/internal/events"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
	"github.com/darkroom-mcp/darkroom/provider/internal/seen"
)

// Name is the provider's id in the catalog.
const Name = "fal"

// DefaultQueueURL is fal's queue origin.
const DefaultQueueURL = "https://queue.fal.run"

// DefaultOutputHosts are the hosts fal serves outputs from: its CDN
// (v3.fal.media is the documented one; other fal.media subdomains are
// seen in practice). storage.googleapis.com, used by some older fal
// models, is not included: it serves anyone's buckets; add it through
// Config.Fetch.Hosts if a model needs it.
var DefaultOutputHosts = []string{"fal.media", "*.fal.media"}

// Config configures a Provider. Only Key is required.
type Config struct {
	// Key is the API key (FAL_KEY, read by the caller).
	Key string
	// QueueURL is the queue origin (default DefaultQueueURL).
	QueueURL string
	// Models are the catalog entries to serve; entries of other providers
	// are ignored. nil means the embedded default catalog.
	Models []catalog.Entry
	// MaxConcurrent caps this process's unfinished fal jobs (default 2,
	// a new account's allowance). When it is reached Submit returns a
	// RetryableError (wrapping provider.ErrNotCreated and ErrAtCapacity) whose After is
	// ConcurrencyRetry, so the runner keeps the generation queued.
	MaxConcurrent    int
	ConcurrencyRetry time.Duration // default 5 s
	// ActiveTTL forgets a job that never reached an end we saw (default
	// 3 h), so an abandoned job cannot hold a slot for ever.
	ActiveTTL time.Duration
	// RequestsPerMinute is an outbound limit per key (default 600;
	// negative disables it). fal limits concurrency, not rate; this only
	// guards against runaway polling.
	RequestsPerMinute int
	MaxRateWait       time.Duration
	// ObjectLifetime, when set, asks fal to keep outputs this long
	// (X-Fal-Object-Lifecycle-Preference). darkroom copies outputs at
	// once, so an hour is plenty.
	ObjectLifetime time.Duration
	// StreamStall is how long a status stream may send nothing before it
	// is dropped and the request polled (default 15 s, fal-js's
	// EVENT_STREAM_TIMEOUT); StreamFor bounds one stream (default 10 min).
	StreamStall time.Duration
	StreamFor   time.Duration
	// HTTPClient sends API requests (nil: one with RequestTimeout).
	HTTPClient     *http.Client
	RequestTimeout time.Duration
	// Fetch is the output download policy; Hosts defaults to
	// DefaultOutputHosts.
	Fetch fetch.Options
	// WebhookJWKSURL is where fal's webhook signing keys are fetched
	// (default DefaultJWKSURL). WebhookKeysTTL is how long they are
	// cached (default and most 24 h, fal's limit). WebhookTolerance is the
	// accepted skew of X-Fal-Webhook-Timestamp (default 5 min).
	WebhookJWKSURL   string
	WebhookKeysTTL   time.Duration
	WebhookTolerance time.Duration
	// WebhookUserID is our fal account's user id, as fal's deliveries
	// state it. When set, a delivery from any other account can never
	// bind its request to a generation; when empty, the account is learnt
	// from the first verified delivery about a request we submitted.
	WebhookUserID string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// APIURL is fal's Platform API origin (pricing, search; default
	// DefaultAPIURL); OpenAPIURL serves the endpoints' OpenAPI documents
	// (default DefaultOpenAPIURL).
	APIURL     string
	OpenAPIURL string
	// Resolve gives the entry of a provider-qualified model id
	// ("fal:owner/app"), built from its schema (modelschema); nil: only
	// the curated catalog is served.
	Resolve func(ctx context.Context, id string) (catalog.Entry, error)
}

// Provider is the fal adapter. It is safe for concurrent use.
type Provider struct {
	cfg     Config
	queue   string
	api     string
	openapi string
	http    *httpx.Client
	fetch   *fetch.Fetcher
	models  catalog.Set
	stream  *httpx.Client // status streams: no whole-request timeout
	hooks   *seen.Set     // verified deliveries (request ids)
	mine    *seen.Set     // request ids this process submitted
	keys    *jwks

	mu        sync.Mutex
	pending   int                  // submits in flight (concurrency cap)
	active    map[string]slot      // request id → its job (concurrency cap)
	cancelled map[string]time.Time // request ids we asked to cancel
	account   string               // our user id, learnt from a delivery
}

// CheckEntry is what fal asks of a catalog entry: the endpoint is an
// app's "owner/app[/subpath]", and each role's file goes in a named
// input field.
func CheckEntry(e catalog.Entry) error {
	if strings.Count(e.Endpoint, "/") < 1 {
		return fmt.Errorf("fal endpoint %q is not owner/app[/subpath]", e.Endpoint)
	}
	return e.RoleFields()
}

// New builds a Provider.
func New(cfg Config) (*Provider, error) {
	if cfg.Key == "" {
		return nil, errors.New("fal: an API key is required")
	}
	if cfg.QueueURL == "" {
		cfg.QueueURL = DefaultQueueURL
	}
	if cfg.Models == nil {
		cfg.Models = catalog.Default()
	}
	if err := catalog.CheckEntries(catalog.ForProvider(cfg.Models, Name), CheckEntry); err != nil {
		return nil, err
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 2
	}
	if cfg.ConcurrencyRetry <= 0 {
		cfg.ConcurrencyRetry = 5 * time.Second
	}
	if cfg.ActiveTTL <= 0 {
		cfg.ActiveTTL = 3 * time.Hour
	}
	if cfg.RequestsPerMinute == 0 {
		cfg.RequestsPerMinute = 600
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StreamStall <= 0 {
		cfg.StreamStall = DefaultStreamStall
	}
	if cfg.StreamFor <= 0 {
		cfg.StreamFor = 10 * time.Minute
	}
	if cfg.Fetch.Hosts == nil {
		cfg.Fetch.Hosts = DefaultOutputHosts
	}
	cfg.APIURL = strings.TrimSuffix(cmp.Or(cfg.APIURL, DefaultAPIURL), "/")
	cfg.OpenAPIURL = strings.TrimSuffix(cmp.Or(cfg.OpenAPIURL, DefaultOpenAPIURL), "/")
	for _, o := range []string{cfg.APIURL, cfg.OpenAPIURL} {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("fal: bad API URL %q", o)
		}
	}
	if cfg.WebhookJWKSURL == "" {
		cfg.WebhookJWKSURL = DefaultJWKSURL
	}
	if cfg.WebhookKeysTTL <= 0 || cfg.WebhookKeysTTL > maxJWKSAge {
		cfg.WebhookKeysTTL = maxJWKSAge
	}
	if cfg.WebhookTolerance <= 0 {
		cfg.WebhookTolerance = 5 * time.Minute
	}
	if ju, err := url.Parse(cfg.WebhookJWKSURL); err != nil || (ju.Scheme != "https" && ju.Scheme != "http") || ju.Host == "" {
		return nil, fmt.Errorf("fal: bad JWKS URL %q", cfg.WebhookJWKSURL)
	}
	u, err := url.Parse(cfg.QueueURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("fal: bad queue URL %q", cfg.QueueURL)
	}
	p := &Provider{
		cfg:     cfg,
		queue:   strings.TrimSuffix(cfg.QueueURL, "/"),
		api:     cfg.APIURL,
		openapi: cfg.OpenAPIURL,
		http: httpx.New(httpx.Config{
			Provider: Name, AuthValue: "Key " + cfg.Key, HTTPClient: cfg.HTTPClient, Timeout: cfg.RequestTimeout,
			PerMinute: map[httpx.Class]int{httpx.Create: cfg.RequestsPerMinute, httpx.Other: cfg.RequestsPerMinute},
			MaxWait:   cfg.MaxRateWait, Now: cfg.Now,
		}),
		stream: httpx.New(httpx.Config{
			Provider: Name, AuthValue: "Key " + cfg.Key, HTTPClient: events.Client(cfg.HTTPClient),
			PerMinute: map[httpx.Class]int{httpx.Create: cfg.RequestsPerMinute, httpx.Other: cfg.RequestsPerMinute},
			MaxWait:   cfg.MaxRateWait, Now: cfg.Now,
		}),
		fetch:     fetch.New(cfg.Fetch),
		hooks:     seen.New(10000, 3*time.Hour, cfg.Now), // fal retries for 2 h
		mine:      seen.New(10000, 3*time.Hour, cfg.Now),
		keys:      &jwks{url: cfg.WebhookJWKSURL, client: jwksClient(cfg), now: cfg.Now, ttl: cfg.WebhookKeysTTL},
		active:    map[string]slot{},
		cancelled: map[string]time.Time{},
	}
	p.models = catalog.NewSet(cfg.Models, Name)
	return p, nil
}

func jwksClient(cfg Config) *http.Client {
	if cfg.HTTPClient != nil {
		return cfg.HTTPClient
	}
	return &http.Client{Timeout: 10 * time.Second}
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Models implements provider.Provider.
func (p *Provider) Models() []provider.Model { return p.models.Models() }

// ResubmitMayDuplicate implements provider.DuplicateRisk: fal has no
// idempotency key and Find cannot tell.
func (p *Provider) ResubmitMayDuplicate() bool { return true }

// jobData is what Job.Data holds.
type jobData struct {
	Model       string `json:"modelId,omitempty"`
	RequestID   string `json:"requestId"`
	StatusURL   string `json:"statusUrl"`
	ResponseURL string `json:"responseUrl"`
	CancelURL   string `json:"cancelUrl"`
}

// queueApp is the part of an endpoint id that fal's status, result and
// cancel paths keep, as fal-js builds them (parseEndpointId in
// libs/client/src/utils.ts, used by queue.ts status/result/cancel;
// fal-ai/fal-js 381105e, 2026-08-02): owner/alias, after a "workflows/"
// or "comfy/" namespace, the sub-path dropped ("fal-ai/flux/dev" →
// "fal-ai/flux", "workflows/o/a/x" → "workflows/o/a").
func queueApp(endpoint string) string {
	parts := strings.Split(endpoint, "/")
	n := 2
	if parts[0] == "workflows" || parts[0] == "comfy" {
		n = 3
	}
	if len(parts) <= n {
		return endpoint
	}
	return strings.Join(parts[:n], "/")
}

// urlsFor rebuilds the queue URLs of a request from its endpoint, for
// when fal's own are not to be had.
func (p *Provider) urlsFor(endpoint, requestID string) jobData {
	base := p.queue + "/" + queueApp(endpoint) + "/requests/" + url.PathEscape(requestID)
	return jobData{RequestID: requestID, StatusURL: base + "/status", ResponseURL: base, CancelURL: base + "/cancel"}
}

// onQueue is the URL fal gave when it is on the queue's origin (our key
// goes with every call, so a reply never sends it elsewhere), else the
// rebuilt one.
func (p *Provider) onQueue(given, rebuilt string) string {
	if given != "" && httpx.SameOrigin(p.queue, given) {
		return given
	}
	return rebuilt
}

// endpointOf is the endpoint of a model: its entry's, or the path in a
// qualified id ("fal:owner/app/sub"); "" when neither says.
func endpointOf(e catalog.Entry, modelID string) string {
	if e.Endpoint != "" {
		return e.Endpoint
	}
	if ref, err := own.ParseID(modelID); err == nil {
		return ref.Path
	}
	return ""
}

// JobFor rebuilds the Job of a fal request of a catalog model from its
// request id (for a request id learnt from a verified webhook, with the
// generation's own model).
func (p *Provider) JobFor(modelID, requestID string) (provider.Job, error) {
	e, _ := p.models.Get(modelID)
	endpoint := endpointOf(e, modelID)
	if endpoint == "" || requestID == "" {
		return provider.Job{}, fmt.Errorf("fal: cannot build a job for model %q request %q", modelID, requestID)
	}
	d := p.urlsFor(endpoint, requestID)
	d.Model = cmp.Or(e.ID, modelID)
	b, _ := json.Marshal(d)
	return provider.Job{ID: requestID, Data: b}, nil
}

// data reads a job's record. Its URLs are checked again (the queue URL may
// have changed since), and one missing or off the queue's origin is
// rebuilt from the model's endpoint.
func (p *Provider) data(ctx context.Context, job provider.Job) (jobData, catalog.Entry, error) {
	var d jobData
	if len(job.Data) > 0 && json.Unmarshal(job.Data, &d) != nil {
		d = jobData{}
	}
	d.RequestID = cmp.Or(d.RequestID, job.ID)
	e, _, _ := p.entry(ctx, d.Model) // zero for a model no longer in the catalog
	if endpoint := endpointOf(e, d.Model); endpoint != "" && d.RequestID != "" {
		r := p.urlsFor(endpoint, d.RequestID)
		d.StatusURL, d.ResponseURL, d.CancelURL = p.onQueue(d.StatusURL, r.StatusURL), p.onQueue(d.ResponseURL, r.ResponseURL), p.onQueue(d.CancelURL, r.CancelURL)
	}
	for _, u := range []string{d.StatusURL, d.ResponseURL, d.CancelURL} {
		if !httpx.SameOrigin(p.queue, u) {
			return d, e, &provider.PermanentError{Message: "fal job record lacks its queue URLs"}
		}
	}
	return d, e, nil
}

// Submit implements provider.Provider.
func (p *Provider) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	e, ok, err := p.entry(ctx, req.Model.ID)
	if err != nil {
		return provider.Job{}, err
	}
	if !ok {
		return provider.Job{}, &provider.PermanentError{Message: fmt.Sprintf("fal does not serve model %q here", req.Model.ID)}
	}
	input, err := e.BuildInput(req)
	if err != nil {
		return provider.Job{}, err
	}
	if !p.reserve(ctx) {
		return provider.Job{}, &provider.RetryableError{
			Err:   fmt.Errorf("%w: %w: fal concurrency limit (%d unfinished jobs) reached", provider.ErrNotCreated, provider.ErrAtCapacity, p.cfg.MaxConcurrent),
			After: p.cfg.ConcurrencyRetry,
		}
	}
	submitted := false
	defer func() {
		if !submitted {
			p.unreserve()
		}
	}()
	target := p.queue + "/" + e.Endpoint
	if req.WebhookURL != "" {
		wh, err := webhookURL(req.WebhookURL, req.IdempotencyKey)
		if err != nil {
			return provider.Job{}, err
		}
		target += "?fal_webhook=" + url.QueryEscape(wh)
	}
	hdr := http.Header{}
	if p.cfg.ObjectLifetime > 0 {
		hdr.Set("X-Fal-Object-Lifecycle-Preference", fmt.Sprintf(`{"expiration_duration_seconds":%d}`, int64(p.cfg.ObjectLifetime/time.Second)))
	}
	resp, err := p.http.Do(ctx, httpx.Create, http.MethodPost, target, input, hdr)
	if err != nil {
		return provider.Job{}, httpx.SubmitErr(err, nil)
	}
	if err := p.http.Err(resp); err != nil {
		if errors.Is(err, provider.ErrNotFound) {
			return provider.Job{}, &provider.PermanentError{Message: fmt.Sprintf("fal does not know model %s: %s", e.Endpoint, httpx.Message(resp.Body))}
		}
		return provider.Job{}, httpx.SubmitErr(err, resp)
	}
	var r struct {
		RequestID   string `json:"request_id"`
		StatusURL   string `json:"status_url"`
		ResponseURL string `json:"response_url"`
		CancelURL   string `json:"cancel_url"`
	}
	if err := json.Unmarshal(resp.Body, &r); err != nil || r.RequestID == "" {
		// Queued or not, we cannot tell.
		return provider.Job{}, &provider.RetryableError{Err: fmt.Errorf("fal: unreadable submit reply (%d)", resp.Status)}
	}
	d := p.urlsFor(e.Endpoint, r.RequestID)
	d.Model = e.ID
	d.StatusURL, d.ResponseURL, d.CancelURL = p.onQueue(r.StatusURL, d.StatusURL), p.onQueue(r.ResponseURL, d.ResponseURL), p.onQueue(r.CancelURL, d.CancelURL)
	b, _ := json.Marshal(d)
	submitted = true
	job := provider.Job{ID: r.RequestID, Data: b}
	p.track(job)
	return job, nil
}

func webhookURL(webhook, key string) (string, error) {
	u, err := url.Parse(webhook)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", &provider.PermanentError{Message: fmt.Sprintf("bad webhook URL %q", webhook)}
	}
	q := u.Query()
	if key != "" {
		q.Set(provider.WebhookKeyParam, key)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// The concurrency cap: a slot is reserved before the submit and becomes
// the job's once fal accepts it; it is freed when we see the job end (or
// after ActiveTTL). A submit whose reply is lost keeps no slot: its job is
// not known to us until a webhook or a Status call names it.
//
// Only this process frees its slots, but in a fleet another replica may
// be the one that sees a job end (it took the generation over, or stepped
// it after a webhook). So when the cap is reached, the slots held longer
// than slotRecheck are asked at fal once more, and those that ended are
// freed: at most MaxConcurrent status calls, and only on a refusal.
type slot struct {
	at  time.Time
	job provider.Job
}

// slotRecheck is how long a slot is held before a full cap asks fal
// whether its job is still unfinished.
const slotRecheck = 30 * time.Second

func (p *Provider) reserve(ctx context.Context) bool {
	if p.take() {
		return true
	}
	for _, j := range p.staleSlots() {
		_, _ = p.Status(ctx, j) // frees the slot if fal says the job ended
	}
	return p.take()
}

// take reserves a slot if one is free.
func (p *Provider) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	for id, s := range p.active {
		if now.Sub(s.at) > p.cfg.ActiveTTL {
			delete(p.active, id)
		}
	}
	if len(p.active)+p.pending >= p.cfg.MaxConcurrent {
		return false
	}
	p.pending++
	return true
}

// staleSlots are the jobs whose slots were taken over slotRecheck ago.
func (p *Provider) staleSlots() []provider.Job {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	var out []provider.Job
	for _, s := range p.active {
		if now.Sub(s.at) > slotRecheck {
			out = append(out, s.job)
		}
	}
	return out
}

func (p *Provider) unreserve() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending--
}

func (p *Provider) track(job provider.Job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending--
	p.active[job.ID] = slot{p.cfg.Now(), job}
	p.mine.Add(job.ID)
}

func (p *Provider) release(requestID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.active, requestID)
	delete(p.cancelled, requestID)
}

// Active is the number of unfinished jobs counted against MaxConcurrent.
func (p *Provider) Active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.active) + p.pending
}

// Find implements provider.Provider: fal cannot tell (see the package
// comment), so it is ErrUnsupported.
func (p *Provider) Find(ctx context.Context, key string) (provider.Job, bool, error) {
	return provider.Job{}, false, provider.ErrUnsupported
}

type statusReply struct {
	Status        string          `json:"status"`
	QueuePosition *int            `json:"queue_position"`
	Logs          []logLine       `json:"logs"`
	Error         any             `json:"error"`
	ErrorType     string          `json:"error_type"`
	ResponseURL   string          `json:"response_url"`
	Metrics       json.RawMessage `json:"metrics"`
}

type logLine struct {
	Message string `json:"message"`
}

// Status implements provider.Provider. For a COMPLETED request it also
// fetches the result (response_url) to read the outputs or the error.
func (p *Provider) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	d, e, err := p.data(ctx, job)
	if err != nil {
		return provider.Status{}, err
	}
	st, err := p.status(ctx, d, e)
	if err == nil && st.State.Terminal() {
		p.release(d.RequestID)
	}
	if errors.Is(err, provider.ErrNotFound) {
		p.release(d.RequestID)
	}
	return st, err
}

func (p *Provider) status(ctx context.Context, d jobData, e catalog.Entry) (provider.Status, error) {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, withQuery(d.StatusURL, "logs", "1"), nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	if err := p.http.Err(resp); err != nil {
		return provider.Status{}, err
	}
	var r statusReply
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return provider.Status{}, &provider.RetryableError{Err: fmt.Errorf("fal: unreadable status: %w", err)}
	}
	return p.fromReply(ctx, d, e, r)
}

// fromReply maps one status object (the status endpoint's reply, or an
// event of its stream) onto darkroom's; a COMPLETED one costs the result.
func (p *Provider) fromReply(ctx context.Context, d jobData, e catalog.Entry, r statusReply) (provider.Status, error) {
	switch r.Status {
	case "IN_QUEUE":
		st := provider.Status{State: provider.StateQueued, Message: "in fal's queue"}
		if r.QueuePosition != nil {
			st.Message = fmt.Sprintf("in fal's queue, position %d", *r.QueuePosition)
		}
		return st, nil
	case "IN_PROGRESS":
		st := provider.Status{State: provider.StateRunning, Message: "running"}
		if pct, ok := logProgress(r.Logs); ok {
			st.Progress = pct / 100
			st.Message = fmt.Sprintf("running: %.0f%%", pct)
		}
		return st, nil
	case "COMPLETED":
		if msg := httpx.Text(r.Error); msg != "" {
			return p.failed(d, msg), nil
		}
		d.ResponseURL = p.onQueue(r.ResponseURL, d.ResponseURL) // fal's word, for a job whose URLs were rebuilt
		return p.result(ctx, d, e)
	default:
		return provider.Status{State: provider.StateQueued, Message: fmt.Sprintf("fal status %q", r.Status)}, nil
	}
}

func (p *Provider) failed(d jobData, msg string) provider.Status {
	msg = clip.Message(msg)
	p.mu.Lock()
	_, asked := p.cancelled[d.RequestID]
	p.mu.Unlock()
	if asked || strings.Contains(strings.ToLower(msg), "cancel") {
		return provider.Status{State: provider.StateCancelled, Message: "cancelled at fal: " + msg}
	}
	return provider.Status{State: provider.StateFailed, Error: msg}
}

// result reads a completed request's response.
func (p *Provider) result(ctx context.Context, d jobData, e catalog.Entry) (provider.Status, error) {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, d.ResponseURL, nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	switch {
	case resp.OK():
	case resp.Status == http.StatusBadRequest || resp.Status == http.StatusUnprocessableEntity:
		// The request itself failed (invalid input, content policy).
		msg := httpx.Message(resp.Body)
		if msg == "" {
			msg = fmt.Sprintf("the request failed at fal (%d)", resp.Status)
		}
		return p.failed(d, msg), nil
	case resp.Status == http.StatusNotFound || resp.Status == http.StatusGone:
		return provider.Status{State: provider.StateFailed, Error: "fal no longer has this request's result"}, nil
	case resp.Status >= 500:
		// The request is COMPLETED, so a 5xx fal marks as a request error
		// (error_type and X-Fal-Error-Type: "Request Error Types",
		// fal.ai/docs/documentation/model-apis/request-errors, 2026) is its
		// stored outcome: the app or its runner failed, and reading again
		// cannot change that. fal bills no 5xx ("Server errors (HTTP 500+)
		// are never charged": fal FAQ, 2026), so the generation ends
		// failed with fal's message and is refunded (NotBilled). An
		// unmarked 5xx is a fault on the way, retried.
		kind := requestError(resp)
		if kind == "" {
			return provider.Status{}, p.http.Err(resp)
		}
		msg := fmt.Sprintf("the request failed at fal (%d %s)", resp.Status, kind)
		if m := httpx.Message(resp.Body); m != "" {
			msg += ": " + m
		}
		st := p.failed(d, msg)
		st.NotBilled = st.State == provider.StateFailed
		return st, nil
	default:
		return provider.Status{}, p.http.Err(resp)
	}
	var v any
	if err := json.Unmarshal(resp.Body, &v); err != nil {
		return provider.Status{}, &provider.RetryableError{Err: fmt.Errorf("fal: unreadable result: %w", err)}
	}
	if m, ok := v.(map[string]any); ok {
		if msg := httpx.Text(m["detail"]); msg != "" && len(e.Outputs(v)) == 0 {
			return p.failed(d, msg), nil
		}
	}
	outs := e.Outputs(v)
	if e.Blocked(v) {
		return provider.Status{State: provider.StateFailed, Error: "fal's safety checker blocked the output (NSFW content detected); try a different prompt"}, nil
	}
	if len(outs) == 0 {
		return provider.Status{State: provider.StateFailed, Error: "fal reported completion but the result has no output file"}, nil
	}
	return provider.Status{State: provider.StateCompleted, Progress: 1, Message: "completed", Outputs: outs}, nil
}

// requestError is fal's error type of a failed request's reply: the
// X-Fal-Error-Type header, else the body's error_type ("" when neither).
func requestError(resp *httpx.Response) string {
	if t := resp.Header.Get("X-Fal-Error-Type"); t != "" {
		return t
	}
	var b struct {
		ErrorType string `json:"error_type"`
	}
	_ = json.Unmarshal(resp.Body, &b)
	return b.ErrorType
}

func withQuery(u, k, v string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := pu.Query()
	q.Set(k, v)
	pu.RawQuery = q.Encode()
	return pu.String()
}

var pctRE = regexp.MustCompile(`(\d{1,3}(?:\.\d+)?)\s?%`)
var stepRE = regexp.MustCompile(`\b(\d{1,6})/(\d{1,6})\b`)

// logProgress reads the latest percentage (or "n/m" step) from fal logs.
func logProgress(logs []logLine) (float64, bool) {
	for i := len(logs) - 1; i >= 0 && i >= len(logs)-50; i-- {
		msg := logs[i].Message
		if m := pctRE.FindAllStringSubmatch(msg, -1); m != nil {
			if v, err := strconv.ParseFloat(m[len(m)-1][1], 64); err == nil && v <= 100 {
				return v, true
			}
		}
		if m := stepRE.FindAllStringSubmatch(msg, -1); m != nil {
			a, _ := strconv.Atoi(m[len(m)-1][1])
			b, _ := strconv.Atoi(m[len(m)-1][2])
			if b > 0 && a <= b {
				return float64(a) * 100 / float64(b), true
			}
		}
	}
	return 0, false
}

// Cancel implements provider.Provider. fal cancels a queued request; an
// in-progress one gets a signal its app may ignore, so the state returned
// is what a status check says right after (StateCancelled only once fal
// shows it ended that way).
func (p *Provider) Cancel(ctx context.Context, job provider.Job) (provider.Status, error) {
	d, e, err := p.data(ctx, job)
	if err != nil {
		return provider.Status{}, err
	}
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodPut, d.CancelURL, nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	var r struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(resp.Body, &r)
	switch {
	case r.Status == "NOT_FOUND" || resp.Status == http.StatusNotFound:
		p.release(d.RequestID)
		return provider.Status{State: provider.StateCancelled, Message: "fal no longer knows this request; nothing is running"}, nil
	case r.Status == "ALREADY_COMPLETED" || (resp.Status == http.StatusBadRequest && r.Status == ""):
		return p.Status(ctx, job)
	case resp.OK() || r.Status == "CANCELLATION_REQUESTED":
		p.mu.Lock()
		p.cancelled[d.RequestID] = p.cfg.Now()
		p.mu.Unlock()
		st, err := p.status(ctx, d, e)
		if err != nil {
			// The cancel was asked; the next poll tells how it ended.
			return provider.Status{State: provider.StateRunning, Message: "cancellation requested at fal"}, nil
		}
		if st.State.Terminal() {
			p.release(d.RequestID)
		} else {
			st.Message = "cancellation requested at fal; " + st.Message
		}
		return st, nil
	default:
		return provider.Status{}, p.http.Err(resp)
	}
}

// OpenOutput implements provider.Provider: the URL must be on fal's CDN
// hosts (Config.Fetch).
func (p *Provider) OpenOutput(ctx context.Context, job provider.Job, out provider.Output) (io.ReadCloser, error) {
	rc, err := p.fetch.Open(ctx, out.URL)
	if err != nil {
		return nil, fetch.ProviderError(Name, err)
	}
	return rc, nil
}
