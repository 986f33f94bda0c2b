package tasks

import (
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path names the engine that answers a request on the MCP endpoint: the
// debug line's "path" and the label of darkroom_requests_by_path_total.
type Path string

const (
	// PathLean is a tools/call or resources/read this dispatcher runs
	// itself, below go-sdk, answered byte for byte as go-sdk would.
	PathLean Path = "lean"
	// PathTasks is tasks/get, tasks/update, tasks/cancel and
	// subscriptions/listen with taskIds, which go-sdk does not serve.
	PathTasks Path = "tasks"
	// PathSDK is everything else, and every request the lean path cannot
	// prove go-sdk would take and treat the same way.
	PathSDK Path = "go-sdk"
)

const methodResourcesRead = "resources/read"

// leanCall is a request route gave the lean path: the handler that
// serves it, exactly one of tool, read and resource, and the request as
// go-sdk would hand it to that handler.
type leanCall struct {
	tool         ToolHandler                     // ServeTool's: a Tasks client's create
	lean         func(*mcp.CallToolRequest) bool // the tool's predicate (nil: every call)
	read         ReadHandler                     // ServeRead's and ServeBytes's
	resource     bool                            // ServeResource's
	modern       bool                            // on the 2026-07-28 wire (else a legacy era)
	call         *mcp.CallToolRequest
	readResource *mcp.ReadResourceRequest
}

// route is the one, final decision of who serves a POST Admit parsed: the
// dispatcher's own methods (PathTasks), a registered tool or
// resources/read the lean path can serve exactly as go-sdk would
// (PathLean, with the call), or go-sdk. Every check that go-sdk would
// refuse or treat the request otherwise is made here, once: go-sdk's HTTP
// checks (sdkWouldAcceptHTTP), a served protocol version, the SEP-2243
// headers naming the body's method and name, a plain JSON-RPC 2.0 request
// whose id go-sdk re-encodes to the same bytes, no MRTR retry, and a
// _meta go-sdk decodes (2026-07-28) or none (earlier eras, whose _meta
// carries a progressToken go-sdk's session answers).
func (d *Dispatcher) route(r *http.Request, env *Envelope) (Path, *leanCall) {
	if env.Dispatched() {
		return PathTasks, nil
	}
	l := &leanCall{}
	switch env.Method {
	case methodToolsCall:
		tool, read := d.tools[env.Name], d.reads[env.Name]
		l.tool, l.lean, l.read = tool.h, tool.lean, read.h
		if read.h != nil {
			l.lean = read.lean
		}
		if l.tool == nil && l.read == nil {
			return PathSDK, nil
		}
	case methodResourcesRead:
		if d.resource == nil || d.readMeta == nil {
			return PathSDK, nil
		}
		l.resource = true
	default:
		return PathSDK, nil
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	l.modern = slices.Contains(d.opts.Versions, version)
	// A create answers with a task: only on the Tasks wire.
	legacy := l.tool == nil && slices.Contains(legacyVersions, version)
	if env.IsBatch || !(l.modern || legacy) || !sdkWouldAcceptHTTP(r) {
		return PathSDK, nil
	}
	if l.modern && (r.Header.Get("Mcp-Method") != env.Method || r.Header.Get("Mcp-Name") != env.Name) {
		return PathSDK, nil
	}
	// The body as Admit parsed it, once: go-sdk's decoder reads the same
	// fields (case-sensitive keys, the last duplicate wins).
	p := env.params
	if env.jsonrpc != "2.0" || !sameID(env.ID) || p == nil || p.InputResponses != nil || p.RequestState != nil {
		return PathSDK, nil
	}
	if l.resource {
		if env.Name == "" || !plainString(p.URI) || p.Name != nil || p.TaskID != nil || p.Arguments != nil || p.Notifications != nil ||
			(d.resourceLean != nil && !d.resourceLean(env.Name)) {
			return PathSDK, nil
		}
	} else if args := p.Arguments; len(args) > 0 && args[0] != '{' && string(args) != "null" {
		return PathSDK, nil
	}
	var meta map[string]any
	if l.modern {
		if meta = d.metas.get(p.Meta); meta == nil || !numbersFit(env.Body) {
			return PathSDK, nil
		}
		if v, _ := meta[metaProtocolVersion].(string); v != version {
			return PathSDK, nil
		}
	} else if p.Meta != nil {
		return PathSDK, nil
	}
	if l.resource {
		l.readResource = &mcp.ReadResourceRequest{Params: &mcp.ReadResourceParams{Meta: meta, URI: env.Name}}
		return PathLean, l
	}
	l.call = &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: meta, Name: env.Name, Arguments: p.Arguments}}
	if (l.tool != nil && !Declared(l.call)) || (l.lean != nil && !l.lean(l.call)) {
		return PathSDK, nil
	}
	return PathLean, l
}
