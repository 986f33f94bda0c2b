package google

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
)

// startVeo makes the operation and returns its name.
func (p *Provider) startVeo(ctx context.Context, e catalog.Entry, body map[string]any) (string, error) {
	resp, err := p.http.Do(ctx, httpx.Create, http.MethodPost, p.base+"/v1beta/models/"+e.Endpoint+":predictLongRunning", body, nil)
	if err != nil {
		return "", httpx.SubmitErr(err, nil)
	}
	if !resp.OK() {
		return "", p.replyErr(e, resp)
	}
	var op struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(resp.Body, &op) != nil || !validOperation(op.Name) {
		// Made or not, we cannot tell.
		return "", &provider.RetryableError{Err: fmt.Errorf("google: unreadable operation in the reply (%d)", resp.Status)}
	}
	return op.Name, nil
}

// validOperation keeps a vendor-given name to a path under /v1beta.
func validOperation(name string) bool {
	return strings.Contains(name, "operations/") && !strings.ContainsAny(name, "?#%\\ ") && !strings.Contains(name, "..") && !strings.HasPrefix(name, "/")
}

// replyErr maps a refused submit or call: Google answered, so nothing
// was made (a 429 or 5xx wraps ErrNotCreated; the runner retries later).
func (p *Provider) replyErr(e catalog.Entry, r *httpx.Response) error {
	err := p.http.Err(r)
	var re *provider.RetryableError
	switch {
	case errors.As(err, &re):
		return &provider.RetryableError{Err: fmt.Errorf("%w: %w", provider.ErrNotCreated, re.Err), After: re.After}
	case errors.Is(err, provider.ErrNotFound):
		return &provider.PermanentError{Message: fmt.Sprintf("the Gemini API does not know model %s: %s", e.Endpoint, httpx.Message(r.Body))}
	}
	return err
}

type operation struct {
	Done     bool `json:"done"`
	Metadata struct {
		ProgressPercent float64 `json:"progressPercent"`
	} `json:"metadata"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Response struct {
		GenerateVideoResponse struct {
			GeneratedSamples []struct {
				Video struct {
					URI string `json:"uri"`
				} `json:"video"`
			} `json:"generatedSamples"`
			RaiMediaFilteredCount   int      `json:"raiMediaFilteredCount"`
			RaiMediaFilteredReasons []string `json:"raiMediaFilteredReasons"`
		} `json:"generateVideoResponse"`
	} `json:"response"`
}

// grpcCancelled is google.rpc.Code CANCELLED.
const grpcCancelled = 1

func (p *Provider) veoStatus(ctx context.Context, d jobData) (provider.Status, error) {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, p.base+"/v1beta/"+d.Operation, nil, nil)
	if err != nil {
		return provider.Status{}, err
	}
	if err := p.http.Err(resp); err != nil {
		return provider.Status{}, err
	}
	var op operation
	if err := json.Unmarshal(resp.Body, &op); err != nil {
		return provider.Status{}, &provider.RetryableError{Err: fmt.Errorf("google: unreadable operation: %w", err)}
	}
	return veoState(op), nil
}

func veoState(op operation) provider.Status {
	if op.Error != nil {
		op.Error.Message = clip.Message(op.Error.Message)
	}
	switch {
	case !op.Done:
		st := provider.Status{State: provider.StateRunning, Message: "Veo is generating"}
		if pct := op.Metadata.ProgressPercent; pct > 0 && pct <= 100 {
			st.Progress, st.Message = pct/100, fmt.Sprintf("Veo is generating: %.0f%%", pct)
		}
		return st
	case op.Error != nil && op.Error.Code == grpcCancelled:
		return provider.Status{State: provider.StateCancelled, Message: "cancelled at Google: " + op.Error.Message}
	case op.Error != nil:
		return provider.Status{State: provider.StateFailed, Error: "Veo failed: " + orText(op.Error.Message, fmt.Sprintf("error code %d", op.Error.Code))}
	}
	gvr := op.Response.GenerateVideoResponse
	var outs []provider.Output
	for _, s := range gvr.GeneratedSamples {
		if s.Video.URI != "" {
			outs = append(outs, provider.Output{URL: s.Video.URI, MimeType: "video/mp4"})
		}
	}
	switch {
	case len(outs) > 0:
		return provider.Status{State: provider.StateCompleted, Progress: 1, Message: "completed", Outputs: outs}
	case gvr.RaiMediaFilteredCount > 0 || len(gvr.RaiMediaFilteredReasons) > 0:
		return provider.Status{State: provider.StateFailed, Error: "Google's safety filters removed the video: " + clip.Message(orText(strings.Join(gvr.RaiMediaFilteredReasons, "; "), "no reason given"))}
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

// cancelVeo asks the operation to stop. Where the API refuses (it does
// not document cancel for every model), the operation runs to its end
// and the runner's polling sees how it ended.
func (p *Provider) cancelVeo(ctx context.Context, d jobData) (provider.Status, error) {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodPost, p.base+"/v1beta/"+d.Operation+":cancel", map[string]any{}, nil)
	if err != nil {
		return provider.Status{}, err
	}
	switch {
	case resp.OK():
	case resp.Status >= 400 && resp.Status < 500 && resp.Status != http.StatusTooManyRequests:
		return provider.Status{State: provider.StateRunning, Message: "Google does not cancel this operation (" + httpx.Message(resp.Body) + "); it runs to its end"}, nil
	default:
		return provider.Status{}, p.http.Err(resp)
	}
	st, err := p.veoStatus(ctx, d)
	if err != nil {
		return provider.Status{State: provider.StateRunning, Message: "cancellation requested at Google"}, nil
	}
	if !st.State.Terminal() {
		st.Message = "cancellation requested at Google; " + st.Message
	}
	return st, nil
}
