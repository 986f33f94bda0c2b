package edge

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"unsafe"

	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeTool lets the engine run the named tool's handler itself, below
// go-sdk, for a tools/call that declared the Tasks extension and for
// which lean (nil: every call) says so from the request's parsed
// arguments: durable creation is a hot path, and go-sdk's generic
// tools/call costs about a millisecond of CPU per call, several times the
// creation itself.
//
// Once Route chose it the engine answers every outcome itself,
// exactly as go-sdk's path would: the task the handler created
// (tasks.ToolOutcome.Task), its result, its error (sdkError), its panic. A request
// the engine is not sure go-sdk would accept as it stands (other
// versions, odd headers, MRTR retries) goes to go-sdk untouched, before
// anything runs. The tool must not declare x-mcp-header parameters, and h
// must not modify req.Params.Meta (requests with the same _meta share
// it).
func (en *Engine) ServeTool(name string, h tasks.ToolHandler, lean func(*mcp.CallToolRequest) bool) {
	en.tools[name] = leanTool{en.guardTool(name, h), lean}
}

// leanTool is a tool ServeTool serves: its guarded handler, and the
// predicate on a call's parsed arguments that decides whether the lean
// path takes it (nil: always).
type leanTool struct {
	h    tasks.ToolHandler
	lean func(*mcp.CallToolRequest) bool
}

const methodToolsCall = "tools/call"

// serveTool runs a Tasks client's call of a ServeTool tool (Route chose
// it) and answers whatever it returns.
func (en *Engine) serveTool(w http.ResponseWriter, r *http.Request, env *tasks.Envelope, l *Call) {
	ctx := r.Context()
	out, err := l.tool(ctx, l.call)
	switch {
	case err != nil:
		tasks.WriteError(w, env.ID, en.sdkError(ctx, methodToolsCall, env.Name, err, l.modern))
	case out.Task != nil:
		tasks.Tell(w, 0, false)
		tasks.WriteFramed(w, http.StatusOK, env.ID, "result", en.tasks.CreateResult(ctx, out.Task))
	default:
		en.writeToolResult(w, r, env, l, out.Result, nil, "")
	}
}

// sdkError is the answer go-sdk's path gives a handler's error (server's
// guard and SDKMiddleware): a guarded panic's -32603 as the engine
// gives it, an *tasks.RPCError as it is, a *jsonrpc.Error with its code, message
// and data and go-sdk's HTTP status for that code, and any other error
// Internal's -32603, which names nothing of it.
func (en *Engine) sdkError(ctx context.Context, method, name string, err error, modern bool) *tasks.RPCError {
	var p panicError
	if errors.As(err, &p) {
		return p.RPCError
	}
	var re *tasks.RPCError
	if errors.As(err, &re) {
		return re
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		e := &tasks.RPCError{Code: je.Code, Message: je.Message, HTTPStatus: sdkStatus(je.Code, modern)}
		if len(je.Data) > 0 {
			e.Data = je.Data
		}
		return e
	}
	e := *tasks.Internal(ctx, en.log, method, name, err)
	e.HTTPStatus = http.StatusOK // go-sdk sends -32603 in a 200 response
	return &e
}

// sdkStatus is the HTTP status go-sdk's handler gives a JSON-RPC error
// (its extractErrorStatus): on 2026-07-28 404 for -32601 and 400 for
// invalid params, an unsupported version or missing capabilities; 200
// otherwise.
func sdkStatus(code int64, modern bool) int {
	switch {
	case !modern:
		return http.StatusOK
	case code == tasks.CodeMethodNotFound:
		return http.StatusNotFound
	case code == tasks.CodeInvalidParams || code == tasks.CodeUnsupportedProtocol || code == tasks.CodeMissingCapability:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

const metaClientInfo = "io.modelcontextprotocol/clientInfo"

// metaCache holds the _meta objects clients send, decoded, keyed by their
// bytes (caches.RequestMeta): a client sends the same one on every call,
// and decoding and checking it is a good part of a call's cost. Only
// objects go-sdk would accept are kept; the maps are shared between
// requests and never modified.
type metaCache struct {
	b *caches.Bounded[string, map[string]any]
}

func newMetaCache() metaCache {
	return metaCache{caches.New(caches.RequestMeta, caches.Options[string, map[string]any]{
		// The decoded map is taken at four times its text.
		Size: func(raw string, _ map[string]any) int { return 5 * len(raw) },
	})}
}

// get returns raw decoded, or nil when go-sdk would refuse it.
func (c metaCache) get(raw json.RawMessage) map[string]any {
	// The lookup reads raw's bytes as a string without copying them (a
	// map index does as much for m[string(raw)]); only Put keeps a copy.
	if cached, ok := c.b.Get(unsafe.String(unsafe.SliceData(raw), len(raw))); ok {
		return cached
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || !sdkWouldDecode(m) {
		return nil
	}
	c.b.Put(string(raw), m)
	return m
}

// sdkWouldDecode reports whether go-sdk accepts a request's _meta: the
// client capabilities decode into its ClientCapabilities (with the 2026
// roots shape) and clientInfo, if present, into an Implementation: the
// checks go-sdk makes on every request, made here once per distinct _meta.
func sdkWouldDecode(meta map[string]any) bool {
	var caps struct {
		mcp.ClientCapabilities
		//lint:ignore SA1019 go-sdk still decodes roots (deprecated, served for twelve months): so must this check
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}
	if !redecode(meta[tasks.MetaClientCapabilities], &caps) {
		return false
	}
	info, ok := meta[metaClientInfo]
	return !ok || (info != nil && redecode(info, new(mcp.Implementation)))
}

func redecode(v any, into any) bool {
	b, err := json.Marshal(v)
	return err == nil && json.Unmarshal(b, into) == nil
}

// sdkWouldAcceptHTTP reports whether go-sdk's stateless Streamable HTTP
// handler lets a POST through: the headers and Host it checks before
// reading the message.
func sdkWouldAcceptHTTP(r *http.Request) bool {
	if r.Header.Get("Last-Event-ID") != "" {
		return false
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" { // the usual value, without a parse
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return false
		}
	}
	accept := r.Header.Values("Accept")
	// The usual value is accepted without splitting it.
	usual := len(accept) == 1 && accept[0] == "application/json, text/event-stream"
	jsonOK, streamOK := usual, usual
	for _, v := range accept {
		if usual {
			break
		}
		for tok := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(tok, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	// go-sdk's DNS-rebinding guard is Admit's (HostAllowed), which ran
	// before: a request it refuses never reaches here.
	return jsonOK && streamOK
}
