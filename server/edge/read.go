package edge

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"

	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ReadHandler is a read-only tool's handler (Tool.Read).
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
	return en.finish(b, err, modern, spliceMeta)
}

// finish is b, an encoded result object, as go-sdk sends it for the era:
// on 2026-07-28 resultType the last field its wire form adds (after
// requestState; inputRequests is empty here) and, with meta, _meta
// carrying serverInfo the first.
func (en *Engine) finish(b []byte, err error, modern, meta bool) ([]byte, error) {
	if err == nil && (len(b) < 2 || b[0] != '{') {
		err = errors.New("edge: a result encoded as no object")
	}
	if err != nil || !modern {
		return b, err
	}
	out := make([]byte, 0, len(b)+len(en.readMeta)+32)
	if meta {
		out = append(out, en.readMeta...)
	} else {
		out = append(out, '{')
	}
	out = append(out, b[1:len(b)-1]...)
	return append(out, `,"resultType":"complete"}`...), nil
}

// sameID reports an id go-sdk re-encodes to the same bytes: an integer of
// at most 15 digits (it decodes numbers as float64 and sends int64) in
// its shortest form ("-0", "+1" and leading zeros re-encode otherwise),
// or a string of printable ASCII without escapes.
func sameID(id json.RawMessage) bool {
	if len(id) > 1 && id[0] == '"' {
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
				return false
			}
		}
		return id[len(id)-1] == '"'
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	var buf [20]byte
	return err == nil && n > -1e15 && n < 1e15 && string(strconv.AppendInt(buf[:0], n, 10)) == string(id)
}
