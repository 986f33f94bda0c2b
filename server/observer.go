package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/methods"
	"github.com/darkroom-mcp/darkroom/metrics"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	sjson "github.com/segmentio/encoding/json"
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

	tools    map[string]bool
	once     sync.Once
	inFlight atomic.Int64
}

func (o *Observer) init() {
	o.once.Do(func() {
		o.tools = map[string]bool{}
		for _, t := range o.Tools {
			o.tools[t] = true
		}
		if o.Log == nil {
			o.Log = slog.New(slog.DiscardHandler)
		}
		if o.ToolClass == nil {
			o.ToolClass = func(string) string { return "" }
		}
	})
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
	if !o.tools[tool] {
		tool = "other"
	}
	return method, tool
}

const listenMethod = "subscriptions/listen"

// HTTP wraps the MCP endpoint. A request is labelled from its parsed
// body (admit tells the recorder, rpcEnvelope), never from its
// Mcp-Method or Mcp-Name headers, which a client may set to anything; a
// request refused before its body is read (Host, authentication) is
// "unknown".
func (o *Observer) HTTP(next http.Handler) http.Handler {
	o.init()
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
		outcome, noID := rec.outcome()
		if rec.status == http.StatusTooManyRequests {
			o.Metrics.RateLimited(o.rateClass(rec.method, rec.tool, noID))
		}
		d := time.Since(start)
		path := string(rec.path)
		if path == "" {
			path = "edge" // answered before the dispatcher routed it (Host, auth, admission)
		}
		o.Metrics.Request("http", method, tool, outcome, d)
		o.Metrics.ServedBy("http", path)
		if o.Log.Enabled(r.Context(), slog.LevelDebug) {
			o.Log.Debug("request", "transport", "http", "method", method, "tool", tool, "path", path, "outcome", outcome,
				"status", rec.code(), "ms", float64(d.Microseconds())/1000, "remote", r.RemoteAddr)
		}
	})
}

// envelopeSeen is the metrics recorder as admit sees it: told the body
// tasks.Admit parsed, it returns the request to serve and what to call
// when it has been served (a listen stream's count).
type envelopeSeen interface {
	rpcEnvelope(r *http.Request, env *tasks.Envelope) (*http.Request, func())
}

func (rec *respRecorder) rpcEnvelope(r *http.Request, env *tasks.Envelope) (*http.Request, func()) {
	env.Recorder = rec // go-sdk's path tells it there (recordOutcome)
	if env.IsBatch {
		rec.method = "batch"
		return r, func() {}
	}
	rec.method, rec.tool = env.Method, env.Name
	if env.Method != listenMethod || rec.obs == nil {
		return r, func() {}
	}
	return r, rec.obs.Metrics.ListenOpened("http")
}

// observed tells w's metrics recorder, if any, the body admit parsed.
func observed(w http.ResponseWriter, r *http.Request, env *tasks.Envelope) (*http.Request, func()) {
	if s, ok := w.(envelopeSeen); ok {
		return s.rpcEnvelope(r, env)
	}
	return r, func() {}
}

// rateClass names the limit behind a 429: the guess guard answers with
// no request id, the per-caller limits with the request's, whose class
// is the method's row in internal/methods (ClassOf, as charged).
func (o *Observer) rateClass(method, tool string, noID bool) string {
	switch {
	case noID:
		return "preauth"
	case method == "":
		return "other" // refused before its body was read
	}
	return ClassOf(method, tool, o.ToolClass)
}

// respRecorder keeps the status and the outcome whoever answered told it
// (tasks.Outcome: the dispatcher, and on go-sdk's path recordOutcome).
// Only what go-sdk answers before any handler runs (an unknown method,
// params that do not decode) and the door's refusals are read from the
// body, at most sniffMax bytes of it.
type respRecorder struct {
	http.ResponseWriter
	obs *Observer
	// method and tool are the parsed body's (rpcEnvelope); path is the
	// engine that answered (tasks.Outcome's ServedBy).
	method, tool string
	path         tasks.Path
	status       int
	sse          bool
	// mu guards the outcome: go-sdk's handler tells it while an SSE
	// keep-alive may be writing.
	mu      sync.Mutex
	decided bool
	verdict string
	noID    bool
	buf     []byte
}

// sniffMax bounds what is kept of a reply no one told the outcome of:
// go-sdk's own refusals, a few hundred bytes.
const sniffMax = 64 << 10

func (r *respRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		r.sse = strings.HasPrefix(r.Header().Get("Content-Type"), "text/event-stream")
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *respRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	r.mu.Lock()
	if !r.decided {
		r.sniff(b)
	}
	r.mu.Unlock()
	return r.ResponseWriter.Write(b)
}

// The dispatcher tells the recorder what it answers (tasks.Outcome).
var _ tasks.Outcome = (*respRecorder)(nil)

// RPCOutcome is tasks.Outcome: the dispatcher says what it answers, so
// the body is not parsed again.
func (r *respRecorder) RPCOutcome(code int64, isError bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.decided && r.method == "batch" {
		return // a batch is labelled by its first answer
	}
	r.decided, r.noID, r.buf = true, false, nil
	switch {
	case code != 0:
		r.verdict = ErrorClass(code)
	case isError:
		r.verdict = "tool_error"
	default:
		r.verdict = "ok"
	}
}

// ServedBy is tasks.Outcome: the dispatcher names the engine that answers.
func (r *respRecorder) ServedBy(p tasks.Path) { r.path = p }

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

func (r *respRecorder) sniff(b []byte) {
	if len(r.buf)+len(b) > sniffMax {
		r.decided, r.verdict = true, "ok" // too large to read: a result
		r.buf = nil
		return
	}
	r.buf = append(r.buf, b...)
	if !r.sse {
		return // decided at the end
	}
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimRight(r.buf[:i], "\r")
		r.buf = r.buf[i+1:]
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if bytes.HasPrefix(data, []byte(`{"jsonrpc":"2.0","method"`)) {
			continue // a notification
		}
		if v, noID, ok := rpcVerdict(data); ok {
			r.decided, r.verdict, r.noID, r.buf = true, v, noID, nil
			return
		}
	}
}

// outcome is the request's outcome label and whether its reply named no
// request id.
func (r *respRecorder) outcome() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch c := r.code(); {
	case c == 401 || c == 403 || c == 413 || c == 429:
		_, noID, _ := rpcVerdict(r.buf)
		return "http_" + strconv.Itoa(c), noID
	case c >= 500:
		return "http_5xx", false
	case c >= 400:
		return "http_4xx", false
	case c == http.StatusAccepted:
		return "ok", false
	}
	if r.decided {
		return r.verdict, r.noID
	}
	if !r.sse {
		if v, noID, ok := rpcVerdict(bytes.TrimSpace(r.buf)); ok {
			return v, noID
		}
	}
	return "ok", false // a stream that ended without its response (drain, client gone)
}

// rpcVerdict classifies one JSON-RPC response: ok, tool_error or
// rpc_<class>; ok is false when b is not a response.
func rpcVerdict(b []byte) (verdict string, noID bool, ok bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	// segmentio's decoder (go-sdk's own) skips the result's content
	// several times faster than encoding/json: this runs on every reply.
	if len(b) == 0 || sjson.Unmarshal(b, &m) != nil {
		return "", false, false
	}
	noID = len(m.ID) == 0 || string(m.ID) == "null"
	switch {
	case m.Error != nil:
		return ErrorClass(m.Error.Code), noID, true
	case m.Result != nil && m.Result.IsError:
		return "tool_error", noID, true
	case m.Result != nil:
		return "ok", noID, true
	}
	return "", noID, false
}

// ErrorClass names a JSON-RPC error code's class.
func ErrorClass(code int64) string {
	switch {
	case code == -32700:
		return "rpc_parse_error"
	case code == -32600:
		return "rpc_invalid_request"
	case code == -32601:
		return "rpc_method_not_found"
	case code == -32602:
		return "rpc_invalid_params"
	case code == -32603:
		return "rpc_internal_error"
	case code == -31429:
		return "rpc_rate_limited"
	case code <= -32000 && code >= -32099:
		return "rpc_server_error"
	}
	return "rpc_error_other"
}

// Transport wraps a persistent transport (stdio) so that every request on
// it is counted as the HTTP ones are. Wrap the raw transport, inside the
// tasks dispatcher's, so both its answers and go-sdk's pass through.
func (o *Observer) Transport(t mcp.Transport) mcp.Transport {
	o.init()
	return &obsTransport{inner: t, o: o}
}

type obsTransport struct {
	inner mcp.Transport
	o     *Observer
}

func (t *obsTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &obsConn{Connection: c, o: t.o, pending: map[jsonrpc.ID]pending{}}, nil
}

type pending struct {
	method, tool string
	path         tasks.Path
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
		m := tasks.ParseRequest(req) // the one parse, which the layers below read too
		name := ""
		if req.Method == "tools/call" {
			name = m.Name
		}
		method, tool := c.o.labels(req.Method, name)
		p := pending{method: method, tool: tool, path: tasks.PathSDK, start: time.Now()}
		if m.Dispatched() {
			p.path = tasks.PathTasks // the dispatcher's transport serves it
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
	case p.method == "tools/call":
		if v, _, ok := rpcVerdict(append(append([]byte(`{"id":1,"result":`), resp.Result...), '}')); ok {
			outcome = v
		}
	}
	d := time.Since(p.start)
	c.o.Metrics.Request("stdio", p.method, p.tool, outcome, d)
	c.o.Metrics.ServedBy("stdio", string(p.path))
	if c.o.Log.Enabled(ctx, slog.LevelDebug) {
		c.o.Log.Debug("request", "transport", "stdio", "method", p.method, "tool", p.tool, "path", string(p.path), "outcome", outcome,
			"ms", float64(d.Microseconds())/1000)
	}
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
