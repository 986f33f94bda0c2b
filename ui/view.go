package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentask"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/server/edge"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config wires the view tool.
type Config struct {
	Service *generation.Service
	Blobs   blob.Store
	// Owner names the caller (the authenticated principal).
	Owner func(ctx context.Context, req *mcp.CallToolRequest) string
	// PollInterval raises a generation's base poll interval for the
	// caller, as for its task (server.PollInterval); nil keeps the base.
	PollInterval func(ctx context.Context, owner string, base time.Duration) time.Duration
	// MaxBytes caps an output the view receives inline (default 32 MiB);
	// above it the view offers the signed link.
	MaxBytes int64
	// Bytes is the process-wide budget of output bytes in flight (nil:
	// unbounded).
	Bytes *outbytes.Budget
}

// DefaultMaxBytes caps an output returned to the view.
const DefaultMaxBytes = 32 << 20

type viewer struct{ cfg Config }

type viewArgs struct {
	GenerationID string `json:"generationId"`
	// Output, when set, asks for that output's bytes as well.
	Output *int `json:"output,omitempty"`
}

// viewState is what the view renders besides the generation itself.
type viewState struct {
	*gentools.GenerationView
	Prompt         string `json:"prompt"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
	// LivePreviewFrames counts a running generation's preview frames
	// (0: none); the latest is the result's image block, so the JSON stays
	// small.
	LivePreviewFrames int64 `json:"livePreviewFrames,omitempty"`
}

func viewToolDef() *mcp.Tool {
	return &mcp.Tool{
		Name:        ViewTool,
		Title:       "View generation",
		Description: "For the darkroom viewer only: a generation as the viewer shows it (status, progress, prompt, outputs, poll interval), and with output the bytes of that output.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["generationId"],"properties":{` +
			`"generationId":{"type":"string","maxLength":128},"output":{"type":"integer","minimum":0,"maximum":63}}}`),
		Annotations: &mcp.ToolAnnotations{Title: "View generation", ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: new(bool), OpenWorldHint: new(bool)},
		Meta:        mcp.Meta{"ui": map[string]any{"resourceUri": ResourceURI, "visibility": []any{"app"}}},
	}
}

func errResult(format string, a ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, a...)}}}
}

func (v *viewer) handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a viewArgs
	if bad := gentools.DecodeArgs(req, &a); bad != nil {
		return bad, nil
	}
	if a.GenerationID == "" || len(a.GenerationID) > 128 {
		return errResult("generationId is required (at most 128 characters)"), nil
	}
	owner := v.cfg.Owner(ctx, req)
	g, err := v.cfg.Service.Get(ctx, owner, a.GenerationID)
	if errors.Is(err, generation.ErrNotFound) {
		// A foreign id reads exactly as an unknown one.
		return errResult("no generation with id %q", a.GenerationID), nil
	}
	if err != nil {
		return nil, err
	}
	gv, err := gentools.View(ctx, v.cfg.Service, g)
	if err != nil {
		return nil, err
	}
	// The generation's poll interval, as its task would carry it.
	poll := time.Second
	if m, ok := v.cfg.Service.Model(g.ModelID); ok {
		poll = gentask.BasePoll(m)
	}
	if v.cfg.PollInterval != nil {
		poll = v.cfg.PollInterval(ctx, owner, poll)
	}
	st := viewState{GenerationView: gv, Prompt: g.Prompt, PollIntervalMs: poll.Milliseconds()}
	live, frames, hasLive := gv.LivePreview()
	st.LivePreviewFrames = frames
	js, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	res := &mcp.CallToolResult{
		StructuredContent: json.RawMessage(js),
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Generation %s: %s", g.ID, g.Status)}},
	}
	if hasLive { // the picture forming, until the output replaces it
		res.Content = append(res.Content, &mcp.ImageContent{Data: live, MIMEType: preview.MimeType})
	}
	if a.Output == nil {
		return res, nil
	}
	n := *a.Output
	if g.Status != generation.StatusCompleted || g.OutputsExpired || n < 0 || n >= len(g.Outputs) {
		return errResult("generation %s has no output %d", g.ID, n), nil
	}
	c, bad, err := v.bytes(ctx, g, n)
	if err != nil || bad != nil {
		return bad, err
	}
	res.Content = append(res.Content, c)
	return res, nil
}

// bytes reads output n, within the cap, as an embedded resource.
func (v *viewer) bytes(ctx context.Context, g *generation.Generation, n int) (mcp.Content, *mcp.CallToolResult, error) {
	o := g.Outputs[n]
	maxBytes := v.cfg.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if o.Bytes > maxBytes {
		return nil, errResult("output %d is %d bytes, above the viewer's %d-byte limit: open its signed link instead", n, o.Bytes, maxBytes), nil
	}
	src := outbytes.Source{Size: o.Bytes, SHA256: o.SHA256, Open: func(ctx context.Context) (io.ReadCloser, error) {
		rc, _, err := v.cfg.Blobs.Open(ctx, o.Key)
		return rc, err
	}}
	b, err := outbytes.Blob(ctx, v.cfg.Bytes, v.cfg.Owner(ctx, nil), src)
	var refused *outbytes.Refused
	switch {
	case errors.As(err, &refused):
		return nil, nil, ratelimited.RPCError(refused.RetryAfter)
	case errors.Is(err, outbytes.ErrMismatch):
		return nil, nil, fmt.Errorf("output %d of %s: %w", n, g.ID, err)
	case err != nil:
		return nil, nil, fmt.Errorf("read output: %w", err)
	}
	return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI:      fmt.Sprintf("darkroom://generations/%s/outputs/%d", g.ID, n),
		MIMEType: o.MimeType,
		Blob:     b,
	}}, nil, nil
}

// Tool is the view tool's row of the tool table: app-only (its _meta's
// visibility), a poll, and served below go-sdk with its blob streamed
// (Read) for a client that declared the view (Lean); go-sdk's middleware
// hides it from the others.
func Tool(cfg Config) gentools.Tool {
	v := &viewer{cfg: cfg}
	return gentools.Tool{Def: viewToolDef(), Handler: v.handle, Class: gentools.ClassPoll, Read: v.read, Bytes: true,
		Lean: func(req *mcp.CallToolRequest) bool { return Declared(req) }}
}

func (v *viewer) read(ctx context.Context, req *mcp.CallToolRequest) (edge.Reply, error) {
	res, err := v.handle(ctx, req)
	return edge.Reply{Result: res}, err
}
