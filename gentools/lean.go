package gentools

import (
	"context"

	"github.com/darkroom-mcp/darkroom/server/edge"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readGeneration is getGeneration for the lean path: the answer for a
// generation without outputs depends on its view alone, so it is keyed
// by the view (the dispatcher keeps its encoding, and renders it only on a
// change).
func (t *Tools) readGeneration(ctx context.Context, req *mcp.CallToolRequest) (edge.Reply, error) {
	g, res, err := t.generationOf(ctx, req, &idArgs{})
	if g == nil {
		return edge.Reply{Result: res}, err
	}
	if (len(g.Outputs) > 0 && !g.OutputsExpired) || len(g.InputFiles()) > 0 {
		// Fresh links (and their validity in the text) per read.
		res, err := Result(ctx, t.svc, g, nil)
		return edge.Reply{Result: res}, err
	}
	// Without outputs there is nothing to sign and no preview: the result
	// is viewResult of the view, which Result would build as well.
	v, err := View(ctx, t.svc, g)
	if err != nil {
		return edge.Reply{}, err
	}
	return edge.Reply{ID: g.ID, Key: keyOf(v), Render: func() *mcp.CallToolResult { return viewResult(v) }}, nil
}

// viewKey is everything of a view without outputs that its result shows
// (TestViewKeyCoversTheView keeps it complete).
type viewKey struct {
	id, model, kind, status, message, created, updated, provider, awaits string
	progress                                                             float64
	credits                                                              int64
	hasError                                                             bool
	err                                                                  ErrorView
	expired, upload, cancel                                              bool
	timedOut                                                             int8 // 0 nil, 1 false, 2 true
	hasLive                                                              bool
	live                                                                 livePreview
}

func keyOf(v *GenerationView) viewKey {
	k := viewKey{
		id: v.GenerationID, model: v.ModelID, kind: v.Kind, status: v.Status, message: v.StatusMessage,
		created: v.CreatedAt, updated: v.UpdatedAt, provider: v.provider, awaits: v.awaits,
		progress: v.Progress, credits: v.Credits,
		expired: v.OutputsExpired, upload: v.UploadRequired, cancel: v.CancelRequested,
	}
	if v.Error != nil {
		k.hasError, k.err = true, *v.Error
	}
	if v.live != nil {
		k.hasLive, k.live = true, *v.live
	}
	if v.TimedOut != nil {
		k.timedOut = 1
		if *v.TimedOut {
			k.timedOut = 2
		}
	}
	return k
}
