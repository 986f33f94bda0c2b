package gentools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// InputArg is one entry of generate's inputs: a file by role, given as the
// darkroom:// URI of one of the caller's outputs, as an image, or by role
// alone (upload_input brings it; the generation waits reserved).
type InputArg struct {
	Role  string    `json:"role"`
	URI   string    `json:"uri"`
	Image *ImageArg `json:"image"`
}

// roleInputs turns generate's inputs into the request's, resolving each
// output URI to the caller's own output: someone else's, or one that does
// not exist, is refused in the same words.
func (t *Tools) roleInputs(ctx context.Context, owner string, args []InputArg) ([]generation.RoleInput, *mcp.CallToolResult, error) {
	if len(args) > generation.MaxInputs {
		return nil, toolError("inputs has %d entries; the limit is %d", len(args), generation.MaxInputs), nil
	}
	out := make([]generation.RoleInput, 0, len(args))
	for i, a := range args {
		field := fmt.Sprintf("inputs[%d]", i)
		in := generation.RoleInput{Role: a.Role}
		switch {
		case a.Role == "":
			return nil, toolError("%s.role is required", field), nil
		case a.URI != "" && a.Image != nil:
			return nil, toolError("%s: give either uri or image, not both", field), nil
		case a.URI != "":
			f, bad, err := t.outputFile(ctx, owner, a.URI, field)
			if f == nil {
				return nil, bad, err
			}
			in.Output = f
		case a.Image != nil:
			img, bad := t.image(ctx, a.Image, field+".image")
			if bad != nil {
				return nil, bad, nil
			}
			in.Image = img
		}
		out = append(out, in)
	}
	return out, nil, nil
}

// outputFile is the output a darkroom:// URI names, when it is the
// caller's, completed and still kept.
func (t *Tools) outputFile(ctx context.Context, owner, uri, field string) (*generation.InputFile, *mcp.CallToolResult, error) {
	unknown := toolError("%s.uri %q names no output of yours: use the darkroom://generations/{generationId}/outputs/{index} URI of a resource_link from your own generation", field, uri)
	id, i, ok := parseOutputURI(uri)
	if !ok {
		return nil, unknown, nil
	}
	g, err := t.svc.Get(ctx, owner, id)
	if errors.Is(err, generation.ErrNotFound) {
		return nil, unknown, nil
	}
	if err != nil {
		return nil, nil, err
	}
	// From here the caller owns the generation: the messages may say more.
	switch {
	case g.Status != generation.StatusCompleted:
		return nil, toolError("%s.uri: generation %s is %s; only a completed generation's outputs can be inputs (use wait_generation)", field, id, g.Status), nil
	case g.OutputsExpired:
		return nil, toolError("%s.uri: the outputs of generation %s were deleted after the %s retention period", field, id, t.svc.Retention()), nil
	case i >= len(g.Outputs):
		return nil, toolError("%s.uri: generation %s has %s, numbered from 0", field, id, words.Count(len(g.Outputs), "output")), nil
	case !strings.HasPrefix(g.Outputs[i].MimeType, "image/"):
		return nil, toolError("%s.uri: output %d of generation %s is a %s, not an image", field, i, id, g.Outputs[i].MimeType), nil
	}
	o := g.Outputs[i]
	return &generation.InputFile{StoredBlob: o.StoredBlob, Width: o.Width, Height: o.Height, From: uri}, nil, nil
}
