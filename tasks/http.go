package tasks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
)

// decodeHeader undoes SEP-2243's =?base64?...?= encoding and trims
// surrounding whitespace.
func decodeHeader(v string) string {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") {
		if b, err := base64.StdEncoding.DecodeString(v[len("=?base64?") : len(v)-2]); err == nil {
			return string(b)
		}
	}
	return v
}

// DeclaredMethod is the method a 2026-07-28 request's Mcp-Method header
// names ("" on earlier versions, which carry no such header). A request
// whose body says otherwise is refused at the door (-32020), so what is
// decided on it before the body is read can only refuse early what would
// be refused anyway.
func DeclaredMethod(h http.Header) string {
	if h.Get("Mcp-Protocol-Version") < modernVersion {
		return ""
	}
	return decodeHeader(h.Get("Mcp-Method"))
}

// WriteError answers a JSON-RPC error over HTTP.
func WriteError(w http.ResponseWriter, id json.RawMessage, e *RPCError) {
	b, _ := json.Marshal(e)
	if len(id) > 0 && string(id) != "null" {
		tell(w, e.Code, false)
	}
	if e.RetryAfter != "" {
		w.Header().Set("Retry-After", e.RetryAfter)
	}
	writeFramed(w, e.HTTPStatus, id, "error", b)
}

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
	if e, ok := EnvelopeFrom(ctx); ok && e.Recorder != nil {
		return e.Recorder, true
	}
	return nil, false
}

func tell(w http.ResponseWriter, code int64, isError bool) {
	if o, ok := w.(Outcome); ok {
		o.RPCOutcome(code, isError)
	}
}

// servedBy tells w's recorder which engine answers the request.
func servedBy(w http.ResponseWriter, p Path) {
	if o, ok := w.(Outcome); ok {
		o.ServedBy(p)
	}
}

// Shared header values: set without canonicalising or allocating.
var jsonContentType = []string{"application/json"}

// writeFramed answers a JSON-RPC response over HTTP.
// The frame is written in pieces (the server buffers them): no copy of
// the body.
func writeFramed(w http.ResponseWriter, status int, id json.RawMessage, field string, body []byte) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	var open [64]byte
	head := append(append(append(append(append(open[:0], framePrefix...), id...), `,"`...), field...), `":`...)
	h := w.Header()
	h["Content-Type"] = jsonContentType
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

// frame wraps a result or error object in a JSON-RPC response without
// re-encoding it.
func frame(id json.RawMessage, field string, body []byte) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	out := make([]byte, 0, len(body)+len(id)+32)
	out = append(out, framePrefix...)
	out = append(out, id...)
	out = append(out, `,"`...)
	out = append(out, field...)
	out = append(out, `":`...)
	out = append(out, body...)
	return append(out, '}')
}

func notification(method string, params []byte) []byte {
	out := make([]byte, 0, len(params)+64)
	out = append(out, `{"jsonrpc":"2.0","method":"`...)
	out = append(out, method...)
	out = append(out, `","params":`...)
	out = append(out, params...)
	return append(out, '}')
}

// Middleware serves the dispatcher's methods on the MCP endpoint and
// passes every other request to next. owner names the authenticated
// caller of a request.
func (d *Dispatcher) Middleware(owner func(*http.Request) string, maxBody int64) func(http.Handler) http.Handler {
	d.ownerOf = owner
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				next.ServeHTTP(w, r)
				return
			}
			env, ok := Admitted(r.Context())
			if !ok { // served alone, with no door before it
				if !HostAllowed(r) {
					http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
					return
				}
				if env, r, ok = Admit(w, r, maxBody); !ok {
					return
				}
			}
			path, l := d.route(r, env)
			servedBy(w, path)
			switch path {
			case PathLean: // every outcome answered here: nothing handed back, nothing run twice
				switch {
				case l.tool != nil:
					d.serveTool(w, r, env, l)
				case l.read != nil:
					d.serveRead(w, r, env, l, owner(r))
				default:
					d.serveResource(w, r, env, l, owner(r))
				}
				return
			case PathSDK:
				next.ServeHTTP(w, r)
				return
			}
			edgecount.Handler()
			if env.Req.Method == methodListen {
				d.serveListen(w, r, owner(r), env.Req)
				return
			}
			res, e := d.Call(r.Context(), owner(r), env.Req, r.Header)
			if e != nil {
				WriteError(w, env.Req.ID, e)
				return
			}
			tell(w, 0, false)
			writeFramed(w, http.StatusOK, env.Req.ID, "result", res)
		})
	}
}
