package envelope

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// RPCError is a JSON-RPC error with the HTTP status it travels with.
type RPCError struct {
	Code       int64  `json:"code"`
	Message    string `json:"message"`
	Data       any    `json:"data,omitempty"`
	HTTPStatus int    `json:"-"`
	RetryAfter string `json:"-"` // the Retry-After header, if any
}

func (e *RPCError) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

// Wire is e as go-sdk's JSON-RPC error (a transport other than HTTP).
func (e *RPCError) Wire() *jsonrpc.Error {
	var data json.RawMessage
	if e.Data != nil {
		data, _ = json.Marshal(e.Data)
	}
	return &jsonrpc.Error{Code: e.Code, Message: e.Message, Data: data}
}

// DecodeHeader undoes SEP-2243's =?base64?...?= encoding and trims
// surrounding whitespace.
func DecodeHeader(v string) string {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") {
		if b, err := base64.StdEncoding.DecodeString(v[len("=?base64?") : len(v)-2]); err == nil {
			return string(b)
		}
	}
	return v
}

// WriteError answers a JSON-RPC error over HTTP.
func WriteError(w http.ResponseWriter, id json.RawMessage, e *RPCError) {
	b, _ := json.Marshal(e)
	if len(id) > 0 && string(id) != "null" {
		Tell(w, e.Code, false)
	}
	if e.RetryAfter != "" {
		w.Header().Set("Retry-After", e.RetryAfter)
	}
	WriteFramed(w, e.HTTPStatus, id, "error", b)
}

// Path names the engine that answers a request on the MCP endpoint: the
// debug line's "path" and the label of darkroom_requests_by_path_total.
type Path string

const (
	// PathLean is a tools/call or resources/read the lean engine
	// (server/edge) runs itself, below go-sdk, answered byte for byte as
	// go-sdk would.
	PathLean Path = "lean"
	// PathTasks is tasks/get, tasks/update, tasks/cancel and
	// subscriptions/listen with taskIds, which go-sdk does not serve.
	PathTasks Path = "tasks"
	// PathSDK is everything else, and every request the lean engine
	// cannot prove go-sdk would take and treat the same way.
	PathSDK Path = "go-sdk"
)

// Outcome is implemented by a ResponseWriter that records what each
// response was (server's metrics recorder): the dispatcher tells it,
// before writing, instead of it parsing the body again.
type Outcome interface {
	// RPCOutcome reports a JSON-RPC error's code (0 for a result) and,
	// for a tools/call result, its isError.
	RPCOutcome(code int64, isError bool)
	// ServedBy names the engine that answers: told once route has
	// chosen.
	ServedBy(p Path)
}

// OutcomeFrom returns the recorder of the request ctx serves (its
// envelope's Recorder), for the layers that answer without its
// ResponseWriter: go-sdk's handlers, whose outcome server's receiving
// middleware tells it.
func OutcomeFrom(ctx context.Context) (Outcome, bool) {
	if e, ok := From(ctx); ok && e.Recorder != nil {
		return e.Recorder, true
	}
	return nil, false
}

// Tell tells w's recorder, if it has one, what the response is.
func Tell(w http.ResponseWriter, code int64, isError bool) {
	if o, ok := w.(Outcome); ok {
		o.RPCOutcome(code, isError)
	}
}

// JSONContentType is the Content-Type header's value, set without
// canonicalising or allocating.
var JSONContentType = []string{"application/json"}

// WriteFramed answers a JSON-RPC response over HTTP.
// The frame is written in pieces (the server buffers them): no copy of
// the body.
func WriteFramed(w http.ResponseWriter, status int, id json.RawMessage, field string, body []byte) {
	var open [64]byte
	head := FrameHead(open[:0], id, field)
	h := w.Header()
	h["Content-Type"] = JSONContentType
	h["Content-Length"] = []string{strconv.Itoa(len(head) + len(body) + 1)}
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(head)
	_, _ = w.Write(body)
	_, _ = w.Write(closeBrace)
}

var closeBrace = []byte{'}'}

const framePrefix = `{"jsonrpc":"2.0","id":`

// FrameHead appends a JSON-RPC response's opening to buf, up to its
// field's value: the body and a closing brace complete it. An absent id
// is null.
func FrameHead(buf []byte, id json.RawMessage, field string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return append(append(append(append(append(buf, framePrefix...), id...), `,"`...), field...), `":`...)
}

// Frame wraps a result or error object in a JSON-RPC response without
// re-encoding it.
func Frame(id json.RawMessage, field string, body []byte) []byte {
	return append(append(FrameHead(make([]byte, 0, len(body)+len(id)+32), id, field), body...), '}')
}
