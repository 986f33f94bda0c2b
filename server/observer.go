package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/internal/methods"
	"github.com/darkroom-mcp/darkroom/metrics"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Observer counts, times and (at debug) logs every MCP request, on both
// transports. Labels are bounded: an unknown method or tool is "other".
type Observer struct {
	Metrics *metrics.Set
	Log     *slog.Logger
	// Tools are the tool names used as label values; ToolClass is their
	// rate class (gentools.RateClass), to name the limit behind a 429.
	Tools     []string
	ToolClass func(string) string

	inFlight atomic.Int64
}

// InFlight is the number of requests being answered.
func (o *Observer) InFlight() int64 { return o.inFlight.Load() }

func (o *Observer) labels(method, tool string) (string, string) {
	switch {
	case method == "":
		method = "unknown"
	case method == "batch":
	default:
		if _, listed := methods.Lookup(method); !listed {
			method = "other" // labels are bounded: the registry's methods
		}
	}
	if method != "tools/call" {
		return method, ""
	}
	if !slices.Contains(o.Tools, tool) {
		tool = "other"
	}
	return method, tool
}

const listenMethod = "subscriptions/listen"

// HTTP wraps the MCP endpoint. A request is labelled from its parsed
// body (admit tells the recorder, observe), never from its Mcp-Method or
// Mcp-Name headers, which a client may set to anything; a request refused
// before its body is read (Host, authentication) is "unknown". Its
// outcome is what whoever answered told the recorder, or what the door
// knows (the HTTP status): no reply is read.
func (o *Observer) HTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		o.inFlight.Add(1)
		defer o.inFlight.Add(-1)
		rec := &respRecorder{ResponseWriter: w, obs: o}
		next.ServeHTTP(rec, r)
		if r.Method != http.MethodPost {
			return // GET/DELETE on the stateless endpoint: not a JSON-RPC request
		}
		method, tool := o.labels(rec.method, rec.tool)
		if rec.code() == http.StatusTooManyRequests {
			o.Metrics.RateLimited(o.rateClass(rec))
		}
		path := rec.path
		if path == "" {
			path = "edge" // answered before the dispatcher routed it (Host, auth, admission)
		}
		o.record(r.Context(), "http", method, tool, path, rec.outcome(), start, "status", rec.code(), "remote", r.RemoteAddr)
	})
}

// record counts and (at debug) logs one answered request.
func (o *Observer) record(ctx context.Context, transport, method, tool string, path envelope.Path, outcome string, start time.Time, attrs ...any) {
	d := time.Since(start)
	o.Metrics.Request(transport, method, tool, outcome, d)
	o.Metrics.ServedBy(transport, string(path))
	if o.Log != nil && o.Log.Enabled(ctx, slog.LevelDebug) {
		o.Log.Debug("request", append([]any{"transport", transport, "method", method, "tool", tool, "path", string(path),
			"outcome", outcome, "ms", float64(d.Microseconds()) / 1000}, attrs...)...)
	}
}

// observe tells w's metrics recorder, if any, the body admit parsed, and
// returns what to call once it has been served (a listen stream's count).
func observe(w http.ResponseWriter, env *envelope.Envelope) func() {
	rec, ok := w.(*respRecorder)
	switch {
	case !ok:
		return func() {}
	case env.IsBatch:
		rec.method = "batch"
	default:
		rec.method, rec.tool = env.Method, env.Name
	}
	env.Recorder = rec // go-sdk's path tells it there (recordOutcome)
	if rec.method != listenMethod {
		return func() {}
	}
	return rec.obs.Metrics.ListenOpened("http")
}

// rateClass names the limit behind a 429: the one its writer named (the
// guess guard's preauth: limitedAs), else the method's row in
// internal/methods (ClassOf, as charged).
func (o *Observer) rateClass(rec *respRecorder) string {
	switch {
	case rec.class != "":
		return rec.class
	case rec.method == "":
		return "other" // refused before its body was read
	}
	return ClassOf(rec.method, rec.tool, o.ToolClass)
}

// limitedAs tells w's metrics recorder, if any, the rate class of a 429
// answered before the body names one.
func limitedAs(w http.ResponseWriter, class string) {
	if rec, ok := w.(*respRecorder); ok {
		rec.class = class
	}
}

// respRecorder keeps the status and the outcome whoever answered told it
// (envelope.Outcome: the dispatcher, the lean engine, and on go-sdk's path
// recordOutcome). It never reads the reply.
type respRecorder struct {
	http.ResponseWriter
	obs *Observer
	// method and tool are the parsed body's (observe); path is the
	// engine that answered (envelope.Outcome's ServedBy); class is a 429's
	// rate class as its writer named it (limitedAs).
	method, tool, class string
	path                envelope.Path
	status              int
	// mu guards what go-sdk's handlers tell (ran, verdict) while an SSE
	// keep-alive may be writing.
	mu      sync.Mutex
	ran     bool
	verdict string
}

func (r *respRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *respRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// The dispatcher tells the recorder what it answers (envelope.Outcome).
var _ envelope.Outcome = (*respRecorder)(nil)

// RPCOutcome is envelope.Outcome: whoever answers says what.
func (r *respRecorder) RPCOutcome(code int64, isError bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.verdict != "" && r.method == "batch" {
		return // a batch is labelled by its first answer
	}
	switch {
	case code != 0:
		r.verdict = ErrorClass(code)
	case isError:
		r.verdict = "tool_error"
	default:
		r.verdict = "ok"
	}
}

// ServedBy is envelope.Outcome: the dispatcher names the engine that answers.
func (r *respRecorder) ServedBy(p envelope.Path) { r.path = p }

// handlerRan notes that go-sdk called a handler (recordOutcome).
func (r *respRecorder) handlerRan() {
	r.mu.Lock()
	r.ran = true
	r.mu.Unlock()
}

func (r *respRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *respRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *respRecorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// outcome is the request's outcome label: a refusal by its HTTP status
// (edge.Admit's body errors and header mismatches, authentication,
// the 429s, go-sdk's own refusals on 2026-07-28: 400 or 404), else what
// the answerer told. What go-sdk answers in a 200 before any handler
// runs is told by no one: in go-sdk v1.8.0 that is its session's
// refusals (ServerSession.handle, handleReceive), nearly all params that
// do not decode; a method it does not know is refused 400 or 404 before
// (streamable.go, checkRequest). (A method refused only on this era,
// server/discover before 2026-07-28, is labelled invalid params too.)
func (r *respRecorder) outcome() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch c := r.code(); {
	case c == 401 || c == 403 || c == 413 || c == 429:
		return "http_" + strconv.Itoa(c)
	case c >= 500:
		return "http_5xx"
	case c >= 400:
		return "http_4xx"
	case r.verdict != "":
		return r.verdict
	case c == http.StatusAccepted || r.ran || r.path == envelope.PathLean || r.path == envelope.PathTasks:
		return "ok" // a notification, or a stream that ended without its response (drain, client gone)
	}
	return "rpc_invalid_params"
}

// ErrorClass names a JSON-RPC error code's class.
func ErrorClass(code int64) string {
	if c, ok := rpcClasses[code]; ok {
		return c
	}
	if code <= -32000 && code >= -32099 {
		return "rpc_server_error"
	}
	return "rpc_error_other"
}

var rpcClasses = map[int64]string{-32700: "rpc_parse_error", -32600: "rpc_invalid_request", -32601: "rpc_method_not_found",
	-32602: "rpc_invalid_params", -32603: "rpc_internal_error", -31429: "rpc_rate_limited"}

// Transport wraps a persistent transport (stdio) so that every request on
// it is counted as the HTTP ones are. Wrap the raw transport, inside the
// tasks dispatcher's, so both its answers and go-sdk's pass through.
func (o *Observer) Transport(t mcp.Transport) mcp.Transport {
	return &obsTransport{t, o}
}

type obsTransport struct {
	mcp.Transport
	o *Observer
}

func (t *obsTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &obsConn{Connection: c, o: t.o, pending: map[jsonrpc.ID]pending{}}, nil
}

type pending struct {
	method, tool string
	path         envelope.Path
	start        time.Time
	closeListen  func()
}

type obsConn struct {
	mcp.Connection
	o       *Observer
	mu      sync.Mutex
	pending map[jsonrpc.ID]pending
}

func (c *obsConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.IsCall() {
		m := envelope.ParseRequest(req) // the one parse, which the layers below read too
		method, tool := c.o.labels(req.Method, m.Name)
		p := pending{method: method, tool: tool, path: envelope.PathSDK, start: time.Now()}
		if tasks.Dispatched(m) {
			p.path = envelope.PathTasks // the dispatcher's transport serves it
		}
		if req.Method == listenMethod {
			p.closeListen = c.o.Metrics.ListenOpened("stdio")
		}
		c.o.inFlight.Add(1)
		c.mu.Lock()
		c.pending[req.ID] = p
		c.mu.Unlock()
	}
	return msg, err
}

// resultIsError reports a tools/call result whose own isError is true. On
// stdio no handler can tell the pending entry (go-sdk v1.8.0 keeps a
// request's id in an unexported context key and hands a handler only an
// *mcp.RequestExtra from jsonrpc.Request.Extra), so the result is
// scanned, not decoded: for the key at depth 1 outside strings (nested in
// structured output it is the tool's own), and only when its bytes occur.
func resultIsError(b []byte) bool {
	if !bytes.Contains(b, isErrorTrue) {
		return false
	}
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case inString:
			inString = c != '"'
		case c == '"':
			if depth == 1 && bytes.HasPrefix(b[i:], isErrorTrue) {
				return true
			}
			inString = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

var isErrorTrue = []byte(`"isError":true`)

func (c *obsConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return err
	}
	c.mu.Lock()
	p, found := c.pending[resp.ID]
	delete(c.pending, resp.ID)
	c.mu.Unlock()
	if !found {
		return err
	}
	c.o.inFlight.Add(-1)
	if p.closeListen != nil {
		p.closeListen()
	}
	outcome := "ok"
	var we *jsonrpc.Error
	switch {
	case errors.As(resp.Error, &we):
		outcome = ErrorClass(we.Code)
	case resp.Error != nil:
		outcome = "rpc_internal_error"
	case p.method == "tools/call" && resultIsError(resp.Result):
		outcome = "tool_error"
	}
	c.o.record(ctx, "stdio", p.method, p.tool, p.path, outcome, p.start)
	return err
}

// QuietSDK returns a logger for go-sdk: its per-session chatter (server
// connecting, session connected, disconnected: one of each per stateless
// HTTP request) goes to debug; warnings and errors stay as they are.
func QuietSDK(l *slog.Logger) *slog.Logger {
	if l == nil {
		return nil
	}
	return slog.New(demote{l.Handler()})
}

type demote struct{ h slog.Handler }

func (d demote) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return d.h.Enabled(ctx, l)
}

func (d demote) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug
	}
	return d.h.Handle(ctx, r)
}

func (d demote) WithAttrs(a []slog.Attr) slog.Handler { return demote{d.h.WithAttrs(a)} }
func (d demote) WithGroup(n string) slog.Handler      { return demote{d.h.WithGroup(n)} }
