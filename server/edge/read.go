package edge

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"

	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ReadHandler is a read-only tool's handler for ServeRead.
type ReadHandler func(ctx context.Context, req *mcp.CallToolRequest) (Reply, error)

// Reply is a read's answer: its Result, or, for an answer that depends
// only on what Key names, Key and the Render that builds its result. The
// engine keeps the encoded reply of a keyed answer (tasks.Replies) and
// calls Render only when it holds none for an equal Key: a poll of
// unchanged state is neither rendered nor encoded again. Key must be
// comparable, and include everything the result shows.
type Reply struct {
	Result *mcp.CallToolResult
	ID     string // what a keyed reply shows (a generation's id): its reply-cache slot
	Key    any
	Render func() *mcp.CallToolResult
}

// Answer is the reply's result, rendered if need be.
func (r Reply) Answer() *mcp.CallToolResult {
	if r.Result == nil && r.Render != nil {
		return r.Render()
	}
	return r.Result
}

// ServeRead lets the engine answer a tools/call of a read-only tool
// itself, below go-sdk, for every client (with or without the Tasks
// extension), on the 2026-07-28 wire and on the legacy stateless eras:
// the legacy poll path (get_generation and its kin) costs, through go-sdk's
// generic tools/call, about twelve times a tasks/get.
//
// The answer is byte for byte the JSON-RPC message go-sdk would send (it
// frames it as JSON, go-sdk as one SSE event): the handler's own result,
// with go-sdk's additions per era (Content never null; on 2026-07-28
// resultType "complete" and serverInfo, the MCP server's Implementation,
// in _meta), or its error as go-sdk's path answers it (sdkError). A
// request this path cannot prove go-sdk would take and treat the same way
// goes to go-sdk untouched, before anything runs. Its request has no
// Session, and its Params.Meta is shared between requests and must not
// be modified.
//
// lean, when set, is the call's predicate (decided by Route from the
// parsed request, before anything runs): a call it refuses goes to
// go-sdk.
func (en *Engine) ServeRead(name string, h ReadHandler, lean func(*mcp.CallToolRequest) bool) {
	en.reads[name] = leanRead{en.guardRead(name, h), lean}
}

// leanRead is a read ServeRead serves and its predicate.
type leanRead struct {
	h    ReadHandler
	lean func(*mcp.CallToolRequest) bool
}

// legacyVersions are the protocol versions before 2026-07-28 that go-sdk's
// stateless handler serves with a stand-in session; "" is its default
// (2025-03-26).
var legacyVersions = []string{"", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// serveRead answers a tools/call of a read-only tool (Route chose it),
// whatever its handler returns.
func (en *Engine) serveRead(w http.ResponseWriter, r *http.Request, env *tasks.Envelope, l *Call, owner string) {
	ctx, df := r.Context(), (*outbytes.Deferral)(nil)
	if en.bytesTools[env.Name] { // its blobs are streamed (bytes.go)
		ctx, df = outbytes.WithDeferral(ctx)
	}
	reply, err := l.read(ctx, l.call)
	if err != nil {
		tasks.WriteError(w, env.ID, en.sdkError(ctx, methodToolsCall, env.Name, err, l.modern))
		return
	}
	slot := tasks.ReplySlot{ID: reply.ID, Kind: 'r', Modern: l.modern}
	keyed := reply.Key != nil && df == nil
	if keyed {
		if b, ok := en.replies.Get(slot, reply.Key); ok {
			tasks.Tell(w, 0, false) // a keyed reply is never an isError
			tasks.WriteFramed(w, http.StatusOK, env.ID, "result", b)
			return
		}
	}
	res, err := en.answerOf(env.Name, reply)
	if err != nil {
		tasks.WriteError(w, env.ID, en.sdkError(ctx, methodToolsCall, env.Name, err, l.modern))
		return
	}
	if b := en.writeToolResult(w, r, env, l, res, df, owner); keyed && b != nil && !res.IsError {
		en.replies.Put(slot, reply.Key, b)
	}
}

// answerOf is the reply's result, rendered if need be: a panic in its
// Render is Recovered's answer, as the handler's own would be.
func (en *Engine) answerOf(name string, reply Reply) (res *mcp.CallToolResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, panicError{tasks.Recovered(en.log, methodToolsCall, name, v)}
		}
	}()
	return reply.Answer(), nil
}

// writeToolResult answers a tool's result as go-sdk's callTool would
// encode it for the era (readResult), its blobs streamed when df defers
// them (writeResult); it returns the encoded result it sent (nil when it
// answered otherwise).
func (en *Engine) writeToolResult(w http.ResponseWriter, r *http.Request, env *tasks.Envelope, l *Call, res *mcp.CallToolResult, df *outbytes.Deferral, owner string) []byte {
	b, err := en.readResult(res, l.modern)
	if err == nil {
		err = en.writeResult(w, r, env.ID, owner, b, res.IsError, df)
	}
	if err != nil {
		tasks.WriteError(w, env.ID, en.sdkError(r.Context(), methodToolsCall, env.Name, err, l.modern))
		return nil
	}
	return b
}

// readResult encodes res as go-sdk's callTool and, on 2026-07-28, its
// per-request annotations leave it; an error for a result the lean path
// cannot encode as go-sdk does (none, or one asking for input: route
// never gives the lean path a call that could return one).
func (en *Engine) readResult(res *mcp.CallToolResult, modern bool) ([]byte, error) {
	if res == nil {
		return nil, errors.New("edge: a lean handler returned no result and no error")
	}
	if res.InputRequests != nil || res.RequestState != "" {
		return nil, errors.New("edge: a lean handler asked for input")
	}
	if res.Content == nil {
		res2 := *res
		res2.Content = []mcp.Content{}
		res = &res2
	}
	spliceMeta := modern && res.Meta == nil
	if modern && !spliceMeta {
		if _, ok := res.Meta[tasks.MetaServerInfo]; !ok {
			res2 := *res // the handler's result is not modified
			res2.Meta = maps.Clone(res.Meta)
			res2.Meta[tasks.MetaServerInfo] = en.readInfo
			res = &res2
		}
	}
	// go-sdk marshals the result with its MarshalJSON (encoding/json, HTML
	// escaped) and re-compacts it without escaping: the same bytes, which
	// are already compact, so MarshalJSON's output is used as it is.
	b, err := res.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != '{' {
		return nil, errors.New("edge: a tool result encoded as no object")
	}
	if !modern {
		return b, nil
	}
	return en.complete(b, spliceMeta), nil
}

// complete is the encoded result object b as go-sdk sends it on
// 2026-07-28: resultType the last field its wire form adds (after
// requestState; inputRequests is empty here) and, with meta, _meta
// carrying serverInfo the first.
func (en *Engine) complete(b []byte, meta bool) []byte {
	out := make([]byte, 0, len(b)+len(en.readMeta)+32)
	if meta {
		out = append(out, en.readMeta...)
	} else {
		out = append(out, '{')
	}
	out = append(out, b[1:len(b)-1]...)
	return append(out, `,"resultType":"complete"}`...)
}

// sameID reports an id go-sdk re-encodes to the same bytes: an integer of
// at most 15 digits (it decodes numbers as float64 and sends int64), or a
// string of printable ASCII without escapes.
func sameID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		if len(id) < 2 || id[len(id)-1] != '"' {
			return false
		}
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
				return false
			}
		}
		return true
	}
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(id) > 1) {
		return false // "-0" and leading zeros re-encode otherwise
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
