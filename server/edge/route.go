package edge

import (
	"net/http"
	"slices"

	"github.com/darkroom-mcp/darkroom/tasks"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const methodResourcesRead = "resources/read"

// Call is a request Route gave the lean path: the handler that
// serves it, exactly one of tool, read and resource, and the request as
// go-sdk would hand it to that handler.
type Call struct {
	tool         tasks.ToolHandler               // ServeTool's: a Tasks client's create
	lean         func(*mcp.CallToolRequest) bool // the tool's predicate (nil: every call)
	read         ReadHandler                     // ServeRead's and ServeBytes's
	resource     bool                            // ServeResource's
	modern       bool                            // on the 2026-07-28 wire (else a legacy era)
	call         *mcp.CallToolRequest
	readResource *mcp.ReadResourceRequest
}

// Route is the one, final decision of who serves a POST Admit parsed: the
// dispatcher's own methods (tasks.PathTasks), a registered tool or
// resources/read the lean path can serve exactly as go-sdk would
// (tasks.PathLean, with the call), or go-sdk. Every check that go-sdk would
// refuse or treat the request otherwise is made here, once: go-sdk's HTTP
// checks (sdkWouldAcceptHTTP), a served protocol version, the SEP-2243
// headers naming the body's method and name, a plain JSON-RPC 2.0 request
// whose id go-sdk re-encodes to the same bytes, no MRTR retry, and a
// _meta go-sdk decodes (2026-07-28) or none (earlier eras, whose _meta
// carries a progressToken go-sdk's session answers).
func (en *Engine) Route(r *http.Request, env *tasks.Envelope) (tasks.Path, *Call) {
	if env.Dispatched() {
		return tasks.PathTasks, nil
	}
	l := &Call{}
	switch env.Method {
	case methodToolsCall:
		tool, read := en.tools[env.Name], en.reads[env.Name]
		l.tool, l.lean, l.read = tool.h, tool.lean, read.h
		if read.h != nil {
			l.lean = read.lean
		}
		if l.tool == nil && l.read == nil {
			return tasks.PathSDK, nil
		}
	case methodResourcesRead:
		if en.resource == nil || en.readMeta == nil {
			return tasks.PathSDK, nil
		}
		l.resource = true
	default:
		return tasks.PathSDK, nil
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	l.modern = en.tasks.Serves(version)
	// A create answers with a task: only on the Tasks wire.
	legacy := l.tool == nil && slices.Contains(legacyVersions, version)
	if env.IsBatch || !(l.modern || legacy) || !sdkWouldAcceptHTTP(r) {
		return tasks.PathSDK, nil
	}
	if l.modern && (r.Header.Get("Mcp-Method") != env.Method || r.Header.Get("Mcp-Name") != env.Name) {
		return tasks.PathSDK, nil
	}
	// The body as Admit parsed it, once: go-sdk's decoder reads the same
	// fields (case-sensitive keys, the last duplicate wins).
	p := env.Params()
	if env.JSONRPC() != "2.0" || !sameID(env.ID) || p == nil || p.InputResponses != nil || p.RequestState != nil {
		return tasks.PathSDK, nil
	}
	if l.resource {
		if env.Name == "" || !plainString(p.URI) || p.Name != nil || p.TaskID != nil || p.Arguments != nil || p.Notifications != nil ||
			(en.resourceLean != nil && !en.resourceLean(env.Name)) {
			return tasks.PathSDK, nil
		}
	} else if args := p.Arguments; len(args) > 0 && args[0] != '{' && string(args) != "null" {
		return tasks.PathSDK, nil
	}
	var meta map[string]any
	if l.modern {
		if meta = en.metas.get(p.Meta); meta == nil || !tasks.NumbersFit(env.Body) {
			return tasks.PathSDK, nil
		}
		if v, _ := meta[tasks.MetaProtocolVersion].(string); v != version {
			return tasks.PathSDK, nil
		}
	} else if p.Meta != nil {
		return tasks.PathSDK, nil
	}
	if l.resource {
		l.readResource = &mcp.ReadResourceRequest{Params: &mcp.ReadResourceParams{Meta: meta, URI: env.Name}}
		return tasks.PathLean, l
	}
	l.call = &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: meta, Name: env.Name, Arguments: p.Arguments}}
	if (l.tool != nil && !tasks.Declared(l.call)) || (l.lean != nil && !l.lean(l.call)) {
		return tasks.PathSDK, nil
	}
	return tasks.PathLean, l
}
