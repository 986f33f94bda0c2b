package edge

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is a tool's lean form (ServeTool): exactly one of Task and Read.
type Tool struct {
	// Task is a Tasks client's create, run for a call that declared the
	// Tasks extension: durable creation is a hot path, and go-sdk's
	// generic tools/call costs about a millisecond of CPU per call,
	// several times the creation itself.
	Task tasks.ToolHandler
	// Read is a read-only tool's handler, run for every client, on the
	// 2026-07-28 wire and on the legacy stateless eras: the legacy poll
	// path (get_generation and its kin) costs, through go-sdk's generic
	// tools/call, about twelve times a tasks/get.
	Read ReadHandler
	// Bytes: Read's result may carry output bytes. It runs with an
	// outbytes.Deferral, and each blob it defers is streamed into the
	// response (writeResult) instead of being encoded in memory; its
	// results are never shared.
	Bytes bool
	// Lean, when set, is the call's predicate on its parsed request,
	// decided by Route before anything runs: a call it refuses goes to
	// go-sdk.
	Lean func(*mcp.CallToolRequest) bool
}

// ServeTool lets the engine run the named tool's handler itself, below
// go-sdk. Once Route chose it the engine answers every outcome byte for
// byte as the JSON-RPC message go-sdk's path would send (framed as JSON,
// go-sdk as one SSE event): the task the handler created
// (tasks.ToolOutcome.Task), its result with go-sdk's additions per era
// (Content never null; on 2026-07-28 resultType "complete" and
// serverInfo, the MCP server's Implementation, in _meta), its error
// (fail), its panic (guard). A request the engine cannot prove go-sdk
// would take and treat the same way (other versions, odd headers, MRTR
// retries) goes to go-sdk untouched, before anything runs. The tool must
// not declare x-mcp-header parameters; its request has no Session, and
// its Params.Meta is shared between requests and must not be modified.
func (en *Engine) ServeTool(name string, t Tool) { en.tools[name] = t }

const methodToolsCall = "tools/call"

// serveTool runs a tools/call of a ServeTool tool (Route chose it) and
// answers whatever it returns. A keyed read's encoded reply is kept
// (tasks.Replies), and answered again for an equal Key without Render.
func (en *Engine) serveTool(w http.ResponseWriter, r *http.Request, env *envelope.Envelope, l *Call, owner string) {
	ctx, df := r.Context(), (*outbytes.Deferral)(nil)
	if l.tool.Bytes {
		ctx, df = outbytes.WithDeferral(ctx)
	}
	var (
		out   tasks.ToolOutcome // Task's answer, or Read's result
		reply Reply
		hit   []byte // the encoded reply kept for reply.Key
		keyed bool
	)
	slot := tasks.ReplySlot{Kind: 'r', Modern: l.modern}
	err := en.guard(env, func() (err error) {
		if l.tool.Task != nil {
			out, err = l.tool.Task(ctx, l.call)
			return err
		}
		if reply, err = l.tool.Read(ctx, l.call); err != nil {
			return err
		}
		slot.ID, keyed = reply.ID, reply.Key != nil && df == nil
		if keyed {
			if hit, _ = en.replies.Get(slot, reply.Key); hit != nil {
				return nil
			}
		}
		out.Result = reply.Answer() // its Render guarded as the handler is
		return nil
	})
	var b []byte
	switch {
	case err != nil:
		en.fail(w, r, env, l, err)
		return
	case out.Task != nil:
		envelope.Tell(w, 0, false)
		envelope.WriteFramed(w, http.StatusOK, env.ID, "result", en.tasks.CreateResult(ctx, out.Task))
		return
	case hit != nil:
		envelope.Tell(w, 0, false) // a keyed reply is never an isError
		envelope.WriteFramed(w, http.StatusOK, env.ID, "result", hit)
		return
	}
	if b, err = en.readResult(out.Result, l.modern); err == nil {
		err = en.writeResult(w, r, env.ID, owner, b, out.Result.IsError, df)
	}
	if err != nil {
		en.fail(w, r, env, l, err)
	} else if keyed && !out.Result.IsError {
		en.replies.Put(slot, reply.Key, b)
	}
}

// fail answers err as go-sdk's path answers a handler's error (server's
// guard and SDKMiddleware): an *tasks.RPCError (a guarded panic's
// -32603 among them) as it is, a *jsonrpc.Error with its code, message
// and data and go-sdk's HTTP status for that code, and any other error
// Internal's -32603, which names nothing of it.
func (en *Engine) fail(w http.ResponseWriter, r *http.Request, env *envelope.Envelope, l *Call, err error) {
	var re *tasks.RPCError
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &re):
	case errors.As(err, &je):
		re = &tasks.RPCError{Code: je.Code, Message: je.Message, HTTPStatus: sdkStatus(je.Code, l.modern)}
		if len(je.Data) > 0 {
			re.Data = je.Data
		}
	default:
		e := *tasks.Internal(r.Context(), en.log, env.Method, env.Name, err)
		e.HTTPStatus = http.StatusOK // go-sdk sends -32603 in a 200 response
		re = &e
	}
	envelope.WriteError(w, env.ID, re)
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

// decodeMeta returns a request's _meta decoded, or nil when go-sdk would
// refuse it.
func decodeMeta(raw json.RawMessage) map[string]any {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || !sdkWouldDecode(m) {
		return nil
	}
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
// handler lets a POST through: the headers it checks before reading the
// message (its DNS-rebinding guard is HostAllowed, which ran before).
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
	if len(accept) == 1 && accept[0] == "application/json, text/event-stream" {
		return true // the usual value, without splitting it
	}
	jsonOK, streamOK := false, false
	for _, v := range accept { // go-sdk's streamableAccepts
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
	return jsonOK && streamOK
}
