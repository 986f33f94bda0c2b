package gentools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// GenerationView is a generation as the tools return it.
type GenerationView struct {
	GenerationID  string       `json:"generationId"`
	ModelID       string       `json:"modelId"`
	Kind          string       `json:"kind"`
	Status        string       `json:"status"`
	StatusMessage string       `json:"statusMessage"`
	Progress      float64      `json:"progress"`
	CreatedAt     string       `json:"createdAt"`
	UpdatedAt     string       `json:"updatedAt"`
	Outputs       []OutputView `json:"outputs"`
	// Inputs are the input files it was given, by role (none: omitted).
	Inputs          []InputView `json:"inputs,omitempty"`
	Error           *ErrorView  `json:"error,omitempty"`
	Credits         int64       `json:"credits"`
	OutputsExpired  bool        `json:"outputsExpired,omitempty"`
	UploadRequired  bool        `json:"uploadRequired,omitempty"`
	CancelRequested bool        `json:"cancelRequested,omitempty"`
	TimedOut        *bool       `json:"timedOut,omitempty"`
	// provider names where it runs, and awaits the roles an upload must
	// bring, in the text line only.
	provider string
	awaits   string
	// live is a running generation's latest preview frame (nil: none),
	// shown as an image after the text; never in the JSON.
	live *livePreview
}

// livePreview is a running generation's latest preview frame and how many
// frames came (generation.Service.LivePreview).
type livePreview struct {
	Frames int64
	JPEG   string
}

// LivePreview is the running generation's latest preview frame that the
// view carries (ok false: none, or previews are off), and how many frames
// came.
func (v *GenerationView) LivePreview() (jpeg []byte, frames int64, ok bool) {
	if v.live == nil {
		return nil, 0, false
	}
	return []byte(v.live.JPEG), v.live.Frames, true
}

// OutputView is one stored output with a freshly minted link.
type OutputView struct {
	URL             string  `json:"url"`
	ExpiresAt       string  `json:"expiresAt"`
	MimeType        string  `json:"mimeType"`
	Bytes           int64   `json:"bytes"`
	SHA256          string  `json:"sha256"`
	Width           int     `json:"width,omitempty"`
	Height          int     `json:"height,omitempty"`
	DurationSeconds float64 `json:"durationSeconds,omitempty"`
	// preview is the inline preview's JPEG, shown after the resource_link
	// (nil: none, or previews are off); never in the JSON.
	preview []byte
}

// InputView is one input file with a freshly minted link. URI reads it
// (resources/read); From names the earlier output it is, when it is one.
type InputView struct {
	Role      string `json:"role"`
	URI       string `json:"uri"`
	From      string `json:"from,omitempty"`
	URL       string `json:"url"`
	ExpiresAt string `json:"expiresAt"`
	MimeType  string `json:"mimeType"`
	Width     int    `json:"width,omitempty"`
	Height    int    `json:"height,omitempty"`
}

// ErrorView explains a failed generation.
type ErrorView struct {
	Kind    string `json:"kind"` // provider | internal
	Message string `json:"message"`
}

func isoTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// View renders g, minting a signed link per output.
func View(ctx context.Context, svc *generation.Service, g *generation.Generation) (*GenerationView, error) {
	v := &GenerationView{
		GenerationID:    g.ID,
		ModelID:         g.ModelID,
		Kind:            string(g.Kind),
		Status:          string(g.Status),
		StatusMessage:   g.StatusMessage,
		Progress:        g.Progress,
		CreatedAt:       isoTime(g.CreatedAt),
		UpdatedAt:       isoTime(g.UpdatedAt),
		Outputs:         []OutputView{},
		Credits:         g.Credits,
		UploadRequired:  g.UploadRequired(),
		CancelRequested: g.CancelRequested && !g.Status.Terminal(),
		provider:        g.Provider,
	}
	if roles := g.AwaitedRoles(); len(roles) > 0 {
		v.awaits = UploadRoles(roles)
	}
	if g.Status == generation.StatusFailed {
		v.Error = &ErrorView{Kind: string(g.ErrorKind), Message: g.ErrorMessage}
	}
	if svc.InlinePreviews() {
		if b, n, ok := svc.LivePreview(ctx, g); ok {
			v.live = &livePreview{Frames: int64(n), JPEG: string(b)}
		}
	}
	for i, f := range g.InputFiles() {
		url, exp, err := svc.Link(ctx, f.StoredBlob)
		if err != nil {
			return nil, fmt.Errorf("sign input link: %w", err)
		}
		v.Inputs = append(v.Inputs, InputView{Role: f.Role, URI: InputURI(g.ID, i), From: f.From, URL: url, ExpiresAt: isoTime(exp),
			MimeType: f.MimeType, Width: f.Width, Height: f.Height})
	}
	if g.OutputsExpired {
		v.OutputsExpired = true
		v.StatusMessage = fmt.Sprintf("completed; the outputs were kept for %s and have been deleted", svc.Retention())
		return v, nil
	}
	for _, o := range g.Outputs {
		url, exp, err := svc.Link(ctx, o.StoredBlob)
		if err != nil {
			return nil, fmt.Errorf("sign output link: %w", err)
		}
		v.Outputs = append(v.Outputs, OutputView{
			URL: url, ExpiresAt: isoTime(exp), MimeType: o.MimeType, Bytes: o.Bytes, SHA256: o.SHA256,
			Width: o.Width, Height: o.Height, DurationSeconds: o.DurationSeconds,
		})
	}
	return v, nil
}

// Result builds the tool result for a generation: structured content, a
// one-line text for a person, the JSON as a second text block (the spec:
// a tool with an outputSchema SHOULD also serialize it as text), and a
// resource link per output. A generation that failed because of the
// provider is a tool error (isError), so the model can change its
// request. A task's result is exactly what generate with wait:true
// returns.
func Result(ctx context.Context, svc *generation.Service, g *generation.Generation, timedOut *bool) (*mcp.CallToolResult, error) {
	v, err := View(ctx, svc, g)
	if err != nil {
		return nil, err
	}
	v.TimedOut = timedOut
	if svc.InlinePreviews() && !g.OutputsExpired {
		for i, o := range g.Outputs {
			if o.Preview == nil {
				continue
			}
			// A preview that cannot be read is left out: it only decorates.
			if b, err := svc.Preview(ctx, o.Preview); err == nil {
				v.Outputs[i].preview = b
			}
		}
	}
	return viewResult(v), nil
}

func viewResult(v *GenerationView) *mcp.CallToolResult {
	js, _ := json.Marshal(v)
	res := &mcp.CallToolResult{
		StructuredContent: json.RawMessage(js),
		Content:           []mcp.Content{&mcp.TextContent{Text: v.summary(time.Now())}, &mcp.TextContent{Text: string(js)}},
		IsError:           v.Status == "failed",
	}
	if v.live != nil {
		res.Content = append(res.Content, &mcp.ImageContent{Data: []byte(v.live.JPEG), MIMEType: preview.MimeType})
	}
	for i, o := range v.Outputs {
		size := o.Bytes
		res.Content = append(res.Content, &mcp.ResourceLink{
			URI:      OutputURI(v.GenerationID, i), // resources/read; the signed link is o.URL
			Name:     fmt.Sprintf("%s-%d", v.GenerationID, i),
			Title:    fmt.Sprintf("Output %d of generation %s", i, v.GenerationID),
			MIMEType: o.MimeType,
			Size:     &size,
		})
		if o.preview != nil {
			res.Content = append(res.Content, &mcp.ImageContent{Data: o.preview, MIMEType: preview.MimeType})
		}
	}
	return res
}

// structured builds a non-generation result from any JSON object: the
// line, then the JSON, each its own text block.
func structured(text string, v any) *mcp.CallToolResult {
	js, _ := json.Marshal(v)
	return &mcp.CallToolResult{
		StructuredContent: json.RawMessage(js),
		Content:           []mcp.Content{&mcp.TextContent{Text: oneLine(text)}, &mcp.TextContent{Text: string(js)}},
	}
}

// toolError is an isError result: the message says what to fix.
func toolError(format string, a ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, a...)}},
	}
}
