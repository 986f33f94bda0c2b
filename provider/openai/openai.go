// Package openai is darkroom's adapter for OpenAI's image API
// (https://api.openai.com/v1/images). OpenAI's video API is shut down, so
// this is images only.
//
// Wire facts it relies on:
//
//   - POST /v1/images/generations, JSON {model, prompt, n, size, quality,
//     background, output_format, output_compression, moderation}; POST
//     /v1/images/edits, multipart/form-data with image (png, webp or jpg),
//     an optional mask (a PNG whose transparent pixels mark what to
//     change, the image's size) and the same fields. GPT image models
//     always answer base64: {"data": [{"b64_json", "revised_prompt"}]}.
//   - Authorization: Bearer key; OpenAI-Organization and OpenAI-Project
//     select the organization and project.
//   - errors are {"error": {"message", "type", "param", "code"}}: 429
//     rate_limit_exceeded (wait Retry-After-Ms, else Retry-After), 429
//     insufficient_quota (billing: retrying cannot help), 400
//     moderation_blocked or content_policy_violation (the safety system
//     refused), 401 invalid_api_key, 5xx server_error.
//
// Every call is synchronous: Submit makes it, streams the base64 images
// through a decoder into the Spool, and returns a completed job (see
// provider/internal/syncjob for how a crash mid-call resubmits at most
// once). The API takes no idempotency key. A GPT image model's call of
// one image streams, its partial images becoming the live preview
// (stream.go).
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
	"github.com/darkroom-mcp/darkroom/provider/internal/syncjob"
)

// Name is the provider's id in the catalog.
const Name = "openai"

// DefaultBaseURL is OpenAI's API origin.
const DefaultBaseURL = "https://api.openai.com"

// Config configures a Provider. Key and Spool are required.
type Config struct {
	// Key is the API key (DARKROOM_OPENAI_API_KEY or OPENAI_API_KEY, read
	// by the caller).
	Key string
	// BaseURL is the API origin (default DefaultBaseURL); an
	// OpenAI-compatible gateway may stand in. A trailing /v1 is accepted.
	BaseURL string
	// Organization and Project, when set, are sent as OpenAI-Organization
	// and OpenAI-Project.
	Organization, Project string
	// Models are the catalog entries to serve; entries of other providers
	// are ignored. nil means the embedded default catalog.
	Models []catalog.Entry
	// Spool holds results until the runner copies them, and the submit
	// journal.
	Spool provider.Spool
	// RequestsPerMinute is an outbound limit per key (default 250, under
	// the lowest paid tier's image limit; negative disables it).
	RequestsPerMinute int
	MaxRateWait       time.Duration
	// HTTPClient sends requests (nil: one with CallTimeout).
	HTTPClient *http.Client
	// CallTimeout bounds one image call (default 5 min: a high-quality
	// gpt-image edit can take over a minute).
	CallTimeout time.Duration
	// MaxConcurrentCalls bounds the synchronous calls held open at once
	// (default 4): each holds a runner worker while it lasts; more wait
	// queued.
	MaxConcurrentCalls int
	// PartialImages is how many partial images a streamed call of a GPT
	// image model asks for (0–3; 0 means DefaultPartialImages; negative:
	// no streaming, the plain reply). They become the generation's live
	// preview (stream.go).
	PartialImages int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Provider is the OpenAI image adapter. It is safe for concurrent use.
type Provider struct {
	cfg     Config
	base    string
	http    *httpx.Client
	models  catalog.Set
	journal syncjob.Journal
	gate    *syncjob.Gate
	live    livePreviews
}

// CheckEntry is what OpenAI asks of a catalog entry: its API is
// "images" (generations, or edits with an input image).
func CheckEntry(e catalog.Entry) error {
	if e.API != "images" {
		return fmt.Errorf("openai api %q is not images", e.API)
	}
	return nil
}

// New builds a Provider.
func New(cfg Config) (*Provider, error) {
	if cfg.Key == "" {
		return nil, errors.New("openai: an API key is required")
	}
	if cfg.Spool == nil {
		return nil, errors.New("openai: a spool is required")
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
	if cfg.RequestsPerMinute == 0 {
		cfg.RequestsPerMinute = 250
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PartialImages == 0 {
		cfg.PartialImages = DefaultPartialImages
	}
	cfg.PartialImages = min(cfg.PartialImages, 3)
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("openai: bad base URL %q", cfg.BaseURL)
	}
	base := strings.TrimSuffix(strings.TrimSuffix(cfg.BaseURL, "/"), "/v1")
	return &Provider{
		cfg: cfg, base: base,
		http: httpx.New(httpx.Config{
			Provider: Name, AuthValue: "Bearer " + cfg.Key, HTTPClient: cfg.HTTPClient, Timeout: cfg.CallTimeout,
			PerMinute: map[httpx.Class]int{httpx.Create: cfg.RequestsPerMinute},
			MaxWait:   cfg.MaxRateWait, Now: cfg.Now,
		}),
		models:  catalog.NewSet(cfg.Models, Name),
		journal: syncjob.Journal{Spool: cfg.Spool, Provider: Name},
		gate:    syncjob.NewGate(cfg.MaxConcurrentCalls, 0),
	}, nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Models implements provider.Provider.
func (p *Provider) Models() []provider.Model { return p.models.Models() }

// ResubmitMayDuplicate implements provider.DuplicateRisk: no idempotency
// key, so after a second interrupted call the runner must not call again.
func (p *Provider) ResubmitMayDuplicate() bool { return true }

type jobData struct {
	Model       string            `json:"modelId"`
	Key         string            `json:"key,omitempty"` // the generation's id (its journal's name)
	Outputs     []provider.Output `json:"outputs"`
	Resubmitted bool              `json:"resubmitted,omitempty"`
	// RevisedPrompt is the prompt as OpenAI rewrote it, when it says.
	RevisedPrompt string `json:"revisedPrompt,omitempty"`
}

// Submit implements provider.Provider: the call itself.
func (p *Provider) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	e, ok := p.models.Get(req.Model.ID)
	if !ok {
		return provider.Job{}, &provider.PermanentError{Message: fmt.Sprintf("openai does not serve model %q here", req.Model.ID)}
	}
	fields, err := e.BuildInput(req)
	if err != nil {
		return provider.Job{}, err
	}
	fields["model"] = e.Endpoint
	if p.streams(e, req, fields) {
		fields["stream"], fields["partial_images"] = true, p.cfg.PartialImages
		p.live.begin(req.IdempotencyKey)
		defer p.live.end(req.IdempotencyKey)
	}
	leave, err := p.gate.Enter(Name)
	if err != nil {
		return provider.Job{}, err
	}
	defer leave()
	n, err := p.journal.Begin(ctx, req.IdempotencyKey)
	if err != nil {
		return provider.Job{}, err
	}
	d, err := p.call(ctx, e, req, fields, n)
	if err != nil {
		if errors.Is(err, provider.ErrNotCreated) {
			p.journal.Undo(ctx, req.IdempotencyKey, n)
		}
		return provider.Job{}, err
	}
	b, _ := json.Marshal(d)
	job := provider.Job{ID: "sync-" + req.IdempotencyKey, Data: b}
	// The images are spooled whether or not this record lands; it only
	// serves a crash before the runner records the job.
	_ = p.journal.Done(ctx, req.IdempotencyKey, n, job)
	return job, nil
}

// Find implements provider.Provider from the submit journal.
func (p *Provider) Find(ctx context.Context, key string) (provider.Job, bool, error) {
	return p.journal.Find(ctx, key)
}

// Status implements provider.Provider: a job is complete from the start.
func (p *Provider) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	var d jobData
	if len(job.Data) == 0 || json.Unmarshal(job.Data, &d) != nil || len(d.Outputs) == 0 {
		return provider.Status{}, &provider.PermanentError{Message: "openai job record lacks its outputs"}
	}
	p.journal.Forget(ctx, d.Key)
	st := provider.Status{State: provider.StateCompleted, Progress: 1, Message: "completed", Outputs: d.Outputs}
	if d.Resubmitted {
		st.Message = provider.ResubmittedNote + "; OpenAI may bill both calls"
	}
	return st, nil
}

// Cancel implements provider.Provider: there is nothing left to stop.
func (p *Provider) Cancel(ctx context.Context, job provider.Job) (provider.Status, error) {
	return p.Status(ctx, job)
}

// OpenOutput implements provider.Provider from the spool.
func (p *Provider) OpenOutput(ctx context.Context, job provider.Job, out provider.Output) (io.ReadCloser, error) {
	return p.journal.Open(ctx, out)
}

// RefundsFailures implements provider.RefundsFailures: a refused image
// request (moderation, quota, invalid) makes no image and is not billed.
func (p *Provider) RefundsFailures() bool { return true }

// Ping implements provider.Pinger: OpenAI's model list.
func (p *Provider) Ping(ctx context.Context) error {
	return p.http.Ping(ctx, p.base+"/v1/models")
}

// Listed implements provider.Lister: OpenAI's model list, read with the
// key.
func (p *Provider) Listed(ctx context.Context) (provider.Listing, error) {
	var list struct {
		Data []struct {
			ID string `json:"id"`
			// ShutdownDate is "YYYY-MM-DD" or null (openai-go v3.105.0
			// model.go: Model.ShutdownDate, format date, nullable).
			ShutdownDate *string `json:"shutdown_date"`
		} `json:"data"`
	}
	if err := p.http.GetJSON(ctx, p.base+"/v1/models", &list); err != nil {
		return nil, err
	}
	ids := provider.Listing{}
	for _, m := range list.Data {
		vm := provider.VendorModel{Listed: true}
		if m.ShutdownDate != nil {
			vm.ShutdownDate, _ = time.Parse(time.DateOnly, *m.ShutdownDate) // a date it cannot read announces nothing
		}
		ids[m.ID] = vm
	}
	out := provider.Listing{}
	for _, v := range p.models.Vendors() {
		out[v] = ids[v]
	}
	return out, nil
}

// Retarget implements provider.Retargeter.
func (p *Provider) Retarget(runs map[string]string) { p.models.Retarget(runs) }
