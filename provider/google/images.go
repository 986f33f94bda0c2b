package google

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
	"github.com/darkroom-mcp/darkroom/provider/internal/syncjob"
)

// generate makes a synchronous generateContent call and spools its
// images, as many as req asked for, as attempt n of req's generation.
func (p *Provider) generate(ctx context.Context, e catalog.Entry, body map[string]any, req provider.Request, n int) ([]provider.Output, error) {
	const method = "generateContent"
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("google: encode request: %w", err)
	}
	resp, refused, err := p.call.Open(ctx, httpx.Create, http.MethodPost, p.base+"/v1beta/models/"+e.Endpoint+":"+method, bytes.NewReader(b), "application/json", nil)
	if err != nil {
		return nil, httpx.SubmitErr(err, nil)
	}
	if refused != nil {
		return nil, p.replyErr(e, refused)
	}
	defer resp.Body.Close()
	sc := syncjob.NewScanner(resp.Body, []string{"data"}, []string{"blockReason", "finishReason", "finishMessage", "text"})
	outs, err := p.journal.Store(ctx, req.IdempotencyKey, n, sc, max(req.Count, 1))
	var perm *provider.PermanentError
	if errors.As(err, &perm) {
		return nil, err // an image refused (too large, not an image)
	}
	if err != nil {
		// The reply broke off: the images were made (and billed), so
		// the outcome is unknown, not refused.
		return nil, &provider.RetryableError{Err: fmt.Errorf("google: read %s reply: %w", method, err)}
	}
	if len(outs) == 0 {
		return nil, &provider.PermanentError{Message: clip.Message(refusal(e, sc.Small))}
	}
	return outs, nil
}

// refusal says in plain words why a reply carried no image.
func refusal(e catalog.Entry, small map[string][]string) string {
	if r := small["blockReason"]; len(r) > 0 {
		return "Google blocked the prompt (" + r[0] + ")"
	}
	for _, r := range small["finishReason"] {
		if r != "STOP" {
			msg := "Google returned no image (finish reason " + r + ")"
			if m := small["finishMessage"]; len(m) > 0 {
				msg += ": " + m[0]
			}
			return msg
		}
	}
	if t := small["text"]; len(t) > 0 {
		return fmt.Sprintf("%s answered with text and no image: %q", e.Endpoint, t[0])
	}
	return fmt.Sprintf("%s returned no image (likely filtered by its safety settings)", e.Endpoint)
}
