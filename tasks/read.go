package tasks

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"

	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ReadHandler is a read-only tool's handler for ServeRead.
type ReadHandler func(ctx context.Context, req *mcp.CallToolRequest) (Reply, error)

// Reply is a read's answer: its Result, or, for an answer that depends
// only on what Key names, Key and the Render that builds its result. The
// dispatcher keeps the encoded reply of a keyed answer (replyCache) and
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

// ServeRead lets the dispatcher answer a tools/call of a read-only tool
// itself, below go-sdk, for every client (with or without the Tasks
// extension), on the 2026-07-28 wire and on the legacy stateless eras:
// the legacy poll path (get_generation and its kin) costs, through go-sdk's
// generic tools/call, about twelve times a tasks/get.
//
// The answer is byte for byte the JSON-RPC message go-sdk would send (it
// frames it as JSON, go-sdk as one SSE event): the handler's own result,
// with go-sdk's additions per era (Content never null; on 2026-07-28
// resultType "complete" and serverInfo, the MCP server's Implementation,
// in _meta). Only a result is kept: a handler error, or any request this
// path cannot prove go-sdk would take and treat the same way, goes to
// go-sdk untouched, which runs its own handler. So h must change
// nothing: it is a read. Its request has no Session, and its Params.Meta
// is shared between requests and must not be modified.
func (d *Dispatcher) ServeRead(name string, h ReadHandler, serverInfo *mcp.Implementation) {
	if d.reads == nil {
		d.reads = map[string]ReadHandler{}
	}
	d.reads[name] = d.guardRead(name, h)
	info, _ := json.Marshal(serverInfo)
	d.readInfo = serverInfo
	d.readMeta = append(append([]byte(`{"_meta":{"`+metaServerInfo+`":`), info...), "},"...)
}

// legacyVersions are the protocol versions before 2026-07-28 that go-sdk's
// stateless handler serves with a stand-in session; "" is its default
// (2025-03-26).
var legacyVersions = []string{"", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// serveRead answers a tools/call of a read-only tool (route chose it),
// and reports false, with nothing written, when go-sdk must serve it
// instead: a handler error, or a result go-sdk would treat otherwise.
func (d *Dispatcher) serveRead(w http.ResponseWriter, r *http.Request, env *Envelope, l *leanCall, owner string) bool {
	ctx, df := r.Context(), (*outbytes.Deferral)(nil)
	if d.bytesTools[env.Name] { // its blobs are streamed (bytes.go)
		ctx, df = outbytes.WithDeferral(ctx)
	}
	reply, err := l.read(ctx, l.call)
	if answerPanic(w, env.ID, err) {
		return true
	}
	if err != nil {
		return false
	}
	if df != nil {
		res := reply.Answer()
		b, ok := d.readResult(res, l.modern)
		return ok && d.writeResult(w, r, env.ID, owner, b, res.IsError, df)
	}
	slot := replySlot{id: reply.ID, kind: 'r', modern: l.modern}
	keyed := reply.Key != nil
	if keyed {
		if b, ok := d.replies.get(slot, reply.Key); ok {
			tell(w, 0, false) // a keyed reply is never an isError
			writeFramed(w, http.StatusOK, env.ID, "result", b)
			return true
		}
	}
	res := reply.Answer()
	if res == nil {
		return false
	}
	b, ok := d.readResult(res, l.modern)
	if !ok {
		return false
	}
	if keyed && !res.IsError {
		d.replies.put(slot, reply.Key, b)
	}
	tell(w, 0, res.IsError)
	writeFramed(w, http.StatusOK, env.ID, "result", b)
	return true
}

// readResult encodes res as go-sdk's callTool and, on 2026-07-28, its
// per-request annotations leave it; false for a result it would treat
// otherwise (input requests).
func (d *Dispatcher) readResult(res *mcp.CallToolResult, modern bool) ([]byte, bool) {
	if res.InputRequests != nil || res.RequestState != "" {
		return nil, false
	}
	if res.Content == nil {
		res2 := *res
		res2.Content = []mcp.Content{}
		res = &res2
	}
	spliceMeta := modern && res.Meta == nil
	if modern && !spliceMeta {
		if _, ok := res.Meta[metaServerInfo]; !ok {
			res2 := *res // the handler's result is not modified
			res2.Meta = maps.Clone(res.Meta)
			res2.Meta[metaServerInfo] = d.readInfo
			res = &res2
		}
	}
	// go-sdk marshals the result with its MarshalJSON (encoding/json, HTML
	// escaped) and re-compacts it without escaping: the same bytes, which
	// are already compact, so MarshalJSON's output is used as it is.
	b, err := res.MarshalJSON()
	if err != nil || len(b) < 2 || b[0] != '{' {
		return nil, false
	}
	if !modern {
		return b, true
	}
	// resultType is the last field go-sdk's wire form adds (after
	// requestState; inputRequests is empty here), and _meta the first.
	out := make([]byte, 0, len(b)+len(d.readMeta)+32)
	if spliceMeta {
		out = append(out, d.readMeta...)
	} else {
		out = append(out, '{')
	}
	out = append(out, b[1:len(b)-1]...)
	return append(out, `,"resultType":"complete"}`...), true
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
