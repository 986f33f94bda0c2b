package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"sort"
	"strings"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
	"github.com/darkroom-mcp/darkroom/provider/internal/syncjob"
)

// call makes the generation (or, with an input image, the edit) and
// spools its images as attempt n.
func (p *Provider) call(ctx context.Context, e catalog.Entry, req provider.Request, fields map[string]any, n int) (jobData, error) {
	hdr := http.Header{}
	if p.cfg.Organization != "" {
		hdr.Set("OpenAI-Organization", p.cfg.Organization)
	}
	if p.cfg.Project != "" {
		hdr.Set("OpenAI-Project", p.cfg.Project)
	}
	var body io.Reader
	var contentType, path string
	if images := editImages(req); len(images) > 0 && e.Input.InputImage != "" {
		delete(fields, e.Input.InputImage)
		pr, ctype := multipartBody(ctx, fields, e.Input.InputImage, images, req)
		defer pr.Close() // stops the writer if the call ends early
		body, contentType, path = pr, ctype, "/v1/images/edits"
	} else {
		b, err := json.Marshal(fields)
		if err != nil {
			return jobData{}, fmt.Errorf("openai: encode request: %w", err)
		}
		body, contentType, path = bytes.NewReader(b), "application/json", "/v1/images/generations"
	}
	resp, refused, err := p.http.Open(ctx, httpx.Create, http.MethodPost, p.base+path, body, contentType, hdr)
	var perm *provider.PermanentError
	if errors.As(err, &perm) {
		// The form refused an input file (a mask too large or not an
		// image): the body broke off unfinished, so OpenAI made nothing,
		// and asking again cannot help.
		return jobData{}, perm
	}
	if err != nil {
		return jobData{}, httpx.SubmitErr(err, nil)
	}
	if refused != nil {
		return jobData{}, p.refusal(refused)
	}
	defer resp.Body.Close()
	var reply io.Reader = resp.Body
	if fields["stream"] == true && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		reply = newSSEFilter(resp.Body, p.partial(req.IdempotencyKey, outputMime(fields)))
	}
	sc := syncjob.NewScanner(reply, []string{"b64_json"}, []string{"revised_prompt", "url"})
	outs, err := p.journal.Store(ctx, req.IdempotencyKey, n, sc, max(req.Count, 1))
	if errors.As(err, &perm) {
		return jobData{}, err // an image refused (too large, not an image)
	}
	if err != nil {
		// The reply broke off after OpenAI made (and billed) the images.
		return jobData{}, &provider.RetryableError{Err: fmt.Errorf("openai: read images reply: %w", err)}
	}
	if len(outs) == 0 {
		msg := "OpenAI returned no image"
		if len(sc.Small["url"]) > 0 {
			msg += " as base64 (it answered with URLs: the model or gateway ignores base64 output)"
		}
		return jobData{}, &provider.PermanentError{Message: msg}
	}
	d := jobData{Model: e.ID, Key: req.IdempotencyKey, Outputs: outs, Resubmitted: n > 1}
	if rp := sc.Small["revised_prompt"]; len(rp) > 0 {
		d.RevisedPrompt = rp[0]
	}
	return d, nil
}

// editImages are the images an edit sends: the main one first (a mask
// applies to the first), then the references. None means a generation.
func editImages(req provider.Request) []*provider.Input {
	var out []*provider.Input
	if req.InputImage != nil {
		out = append(out, req.InputImage)
	}
	for i := range req.Extra {
		if req.Extra[i].Role == provider.RoleReference {
			out = append(out, &req.Extra[i])
		}
	}
	return out
}

// multipartBody streams an edit's form: the fields, the images and the
// mask (an Extra input with role "mask"), read from darkroom's store as
// the request goes out, never held whole.
func multipartBody(ctx context.Context, fields map[string]any, imageField string, images []*provider.Input, req provider.Request) (*io.PipeReader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeForm(ctx, mw, fields, imageField, images, req))
	}()
	return pr, mw.FormDataContentType()
}

func writeForm(ctx context.Context, mw *multipart.Writer, fields map[string]any, imageField string, images []*provider.Input, req provider.Request) error {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := mw.WriteField(k, fmt.Sprint(fields[k])); err != nil {
			return err
		}
	}
	if len(images) > 1 {
		imageField += "[]" // an array, as openai-go's apiform names it
	}
	for i, im := range images {
		if err := writeFile(ctx, mw, imageField, fmt.Sprint("image-", i+1), im); err != nil {
			return err
		}
	}
	for i := range req.Extra {
		if req.Extra[i].Role == provider.RoleMask {
			mask := req.Extra[i]
			mask.MimeType = "image/png" // as writeMask writes it
			if err := writeFile(ctx, mw, "mask", "mask", &mask); err != nil {
				return err
			}
		}
	}
	return mw.Close()
}

func writeFile(ctx context.Context, mw *multipart.Writer, field, name string, in *provider.Input) error {
	if in.Open == nil {
		return errors.New("openai: an input file cannot be read")
	}
	mime := in.MimeType
	if mime == "" {
		mime = "image/png"
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, field, name+ext(mime)))
	h.Set("Content-Type", mime)
	w, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if field == "mask" {
		return writeMask(ctx, w, in)
	}
	rc, err := in.Open(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(w, rc)
	return err
}

func ext(mime string) string {
	switch mime {
	case "image/jpeg":
		return ".jpg"
	case "image/webp":
		return ".webp"
	}
	return ".png"
}

// refusal maps OpenAI's error replies (see the package comment). OpenAI
// answered, so no image was made: what may be retried wraps
// ErrNotCreated.
func (p *Provider) refusal(r *httpx.Response) error {
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &body)
	code := fmt.Sprint(body.Error.Code)
	msg := clip.Message(body.Error.Message)
	switch {
	case code == "insufficient_quota" || body.Error.Type == "insufficient_quota":
		return &provider.PermanentError{Message: "OpenAI refused: the account's quota or spend limit is used up (insufficient_quota); add credits or raise the limit, retrying will not help: " + msg}
	case code == "moderation_blocked" || code == "content_policy_violation":
		return &provider.PermanentError{Message: "OpenAI's safety system refused the request: " + msg}
	}
	err := p.http.Err(r)
	var re *provider.RetryableError
	if errors.As(err, &re) {
		return &provider.RetryableError{Err: fmt.Errorf("%w: %w", provider.ErrNotCreated, re.Err), After: re.After}
	}
	if errors.Is(err, provider.ErrNotFound) {
		return &provider.PermanentError{Message: "OpenAI does not offer this endpoint or model: " + httpx.Message(r.Body)}
	}
	return err
}
