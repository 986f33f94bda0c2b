package google

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	ia "google.golang.org/genai/interactions/models/interactions"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
)

// interactionsPath is the Interactions API's root (go-genai v1.79.1
// interactions.go: "/{api_version}/interactions", document version
// v1beta).
const interactionsPath = "/v1beta/interactions"

// startInteraction creates the background interaction and returns its id.
func (p *Provider) startInteraction(ctx context.Context, e catalog.Entry, body ia.CreateModelInteraction) (string, error) {
	resp, err := p.http.Do(ctx, httpx.Create, http.MethodPost, p.base+interactionsPath, body, nil)
	if err != nil {
		return "", httpx.SubmitErr(err, nil)
	}
	if !resp.OK() {
		return "", p.replyErr(e, resp)
	}
	var it ia.Interaction
	if json.Unmarshal(resp.Body, &it) != nil || it.ID == nil || !validInteraction(*it.ID) {
		// Made or not, we cannot tell.
		return "", &provider.RetryableError{Err: fmt.Errorf("google: unreadable interaction in the reply (%d)", resp.Status)}
	}
	return *it.ID, nil
}

// interactionID keeps a vendor-given id to one path segment.
var interactionID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

func validInteraction(id string) bool { return interactionID.MatchString(id) }

// replyErr maps a refused Gemini API submit or call (see refusedErr).
func (p *Provider) replyErr(e catalog.Entry, r *httpx.Response) error {
	return refusedErr(p.http, "the Gemini API", e, r)
}

// refusedErr maps a refused submit or call: Google answered, so nothing
// was made (a 429 or 5xx wraps ErrNotCreated; the runner retries later,
// after the RetryInfo delay a 429 names).
func refusedErr(c *httpx.Client, backend string, e catalog.Entry, r *httpx.Response) error {
	err := c.Err(r)
	var re *provider.RetryableError
	switch {
	case errors.As(err, &re):
		after := re.After
		if d := retryDelay(r.Body); d > 0 {
			after = d
		}
		return &provider.RetryableError{Err: fmt.Errorf("%w: %w", provider.ErrNotCreated, re.Err), After: after}
	case errors.Is(err, provider.ErrNotFound):
		return &provider.PermanentError{Message: fmt.Sprintf("%s does not serve model %s: %s", backend, e.Endpoint, httpx.Message(r.Body))}
	}
	return err
}

// statusErr maps a refused status call as httpx does, with the
// RetryInfo delay a 429 names (Google sends no Retry-After).
func statusErr(c *httpx.Client, r *httpx.Response) error {
	err := c.Err(r)
	var re *provider.RetryableError
	if d := retryDelay(r.Body); d > 0 && errors.As(err, &re) {
		return &provider.RetryableError{Err: re.Err, After: d}
	}
	return err
}

func (p *Provider) interactionStatus(ctx context.Context, d jobData) (provider.Status, error) {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, p.base+interactionsPath+"/"+d.Interaction, nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	if err := statusErr(p.http, resp); err != nil {
		return provider.Status{}, err
	}
	return readInteraction(resp.Body)
}

func readInteraction(body []byte) (provider.Status, error) {
	var it ia.Interaction
	if err := json.Unmarshal(body, &it); err != nil {
		return provider.Status{}, &provider.RetryableError{Err: fmt.Errorf("google: unreadable interaction: %w", err)}
	}
	return interactionState(&it), nil
}

// interactionState maps an Interaction onto darkroom's states. Statuses
// are the SDK's InteractionStatus values; a status the SDK does not know
// yet counts as running until it turns into one it knows.
func interactionState(it *ia.Interaction) provider.Status {
	switch it.Status {
	case ia.InteractionStatusQueued:
		return provider.Status{State: provider.StateQueued, Message: "queued at Google"}
	case ia.InteractionStatusCompleted:
	case ia.InteractionStatusCancelled:
		return provider.Status{State: provider.StateCancelled, Message: "cancelled at Google"}
	case ia.InteractionStatusFailed, ia.InteractionStatusIncomplete, ia.InteractionStatusBudgetExceeded, ia.InteractionStatusRequiresAction:
		return provider.Status{State: provider.StateFailed, Error: "Gemini failed: " + interactionErrors(it)}
	default:
		return provider.Status{State: provider.StateRunning, Message: "Gemini is generating the video"}
	}
	it.PopulateOutputProperties()
	if v := it.OutputVideo; v != nil && v.URI != nil && *v.URI != "" {
		mime := "video/mp4"
		if v.MimeType != nil && strings.HasPrefix(string(*v.MimeType), "video/") {
			mime = string(*v.MimeType)
		}
		return provider.Status{State: provider.StateCompleted, Progress: 1, Message: "completed", Outputs: []provider.Output{{URL: *v.URI, MimeType: mime}}}
	}
	if t := it.OutputText; t != nil && strings.TrimSpace(*t) != "" {
		return provider.Status{State: provider.StateFailed, Error: clip.Message("Gemini answered with text and no video: " + strings.TrimSpace(*t))}
	}
	return provider.Status{State: provider.StateFailed, Error: "Gemini finished without a video (an inline video or none: darkroom asks for a uri)"}
}

// interactionErrors says why an interaction ended without its video.
func interactionErrors(it *ia.Interaction) string {
	var parts []string
	for _, e := range it.Errors {
		if e.Message != nil && strings.TrimSpace(*e.Message) != "" {
			parts = append(parts, strings.TrimSpace(*e.Message))
		}
	}
	for _, s := range it.Steps {
		if m := s.ModelOutputStep; m != nil && m.Error != nil && m.Error.Message != nil {
			parts = append(parts, strings.TrimSpace(*m.Error.Message))
		}
	}
	if len(parts) == 0 {
		return "status " + string(it.Status)
	}
	return clip.Message(strings.Join(parts, "; "))
}

// cancelInteraction stops a background interaction; Google answers with
// the interaction as it now is.
func (p *Provider) cancelInteraction(ctx context.Context, d jobData) (provider.Status, error) {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodPost, p.base+interactionsPath+"/"+d.Interaction+"/cancel", nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	if err := p.http.Err(resp); err != nil {
		return provider.Status{}, err
	}
	st, err := readInteraction(resp.Body)
	if err != nil {
		return provider.Status{State: provider.StateRunning, Message: "cancellation requested at Google"}, nil
	}
	if !st.State.Terminal() {
		st.Message = "cancellation requested at Google; " + st.Message
	}
	return st, nil
}

// maxRetryDelay bounds the wait a vendor's reply may impose.
const maxRetryDelay = 10 * time.Minute

// retryDelay reads the google.rpc.RetryInfo a Gemini 429 carries
// ({"error": {"details": [{"@type": ".../google.rpc.RetryInfo",
// "retryDelay": "30s"}]}}); 0 when there is none.
func retryDelay(body []byte) time.Duration {
	var v struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return 0
	}
	for _, x := range v.Error.Details {
		if strings.HasSuffix(x.Type, "google.rpc.RetryInfo") {
			if d, err := time.ParseDuration(x.RetryDelay); err == nil && d > 0 {
				return min(d, maxRetryDelay)
			}
		}
	}
	return 0
}
