package google

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"
	googleauth "golang.org/x/oauth2/google"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
	"github.com/darkroom-mcp/darkroom/provider/internal/syncjob"
)

// Vertex configures the optional Vertex AI backend, where Veo lives
// (go-genai v1.79.1 calls it "Gemini Enterprise Agent Platform mode").
// Wire facts, from go-genai's Vertex converters (models.go
// generateVideosParametersToVertex, generateVideosResponseFromVertex;
// operations.go fetchPredictOperation), read 2026-12-07:
//
//   - POST /v1/projects/{project}/locations/{location}/publishers/google/
//     models/{model}:predictLongRunning with {"instances": [{"prompt",
//     "image", "lastFrame", "referenceImages"}], "parameters":
//     {"aspectRatio", "durationSeconds", "resolution", "generateAudio",
//     "negativePrompt", "sampleCount", ...}} → an operation {"name"}.
//   - POST .../models/{model}:fetchPredictOperation {"operationName"}
//     until "done"; then "error" {"code", "message"} or a response whose
//     videos come inline ({"videos": [{"bytesBase64Encoded", "mimeType"}]},
//     as no storage bucket is named), or raiMediaFilteredCount/Reasons.
//     There is no cancel.
//   - the caller is an OAuth 2.0 bearer: application default credentials
//     (a service account key file) exchanged for an access token.
type Vertex struct {
	Project  string
	Location string
	// BaseURL is Vertex's origin; default https://{location}-aiplatform.googleapis.com
	// (https://aiplatform.googleapis.com for location "global").
	BaseURL string
	// Credentials is a service account key file's content; nil means
	// application default credentials (GOOGLE_APPLICATION_CREDENTIALS,
	// gcloud's, or the metadata server).
	Credentials []byte
}

// cloudPlatform is the OAuth scope Vertex AI takes.
const cloudPlatform = "https://www.googleapis.com/auth/cloud-platform"

// vertexName names the backend in errors.
const vertexName = "Vertex AI"

// vertexBackend is a configured Vertex AI: its clients and where its
// models are.
type vertexBackend struct {
	base   string // origin + "/v1/projects/{p}/locations/{l}/publishers/google/models/"
	prefix string // "projects/{p}/locations/{l}/publishers/google/models/"
	http   *httpx.Client
	call   *httpx.Client // fetchPredictOperation, which may carry the video
	tokens oauth2.TokenSource
}

func newVertex(ctx context.Context, cfg Config) (*vertexBackend, error) {
	v := cfg.Vertex
	if v.Project == "" || v.Location == "" {
		return nil, errors.New("google: Vertex AI needs both a project and a location")
	}
	if strings.ContainsAny(v.Project+v.Location, "/?#% ") {
		return nil, fmt.Errorf("google: bad Vertex project %q or location %q", v.Project, v.Location)
	}
	base := v.BaseURL
	switch {
	case base != "":
	case v.Location == "global":
		base = "https://aiplatform.googleapis.com"
	default:
		base = "https://" + v.Location + "-aiplatform.googleapis.com"
	}
	// The token exchange runs on the provider's HTTP client too (a test's,
	// or the default), for the provider's whole life.
	exchange := cfg.HTTPClient
	if exchange == nil {
		exchange = &http.Client{Timeout: 30 * time.Second}
	}
	tokenCtx := context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, exchange)
	var creds *googleauth.Credentials
	var err error
	if v.Credentials != nil {
		creds, err = googleauth.CredentialsFromJSONWithType(tokenCtx, v.Credentials, googleauth.ServiceAccount, cloudPlatform)
	} else {
		creds, err = googleauth.FindDefaultCredentials(tokenCtx, cloudPlatform)
	}
	if err != nil {
		return nil, fmt.Errorf("google: Vertex AI credentials: %w", err)
	}
	tokens := creds.TokenSource // reuses a token until it expires
	client := func(timeout time.Duration) *httpx.Client {
		var transport http.RoundTripper
		if cfg.HTTPClient != nil {
			transport = cfg.HTTPClient.Transport
		}
		return httpx.New(httpx.Config{
			Provider:   vertexName,
			HTTPClient: &http.Client{Timeout: timeout, Transport: &oauth2.Transport{Source: tokens, Base: transport}},
			PerMinute:  map[httpx.Class]int{httpx.Create: cfg.RequestsPerMinute, httpx.Other: cfg.RequestsPerMinute},
			MaxWait:    cfg.MaxRateWait, Now: cfg.Now,
		})
	}
	prefix := "projects/" + v.Project + "/locations/" + v.Location + "/publishers/google/models/"
	return &vertexBackend{
		base: strings.TrimSuffix(base, "/") + "/v1/" + prefix, prefix: prefix,
		http: client(cmp.Or(cfg.RequestTimeout, 30*time.Second)), call: client(cfg.CallTimeout),
		tokens: tokens,
	}, nil
}

// startVeo makes the Veo operation on Vertex and returns its name.
func (p *Provider) startVeo(ctx context.Context, e catalog.Entry, body map[string]any) (string, error) {
	resp, err := p.vertex.http.Do(ctx, httpx.Create, http.MethodPost, p.vertex.base+e.Endpoint+":predictLongRunning", body, nil)
	if signIn := (*oauth2.RetrieveError)(nil); errors.As(err, &signIn) {
		// Google refused the credentials before any call was made.
		return "", &provider.PermanentError{Message: clip.Message("Google refused darkroom's Vertex AI credentials: " + signIn.Error())}
	}
	if err != nil {
		return "", httpx.SubmitErr(err, nil)
	}
	if !resp.OK() {
		return "", refusedErr(p.vertex.http, vertexName, e, resp)
	}
	var op struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(resp.Body, &op) != nil || !p.validOperation(e, op.Name) {
		// Made or not, we cannot tell.
		return "", &provider.RetryableError{Err: fmt.Errorf("google: unreadable Vertex AI operation in the reply (%d)", resp.Status)}
	}
	return op.Name, nil
}

// validOperation keeps a vendor-given operation name to one of this
// project's operations of e's model.
func (p *Provider) validOperation(e catalog.Entry, name string) bool {
	id, ok := strings.CutPrefix(name, p.vertex.prefix+e.Endpoint+"/operations/")
	return ok && id != "" && !strings.ContainsAny(id, "/?#%\\ ")
}

// veoStatus fetches the operation; done, its video streams from the
// reply into the spool (never held whole), as the generation's output.
func (p *Provider) veoStatus(ctx context.Context, d jobData) (provider.Status, error) {
	model, _, _ := strings.Cut(strings.TrimPrefix(d.Operation, p.vertex.prefix), "/")
	body, _ := json.Marshal(map[string]string{"operationName": d.Operation})
	resp, refused, err := p.vertex.call.Open(ctx, httpx.Other, http.MethodPost, p.vertex.base+model+":fetchPredictOperation", bytes.NewReader(body), "application/json", nil)
	if err != nil {
		return provider.Status{}, err
	}
	if refused != nil {
		return provider.Status{}, statusErr(p.vertex.http, refused)
	}
	defer resp.Body.Close()
	sc := syncjob.NewScanner(resp.Body, []string{"bytesBase64Encoded"}, []string{"done", "code", "message", "raiMediaFilteredCount", "raiMediaFilteredReasons"})
	outs, err := p.journal.StoreVideo(ctx, d.Key, 0, sc, 1)
	var perm *provider.PermanentError
	switch {
	case errors.As(err, &perm):
		return provider.Status{State: provider.StateFailed, Error: perm.Message}, nil
	case err != nil:
		return provider.Status{}, &provider.RetryableError{Err: fmt.Errorf("google: read Vertex AI operation: %w", err)}
	case len(outs) > 0:
		return provider.Status{State: provider.StateCompleted, Progress: 1, Message: "completed", Outputs: outs}, nil
	}
	return veoState(sc.Small), nil
}

// grpcCancelled is google.rpc.Code CANCELLED.
const grpcCancelled = "1"

// veoState reads an operation that carried no video.
func veoState(small map[string][]string) provider.Status {
	first := func(k string) string {
		if v := small[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	switch {
	case first("done") != "true":
		return provider.Status{State: provider.StateRunning, Message: "Veo is generating"}
	case first("message") != "" && first("code") == grpcCancelled:
		return provider.Status{State: provider.StateCancelled, Message: clip.Message("cancelled at Google: " + first("message"))}
	case first("message") != "":
		return provider.Status{State: provider.StateFailed, Error: clip.Message("Veo failed: " + first("message"))}
	case len(small["raiMediaFilteredReasons"]) > 0 || first("raiMediaFilteredCount") != "" && first("raiMediaFilteredCount") != "0":
		return provider.Status{State: provider.StateFailed, Error: clip.Message("Google's safety filters removed the video: " + orText(strings.Join(small["raiMediaFilteredReasons"], "; "), "no reason given"))}
	default:
		return provider.Status{State: provider.StateFailed, Error: "Veo finished without a video"}
	}
}

func orText(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// veoBody builds a Vertex Veo request from the catalog's field map: the
// prompt, first frame, last frame and "asset" reference images in the
// instance, the mapped fields and defaults in parameters.
func veoBody(ctx context.Context, e catalog.Entry, req provider.Request) (map[string]any, error) {
	in, err := e.BuildInput(req)
	if err != nil {
		return nil, err
	}
	inst := map[string]any{"prompt": in[e.Input.Prompt]}
	delete(in, e.Input.Prompt)
	veoImage := func(x *provider.Input) (map[string]any, error) {
		img, err := inline(ctx, x)
		return map[string]any{"bytesBase64Encoded": img.data, "mimeType": img.mime}, err
	}
	if req.InputImage != nil && e.Input.InputImage != "" {
		delete(in, e.Input.InputImage)
		if inst["image"], err = veoImage(req.InputImage); err != nil {
			return nil, err
		}
	}
	var refs []any
	for i := range req.Extra {
		x := &req.Extra[i]
		switch x.Role {
		case provider.RoleLastFrame:
			if inst["lastFrame"], err = veoImage(x); err != nil {
				return nil, err
			}
		case provider.RoleReference:
			img, err := veoImage(x)
			if err != nil {
				return nil, err
			}
			refs = append(refs, map[string]any{"image": img, "referenceType": "asset"})
		}
	}
	if len(refs) > 0 {
		inst["referenceImages"] = refs
	}
	return map[string]any{"instances": []any{inst}, "parameters": in}, nil
}
