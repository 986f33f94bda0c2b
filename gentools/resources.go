package gentools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Outputs and inputs as MCP resources: output n of generation G is
// darkroom://generations/G/outputs/n, its input n (in the order the
// view's inputs list them) darkroom://generations/G/inputs/n, n from 0,
// readable by its owner.
const (
	OutputURITemplate = "darkroom://generations/{generationId}/outputs/{index}"
	InputURITemplate  = "darkroom://generations/{generationId}/inputs/{index}"
	// PreviewURITemplate is a running generation's latest preview frame
	// (generation.Service.LivePreview): what a Tasks client, whose
	// working task carries nothing but its status message, reads.
	PreviewURITemplate = "darkroom://generations/{generationId}/preview"
	outputURIPrefix    = "darkroom://generations/"
	// DefaultMaxResourceBytes caps what resources/read returns inline
	// (base64 makes it a third larger on the wire).
	DefaultMaxResourceBytes = 32 << 20
	// resourceTTLMs is how long a client may cache a read: an output's
	// bytes never change while it exists.
	resourceTTLMs = 3600_000
)

// OutputURI names output index of generation id.
func OutputURI(id string, index int) string {
	return outputURIPrefix + id + "/outputs/" + strconv.Itoa(index)
}

// InputURI names input index of generation id.
func InputURI(id string, index int) string {
	return outputURIPrefix + id + "/inputs/" + strconv.Itoa(index)
}

// PreviewURI names the live preview frame of generation id.
func PreviewURI(id string) string { return outputURIPrefix + id + "/preview" }

// parseOutputURI is OutputURI's inverse; ok is false for anything else
// (extra parts, a query, a non-canonical index).
func parseOutputURI(uri string) (id string, index int, ok bool) {
	id, kind, index, ok := parseFileURI(uri)
	return id, index, ok && kind == "outputs"
}

// parseFileURI is OutputURI's, InputURI's and PreviewURI's inverse: kind
// is "outputs", "inputs" or "preview" (index 0).
func parseFileURI(uri string) (id, kind string, index int, ok bool) {
	rest, found := strings.CutPrefix(uri, outputURIPrefix)
	parts := strings.Split(rest, "/")
	if !found || !validID(parts[0]) {
		return "", "", 0, false
	}
	if len(parts) == 2 && parts[1] == "preview" {
		return parts[0], "preview", 0, true
	}
	if len(parts) != 3 || (parts[1] != "outputs" && parts[1] != "inputs") {
		return "", "", 0, false
	}
	n := parts[2]
	if n == "" || len(n) > 4 || (len(n) > 1 && n[0] == '0') || strings.Trim(n, "0123456789") != "" {
		return "", "", 0, false
	}
	index, _ = strconv.Atoi(n)
	return parts[0], parts[1], index, true
}

func validID(id string) bool {
	if id == "" || len(id) > maxIDChars {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// resourceError is a resources/read refusal; its code depends on the
// protocol revision of the request (see rpc).
type resourceError struct {
	notFound bool // else: too large
	msg      string
	data     map[string]any
}

func (e *resourceError) Error() string { return e.msg }

// rpc is the error on the wire: "not found" is -32602 from 2026-07-28 on
// and -32002 before it, as each revision says; too large is -32602.
func (e *resourceError) rpc(legacy bool) *jsonrpc.Error {
	code := int64(jsonrpc.CodeInvalidParams)
	if e.notFound && legacy {
		code = -32002
	}
	data, _ := json.Marshal(e.data)
	return &jsonrpc.Error{Code: code, Message: e.msg, Data: data}
}

// notFound is the one answer for a URI that is malformed, names no
// generation, or names another caller's: it depends on the URI only.
func notFound(uri string) *resourceError {
	return &resourceError{notFound: true, msg: "Resource not found: " + uri +
		" (use the darkroom://generations/{generationId}/outputs/{index} URI of a resource_link from your own generation)",
		data: map[string]any{"uri": uri}}
}

// legacy reports a request on a revision before 2026-07-28 (tasks.Version),
// where "resource not found" is -32002 rather than -32602.
func legacy(req mcp.Request) bool { return tasks.Version(req) < tasks.TasksVersion }

// RegisterResources adds the output resource template to s, and the
// middleware that gives resources/read its per-revision error codes.
// The server must declare the resources capability.
func (t *Tools) RegisterResources(s *mcp.Server) {
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: OutputURITemplate,
		Name:        "generation-output",
		Title:       "Generation output",
		Description: "One output file of your completed generation, by generationId and index (from 0), as each output's resource_link names it. " +
			fmt.Sprintf("Readable by its owner while it is kept; above %d bytes use the signed link (download_output) instead.", t.cfg.MaxReadBytes),
	}, t.readResource)
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: InputURITemplate,
		Name:        "generation-input",
		Title:       "Generation input",
		Description: "One input file of your generation (an image it edits, its mask, a reference, a frame), by generationId and index (from 0), in the order get_generation's inputs list them.",
	}, t.readResource)
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: PreviewURITemplate,
		Name:        "generation-preview",
		Title:       "Generation live preview",
		MIMEType:    preview.MimeType,
		Description: "The latest preview frame of your generation while its provider makes it (a small JPEG, replaced as the provider sends new ones, at most once a second), " +
			"as a working task's statusMessage names it. Not an output; not found once the generation has ended, or before a first frame.",
	}, t.readResource)
	s.AddReceivingMiddleware(resourceErrors)
}

// resourceErrors turns resources/read refusals into JSON-RPC errors, go-sdk's
// own "not found" for a URI no template matches included, so every URI
// that is not the caller's reads alike.
func resourceErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		rr, ok := res.(*mcp.ReadResourceResult)
		if method != "resources/read" || (!ok && err == nil) {
			return res, err
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams && je.Message == "Resource not found" {
			uri := ""
			if p, ok := req.GetParams().(*mcp.ReadResourceParams); ok && p != nil {
				uri = p.URI
			}
			err = notFound(uri)
		}
		return readAnswer(req, rr, err)
	}
}

func (t *Tools) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, kind, i, ok := parseFileURI(uri)
	if !ok {
		return nil, notFound(uri)
	}
	g, err := t.svc.Get(ctx, t.cfg.Owner(ctx, nil), id)
	if errors.Is(err, generation.ErrNotFound) {
		return nil, notFound(uri)
	}
	if err != nil {
		return nil, err
	}
	// From here the caller owns the generation: the messages may say more.
	switch kind {
	case "preview": // the live frame: never cached, it is replaced as frames come
		b, _, ok := t.svc.LivePreview(ctx, g)
		if !ok {
			return nil, &resourceError{notFound: true, data: map[string]any{"uri": uri, "status": g.Status},
				msg: fmt.Sprintf("Resource not found: generation %s is %s and has no live preview (its provider sends frames while it makes it; once it ends, read its outputs)", id, g.Status)}
		}
		return &mcp.ReadResourceResult{
			Cacheable: mcp.Cacheable{CacheScope: "private"}, // ttlMs 0: stale at once
			Contents:  []*mcp.ResourceContents{{URI: uri, MIMEType: preview.MimeType, Blob: b}},
		}, nil
	case "inputs":
		files := g.InputFiles()
		if i >= len(files) {
			return nil, &resourceError{notFound: true, data: map[string]any{"uri": uri, "inputs": len(files)},
				msg: fmt.Sprintf("Resource not found: generation %s has %d input(s), numbered from 0", id, len(files))}
		}
		return t.readBlob(ctx, uri, fmt.Sprintf("input %d of generation %s", i, id), "inputs", i, files[i].StoredBlob, nil)
	}
	gone := &resourceError{notFound: true, data: map[string]any{"uri": uri},
		msg: fmt.Sprintf("Resource gone: the outputs of generation %s were deleted after the %s retention period; generate again if you need them", id, t.svc.Retention())}
	switch {
	case g.Status != generation.StatusCompleted:
		return nil, &resourceError{notFound: true, data: map[string]any{"uri": uri, "status": g.Status},
			msg: fmt.Sprintf("Resource not found: generation %s is %s, and only a completed generation has outputs (use wait_generation)", id, g.Status)}
	case g.OutputsExpired:
		return nil, gone
	case i >= len(g.Outputs):
		return nil, &resourceError{notFound: true, data: map[string]any{"uri": uri, "outputs": len(g.Outputs)},
			msg: fmt.Sprintf("Resource not found: generation %s has %s, numbered from 0", id, words.Count(len(g.Outputs), "output"))}
	}
	return t.readBlob(ctx, uri, fmt.Sprintf("output %d of generation %s", i, id), "outputs", i, g.Outputs[i].StoredBlob, gone)
}

// readBlob answers resources/read with one stored file (what names it
// in errors; list and i where its view lists it; gone, when set, is the
// answer for a file deleted meanwhile).
func (t *Tools) readBlob(ctx context.Context, uri, what, list string, i int, o generation.StoredBlob, gone *resourceError) (*mcp.ReadResourceResult, error) {
	if o.Bytes > t.cfg.MaxReadBytes {
		data := map[string]any{"uri": uri, "bytes": o.Bytes, "maxBytes": t.cfg.MaxReadBytes}
		if url, exp, err := t.svc.Link(ctx, o); err == nil {
			data["url"], data["expiresAt"] = url, isoTime(exp)
		}
		hint := "download_output"
		if list == "inputs" {
			hint = "get_generation"
		}
		return nil, &resourceError{data: data, msg: fmt.Sprintf(
			"Resource too large to read inline: %s is %d bytes, above this server's %d-byte resources/read limit; "+
				"fetch it from its signed link instead (error data url, structuredContent.%s[%d].url, or %s)",
			what, o.Bytes, t.cfg.MaxReadBytes, list, i, hint)}
	}
	src := outbytes.Source{Size: o.Bytes, SHA256: o.SHA256, Open: func(ctx context.Context) (io.ReadCloser, error) {
		return t.svc.OpenOutput(ctx, o)
	}}
	b, err := outbytes.Blob(ctx, t.cfg.Bytes, t.cfg.Owner(ctx, nil), src)
	var refused *outbytes.Refused
	switch {
	case errors.Is(err, generation.ErrOutputGone):
		if gone == nil {
			gone = &resourceError{notFound: true, data: map[string]any{"uri": uri}, msg: fmt.Sprintf("Resource gone: %s has been deleted", what)}
		}
		return nil, gone
	case errors.As(err, &refused):
		return nil, ratelimited.RPCError(refused.RetryAfter)
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return &mcp.ReadResourceResult{
		Cacheable: mcp.Cacheable{TTLMs: resourceTTLMs, CacheScope: "private"},
		Contents:  []*mcp.ResourceContents{{URI: uri, MIMEType: o.MimeType, Blob: b}},
	}, nil
}

// ReadResource is resources/read of an output for a path that serves it
// below go-sdk (tasks.Dispatcher.ServeResource): the same answer, the
// result with the 2026-07-28 cache hints for that era only. It reads
// nothing when ctx defers its blob (outbytes.WithDeferral).
func (t *Tools) ReadResource(ctx context.Context, req *mcp.ReadResourceRequest) (mcp.Result, error) {
	res, err := t.readResource(ctx, req)
	return readAnswer(req, res, err)
}

// LeanResource reports the URIs ReadResource answers as go-sdk's path
// would: darkroom's own scheme (a URI of it that no template matches is
// not found there, and by readResource alike). Any other (the viewer's
// ui://) is go-sdk's.
func LeanResource(uri string) bool { return strings.HasPrefix(uri, "darkroom://") }

// readAnswer is resources/read's answer on either path: a refusal with
// the request's revision's code; a read without the 2026-07-28 cache hints
// (ttlMs, cacheScope) for a pre-2026 client: they are no part of the
// older schemas.
func readAnswer(req mcp.Request, res *mcp.ReadResourceResult, err error) (mcp.Result, error) {
	var re *resourceError
	switch {
	case errors.As(err, &re):
		return nil, re.rpc(legacy(req))
	case err != nil:
		return nil, err
	case legacy(req):
		return legacyRead{res}, nil
	}
	return res, nil
}

// legacyRead is a read result as the pre-2026 schemas have it. It keeps
// the result's methods, which go-sdk's multi round-trip middleware asks
// for.
type legacyRead struct{ *mcp.ReadResourceResult }

func (r legacyRead) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Meta         mcp.Meta                `json:"_meta,omitempty"`
		Contents     []*mcp.ResourceContents `json:"contents"`
		RequestState string                  `json:"requestState,omitempty"`
	}{r.Meta, r.Contents, r.RequestState})
}
