// Package google is darkroom's adapter for Google's Gemini API
// (https://generativelanguage.googleapis.com): the Gemini image models
// for images, the Gemini Omni models for video; and, with a Google Cloud
// project, for Vertex AI's Veo (see Vertex).
//
// Wire facts it relies on, from Google's Go SDK (google.golang.org/genai
// v1.79.1, read 2026-12-07; the emulator, testdata/emulator/google.go,
// serves the same shapes and a test holds both to the SDK's types):
//
//   - every call carries the key in x-goog-api-key; errors are
//     {"error": {"code", "message", "status"}} (400 INVALID_ARGUMENT,
//     403 PERMISSION_DENIED, 404 NOT_FOUND for a model it does not serve,
//     429 RESOURCE_EXHAUSTED with a google.rpc.RetryInfo detail, 500
//     INTERNAL, 503 UNAVAILABLE).
//   - Gemini image models: POST /v1beta/models/{model}:generateContent
//     with contents[].parts (text, then inlineData for the image to edit
//     and the reference images) and generationConfig.responseModalities
//     ["TEXT", "IMAGE"] (imageConfig.aspectRatio, imageSize); image parts
//     come back as candidates[].content.parts[].inlineData.data; a
//     refusal is promptFeedback.blockReason or a finishReason such as
//     IMAGE_SAFETY.
//   - Gemini Omni video, only through the Interactions API: POST
//     /v1beta/interactions with the SDK's CreateModelInteraction
//     (background true, input content, a video response format delivered
//     as a uri) returns an Interaction {"id", "status"}; its event stream
//     is held until it ends (stream.go), or GET /v1beta/interactions/{id}
//     polled until the status is terminal; a completed
//     one's last model_output step holds the video's uri (downloaded with
//     the key); POST /v1beta/interactions/{id}/cancel stops it.
//
// Image calls are synchronous: Submit makes the call, streams the base64
// images through a decoder into the Spool, and the job it returns is
// already complete (see provider/internal/syncjob for how a crash
// mid-call resubmits at most once). An interaction's id is journalled
// the same way, so a crash after the interaction was made and before
// darkroom recorded it still finds that one interaction.
package google

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	ia "google.golang.org/genai/interactions/models/interactions"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/fetch"
	"github.com/darkroom-mcp/darkroom/provider/internal/events"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
	"github.com/darkroom-mcp/darkroom/provider/internal/syncjob"
)

// Name is the provider's id in the catalog.
const Name = "google"

// DefaultBaseURL is the Gemini API's origin.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// DefaultOutputHosts are where video downloads may lead: the API itself
// (files/...:download) and the storage it redirects to.
var DefaultOutputHosts = []string{"generativelanguage.googleapis.com", "*.googleusercontent.com"}

// Config configures a Provider. Spool, and Key or Vertex, are required.
type Config struct {
	// Key is the Gemini API key (DARKROOM_GEMINI_API_KEY or
	// GEMINI_API_KEY, read by the caller): it serves the "gemini" and
	// "interactions" entries.
	Key string
	// Vertex, set, serves the "veo" entries through Vertex AI.
	Vertex *Vertex
	// BaseURL is the API origin (default DefaultBaseURL).
	BaseURL string
	// Models are the catalog entries to serve; entries of other providers
	// are ignored. nil means the embedded default catalog.
	Models []catalog.Entry
	// Spool holds synchronous results until the runner copies them, and
	// the submit journal.
	Spool provider.Spool
	// RequestsPerMinute is an outbound limit per key (default 300;
	// negative disables it).
	RequestsPerMinute int
	MaxRateWait       time.Duration
	// HTTPClient sends API requests (nil: one per timeout below).
	HTTPClient *http.Client
	// RequestTimeout bounds a status or submit call (default 30 s);
	// CallTimeout a synchronous image call (default 5 min).
	RequestTimeout time.Duration
	CallTimeout    time.Duration
	// Fetch is the video download policy; Hosts defaults to
	// DefaultOutputHosts plus BaseURL's host.
	Fetch fetch.Options
	// MaxConcurrentCalls bounds the synchronous calls held open at once
	// (default 4): each holds a runner worker while it lasts; more wait
	// queued.
	MaxConcurrentCalls int
	// StreamStall is how long an interaction's event stream may send
	// nothing before it is dropped and the interaction polled (default
	// DefaultStreamStall); StreamFor bounds one stream (default 10 min).
	StreamStall time.Duration
	StreamFor   time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Provider is the Gemini API and Vertex AI adapter. It is safe for
// concurrent use.
type Provider struct {
	cfg     Config
	base    string
	http    *httpx.Client  // status, submit, cancel
	call    *httpx.Client  // synchronous calls
	stream  *httpx.Client  // interaction streams: no whole-request timeout
	vertex  *vertexBackend // nil without Vertex
	fetch   *fetch.Fetcher
	models  catalog.Set
	journal syncjob.Journal
	gate    *syncjob.Gate
}

// CheckEntry is what Google asks of a catalog entry: its API is
// "gemini" (generateContent), "interactions" (the Interactions API) or
// "veo" (Vertex AI), and it takes reference images, and a last frame on
// Veo, which darkroom sends itself.
func CheckEntry(e catalog.Entry) error {
	if e.API != "gemini" && e.API != "interactions" && e.API != "veo" {
		return fmt.Errorf("google api %q is not gemini, interactions or veo", e.API)
	}
	for role := range e.Roles {
		if role != provider.RoleReference && (role != provider.RoleLastFrame || e.API != "veo") {
			return fmt.Errorf("roles: google takes reference images (and a last frame on Veo), not %q", role)
		}
	}
	return nil
}

// New builds a Provider. With Vertex, it reads the credentials (a bad
// key file fails here, not at the first call).
func New(cfg Config) (*Provider, error) {
	if cfg.Key == "" && cfg.Vertex == nil {
		return nil, errors.New("google: a Gemini API key or a Vertex AI project is required")
	}
	if cfg.Spool == nil {
		return nil, errors.New("google: a spool is required")
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
		cfg.RequestsPerMinute = 300
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 5 * time.Minute
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
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("google: bad base URL %q", cfg.BaseURL)
	}
	if cfg.Fetch.Hosts == nil {
		cfg.Fetch.Hosts = DefaultOutputHosts
	}
	cfg.Fetch.Hosts = append(append([]string(nil), cfg.Fetch.Hosts...), u.Hostname())
	client := func(hc *http.Client, timeout time.Duration) *httpx.Client {
		return httpx.New(httpx.Config{
			Provider: Name, AuthHeader: "X-Goog-Api-Key", AuthValue: cfg.Key, HTTPClient: hc, Timeout: timeout,
			PerMinute: map[httpx.Class]int{httpx.Create: cfg.RequestsPerMinute, httpx.Other: cfg.RequestsPerMinute},
			MaxWait:   cfg.MaxRateWait, Now: cfg.Now,
		})
	}
	p := &Provider{
		cfg: cfg, base: strings.TrimSuffix(cfg.BaseURL, "/"),
		http: client(cfg.HTTPClient, cfg.RequestTimeout), call: client(cfg.HTTPClient, cfg.CallTimeout),
		stream:  client(events.Client(cfg.HTTPClient), 0),
		fetch:   fetch.New(cfg.Fetch),
		journal: syncjob.Journal{Spool: cfg.Spool, Provider: Name},
		gate:    syncjob.NewGate(cfg.MaxConcurrentCalls, 0),
	}
	if cfg.Vertex != nil {
		if p.vertex, err = newVertex(context.Background(), cfg); err != nil {
			return nil, err
		}
	}
	// Each entry is served by the backend it needs, when configured.
	var served []catalog.Entry
	for _, e := range cfg.Models {
		if Backend(e) == "vertex" && p.vertex != nil || Backend(e) == "gemini" && cfg.Key != "" {
			served = append(served, e)
		}
	}
	p.models = catalog.NewSet(served, Name)
	return p, nil
}

// Backend names the setting an entry of this provider needs: the Gemini
// API key, or a Vertex AI project ("veo" entries).
func Backend(e catalog.Entry) string {
	if e.API == "veo" {
		return "vertex"
	}
	return "gemini"
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Models implements provider.Provider.
func (p *Provider) Models() []provider.Model { return p.models.Models() }

// ResubmitMayDuplicate implements provider.DuplicateRisk: the Gemini API
// takes no idempotency key, so after a second interrupted submit (Find
// answers ErrUnsupported) the runner must not call again.
func (p *Provider) ResubmitMayDuplicate() bool { return true }

// jobData is what Job.Data holds.
type jobData struct {
	Model string `json:"modelId"`
	// Key is the generation's id (its submit journal's name).
	Key string `json:"key,omitempty"`
	// Interaction is a video interaction's id (Gemini API).
	Interaction string `json:"interaction,omitempty"`
	// Operation is a Veo operation's name (Vertex AI).
	Operation string `json:"operation,omitempty"`
	// Outputs are a synchronous call's spooled files.
	Outputs     []provider.Output `json:"outputs,omitempty"`
	Resubmitted bool              `json:"resubmitted,omitempty"`
}

func (p *Provider) data(job provider.Job) (jobData, error) {
	var d jobData
	if len(job.Data) == 0 || json.Unmarshal(job.Data, &d) != nil || (d.Interaction == "" && d.Operation == "" && len(d.Outputs) == 0) {
		return d, &provider.PermanentError{Message: "google job record lacks its interaction, operation or outputs"}
	}
	if d.Operation != "" && (p.vertex == nil || !strings.HasPrefix(d.Operation, p.vertex.prefix)) {
		return d, &provider.PermanentError{Message: "this Veo operation is not one of this server's Vertex AI project (or a Gemini API Veo operation from before darkroom moved to Gemini Omni)"}
	}
	return d, nil
}

// Submit implements provider.Provider.
func (p *Provider) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	e, ok := p.models.Get(req.Model.ID)
	if !ok {
		return provider.Job{}, &provider.PermanentError{Message: fmt.Sprintf("google does not serve model %q here", req.Model.ID)}
	}
	// Each API's request is built (and refused, for free) before the
	// journal counts an attempt.
	var body map[string]any
	var interaction ia.CreateModelInteraction
	var err error
	switch e.API {
	case "interactions":
		interaction, err = interactionBody(ctx, e, req)
	case "veo":
		body, err = veoBody(ctx, e, req)
	default:
		body, err = geminiBody(ctx, e, req)
	}
	if err != nil {
		return provider.Job{}, err
	}
	if e.API == "gemini" {
		leave, err := p.gate.Enter(Name)
		if err != nil {
			return provider.Job{}, err
		}
		defer leave()
	}
	begin := p.journal.Begin
	if e.API != "gemini" {
		// An interaction or a Veo operation is a paid video that cannot
		// be looked up after a lost reply: never started twice.
		begin = p.journal.BeginOnce
	}
	n, err := begin(ctx, req.IdempotencyKey)
	if err != nil {
		return provider.Job{}, err
	}
	d := jobData{Model: e.ID, Key: req.IdempotencyKey, Resubmitted: n > 1}
	switch e.API {
	case "interactions":
		d.Interaction, err = p.startInteraction(ctx, e, interaction)
	case "veo":
		d.Operation, err = p.startVeo(ctx, e, body)
	default:
		d.Outputs, err = p.generate(ctx, e, body, req, n)
	}
	if err != nil {
		if errors.Is(err, provider.ErrNotCreated) {
			p.journal.Undo(ctx, req.IdempotencyKey, n)
		}
		return provider.Job{}, err
	}
	b, _ := json.Marshal(d)
	job := provider.Job{ID: cmp.Or(d.Interaction, d.Operation, "sync-"+req.IdempotencyKey), Data: b}
	// The work is done whether or not this record lands: the runner
	// records the job from our answer; the record only serves a crash.
	_ = p.journal.Done(ctx, req.IdempotencyKey, n, job)
	return job, nil
}

// Find implements provider.Provider from the submit journal.
func (p *Provider) Find(ctx context.Context, key string) (provider.Job, bool, error) {
	return p.journal.Find(ctx, key)
}

// Status implements provider.Provider.
func (p *Provider) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	d, err := p.data(job)
	if err != nil {
		return provider.Status{}, err
	}
	var st provider.Status
	switch {
	case d.Interaction != "":
		st, err = p.interactionStatus(ctx, d)
	case d.Operation != "":
		st, err = p.veoStatus(ctx, d)
	default:
		p.journal.Forget(ctx, d.Key)
		return syncDone(d), nil
	}
	if err == nil && st.State.Terminal() {
		p.journal.Forget(ctx, d.Key)
	}
	return st, err
}

func syncDone(d jobData) provider.Status {
	st := provider.Status{State: provider.StateCompleted, Progress: 1, Message: "completed", Outputs: d.Outputs}
	if d.Resubmitted {
		st.Message = provider.ResubmittedNote + "; Google may bill both calls"
	}
	return st
}

// Cancel implements provider.Provider: a synchronous job is already
// done; a video interaction is asked to stop; a Veo operation cannot be
// (Vertex AI has no cancel for it): it runs to its end.
func (p *Provider) Cancel(ctx context.Context, job provider.Job) (provider.Status, error) {
	d, err := p.data(job)
	if err != nil {
		return provider.Status{}, err
	}
	switch {
	case d.Interaction != "":
		return p.cancelInteraction(ctx, d)
	case d.Operation != "":
		return provider.Status{State: provider.StateRunning, Message: "Vertex AI does not cancel a Veo operation; it runs to its end"}, nil
	}
	return syncDone(d), nil
}

// OpenOutput implements provider.Provider: spooled files from the spool,
// videos from their uri with the key (only on the API's own origin;
// a redirect elsewhere gets no key).
func (p *Provider) OpenOutput(ctx context.Context, job provider.Job, out provider.Output) (io.ReadCloser, error) {
	if strings.HasPrefix(out.URL, syncjob.URLPrefix) {
		return p.journal.Open(ctx, out)
	}
	var creds http.Header
	if httpx.SameOrigin(p.base, out.URL) || httpx.SameOrigin(DefaultBaseURL, out.URL) {
		creds = http.Header{"X-Goog-Api-Key": {p.cfg.Key}}
	}
	rc, err := p.fetch.OpenWith(ctx, out.URL, creds)
	if err != nil {
		return nil, fetch.ProviderError(Name, err)
	}
	return rc, nil
}

// RefundsFailures implements provider.RefundsFailures: Google bills the
// images and videos it delivers, not refused calls or failed interactions.
func (p *Provider) RefundsFailures() bool { return true }

// Ping implements provider.Pinger: the Gemini API's model list (one
// entry) with a key; a Vertex AI sign-in with Vertex.
func (p *Provider) Ping(ctx context.Context) error {
	if p.cfg.Key != "" {
		if err := p.http.Ping(ctx, p.base+"/v1beta/models?pageSize=1"); err != nil {
			return err
		}
	}
	if p.vertex != nil {
		// Signing in is the check: Vertex has no cheap model list.
		if _, err := p.vertex.tokens.Token(); err != nil {
			return fmt.Errorf("google: Vertex AI sign-in: %w", err)
		}
	}
	return nil
}

// maxListPages bounds the Gemini API's model list darkroom reads (1,000
// models a page).
const maxListPages = 20

// Listed implements provider.Lister: the Gemini API's model list, read
// with the key, for the Gemini API's entries' vendor models; Vertex AI's
// are left out (darkroom reads no Vertex model list).
func (p *Provider) Listed(ctx context.Context) (provider.Listing, error) {
	out := provider.Listing{}
	if p.cfg.Key == "" {
		return out, nil
	}
	names := map[string]bool{}
	token := ""
	for range maxListPages {
		u := p.base + "/v1beta/models?pageSize=1000"
		if token != "" {
			u += "&pageToken=" + url.QueryEscape(token)
		}
		var page struct {
			Models []struct {
				Name string `json:"name"`
			} `json:"models"`
			Next string `json:"nextPageToken"`
		}
		if err := p.http.GetJSON(ctx, u, &page); err != nil {
			return nil, err
		}
		for _, m := range page.Models {
			names[strings.TrimPrefix(m.Name, "models/")] = true
		}
		if token = page.Next; token == "" {
			break
		}
	}
	for _, e := range p.models.Entries() {
		if Backend(e) == "gemini" {
			for _, v := range e.Candidates() {
				out[v] = provider.VendorModel{Listed: names[v]}
			}
		}
	}
	return out, nil
}

// Retarget implements provider.Retargeter.
func (p *Provider) Retarget(runs map[string]string) { p.models.Retarget(runs) }
