package tasks

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"sync"

	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ReadHandler is a read-only tool's handler for ServeRead. shared reports
// a result the handler returns again, as the same pointer, for as long as
// what it shows is unchanged: it is never modified, so its encoding is
// kept and a poll of unchanged state is not encoded again.
type ReadHandler func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, shared bool, err error)

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
	res, shared, err := l.read(ctx, l.call)
	if answerPanic(w, env.ID, err) {
		return true
	}
	if err != nil || res == nil {
		return false
	}
	if df != nil {
		b, ok := d.readResult(res, l.modern)
		return ok && d.writeResult(w, r, env.ID, owner, b, res.IsError, df)
	}
	var b []byte
	ok := false
	if shared { // only a shared result can have a kept encoding
		b, ok = d.encodings.get(res, l.modern)
	}
	if !ok {
		if b, ok = d.readResult(res, l.modern); !ok {
			return false
		}
		if shared {
			d.encodings.put(res, l.modern, b)
		}
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

// encodingCache keeps the encodings of shared read results (see
// ReadHandler), per result and era, at most encodingCacheMax (then a
// random one leaves). The key is the result itself: a handler returns a
// new one when what it shows changes.
type encodingCache struct {
	mu sync.Mutex
	m  map[encodingKey][]byte
}

type encodingKey struct {
	res    *mcp.CallToolResult
	modern bool
}

const encodingCacheMax = 4096

func (c *encodingCache) get(res *mcp.CallToolResult, modern bool) ([]byte, bool) {
	c.mu.Lock()
	b, ok := c.m[encodingKey{res, modern}]
	c.mu.Unlock()
	return b, ok
}

func (c *encodingCache) put(res *mcp.CallToolResult, modern bool, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[encodingKey][]byte{}
	}
	if len(c.m) >= encodingCacheMax {
		for old := range c.m { // a random entry leaves
			delete(c.m, old)
			break
		}
	}
	c.m[encodingKey{res, modern}] = b
}
