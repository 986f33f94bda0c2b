package edge

import (
	"net/http"
	"slices"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/tasks"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const methodResourcesRead = "resources/read"

// Call is a request Route gave the lean path: the tool's row (zero for
// resources/read), and the request as go-sdk would hand it to the
// handler.
type Call struct {
	tool         Tool
	modern       bool // on the 2026-07-28 wire (else a legacy era)
	call         *mcp.CallToolRequest
	readResource *mcp.ReadResourceRequest // resources/read's (else nil)
}

// legacyVersions are the protocol versions before 2026-07-28 that go-sdk's
// stateless handler serves with a stand-in session; "" is its default
// (2025-03-26).
var legacyVersions = []string{"", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Route is the one, final decision of who serves a POST Admit parsed: the
// dispatcher's own methods (envelope.PathTasks), a registered tool or
// resources/read the lean path can serve exactly as go-sdk would
// (envelope.PathLean, with the call), or go-sdk. Every check that go-sdk would
// refuse or treat the request otherwise is made here, once: go-sdk's HTTP
// checks (sdkWouldAcceptHTTP), a served protocol version, the SEP-2243
// headers naming the body's method and name, a plain JSON-RPC 2.0 request
// whose id go-sdk re-encodes to the same bytes, no MRTR retry, and a
// _meta go-sdk decodes (2026-07-28) or none (earlier eras, whose _meta
// carries a progressToken go-sdk's session answers).
func (en *Engine) Route(r *http.Request, env *envelope.Envelope) (envelope.Path, *Call) {
	if tasks.Dispatched(&env.Message) {
		return envelope.PathTasks, nil
	}
	l, ok := &Call{}, false
	switch env.Method {
	case methodToolsCall:
		l.tool, ok = en.tools[env.Name]
	case methodResourcesRead:
		ok = en.resource != nil && en.readMeta != nil
	}
	if !ok {
		return envelope.PathSDK, nil
	}
	resource := env.Method == methodResourcesRead
	version := r.Header.Get("Mcp-Protocol-Version")
	l.modern = en.tasks.Serves(version)
	// A create answers with a task: only on the Tasks wire.
	legacy := l.tool.Task == nil && slices.Contains(legacyVersions, version)
	if env.IsBatch || !(l.modern || legacy) || !sdkWouldAcceptHTTP(r) {
		return envelope.PathSDK, nil
	}
	if l.modern && (r.Header.Get("Mcp-Method") != env.Method || r.Header.Get("Mcp-Name") != env.Name) {
		return envelope.PathSDK, nil
	}
	// The body as Admit parsed it, once: go-sdk's decoder reads the same
	// fields (case-sensitive keys, the last duplicate wins).
	p := env.Fields
	if env.JSONRPC != "2.0" || !sameID(env.ID) || p == nil || p.InputResponses != nil || p.RequestState != nil {
		return envelope.PathSDK, nil
	}
	if resource {
		if env.Name == "" || !plainString(p.URI) || p.Name != nil || p.TaskID != nil || p.Arguments != nil || p.Notifications != nil ||
			(en.resourceLean != nil && !en.resourceLean(env.Name)) {
			return envelope.PathSDK, nil
		}
	} else if args := p.Arguments; len(args) > 0 && args[0] != '{' && string(args) != "null" {
		return envelope.PathSDK, nil
	}
	var meta map[string]any
	if l.modern {
		if meta = decodeMeta(p.Meta); meta == nil || !envelope.NumbersFit(env.Body) {
			return envelope.PathSDK, nil
		}
		if v, _ := meta[tasks.MetaProtocolVersion].(string); v != version {
			return envelope.PathSDK, nil
		}
	} else if p.Meta != nil {
		return envelope.PathSDK, nil
	}
	if resource {
		l.readResource = &mcp.ReadResourceRequest{Params: &mcp.ReadResourceParams{Meta: meta, URI: env.Name}}
		return envelope.PathLean, l
	}
	l.call = &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: meta, Name: env.Name, Arguments: p.Arguments}}
	if (l.tool.Task != nil && !tasks.Declared(l.call)) || (l.tool.Lean != nil && !l.tool.Lean(l.call)) {
		return envelope.PathSDK, nil
	}
	return envelope.PathLean, l
}
