package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/internal/envelope"
)

// Kind gives meaning to the tasks whose ref starts with its prefix.
type Kind interface {
	// Cancel is asked by tasks/cancel for a live task. It is cooperative:
	// it may end the task at once or leave the outcome to later.
	Cancel(ctx context.Context, t *Task) error
	// Answered is called after tasks/update recorded answers to
	// outstanding input requests (already removed from t.InputRequests).
	Answered(ctx context.Context, t *Task, answers map[string]json.RawMessage) error
	// Result renders the result of a completed task whose row stores none
	// (e.g. one with short-lived links minted per read).
	Result(ctx context.Context, t *Task) (json.RawMessage, error)
}

// JSON-RPC error codes used here.
const (
	CodeInvalidParams       = -32602
	CodeMethodNotFound      = -32601
	CodeInternal            = -32603
	CodeHeaderMismatch      = -32020
	CodeMissingCapability   = -32021
	CodeUnsupportedProtocol = -32022
	MetaProtocolVersion     = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities  = "io.modelcontextprotocol/clientCapabilities"
	metaSubscriptionID      = "io.modelcontextprotocol/subscriptionId"
	MetaServerInfo          = "io.modelcontextprotocol/serverInfo"
	notificationTasks       = "notifications/tasks"
	notificationSubscribed  = "notifications/subscriptions/acknowledged"
	methodGet               = "tasks/get"
	methodUpdate            = "tasks/update"
	methodCancel            = "tasks/cancel"
	methodListen            = "subscriptions/listen"
	defaultKeepAlive        = 15 * time.Second
	notFoundMessage         = "Task not found"
)

// RPCError is a JSON-RPC error with the HTTP status it travels with
// (envelope's, which frames it).
type RPCError = envelope.RPCError

// MissingExtension is the -32021 error for a request that needed the
// Tasks extension but did not declare it.
func MissingExtension() *RPCError {
	return &RPCError{Code: CodeMissingCapability, Message: "Missing required client capability", HTTPStatus: http.StatusBadRequest,
		Data: map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionID: map[string]any{}}}}}
}

func notFound() *RPCError {
	return &RPCError{Code: CodeInvalidParams, Message: notFoundMessage, HTTPStatus: http.StatusOK}
}

// MissingMeta is the -32602 of a request without the required _meta.
func MissingMeta() *RPCError {
	return invalidParams("missing required _meta: " + MetaProtocolVersion + " and " + MetaClientCapabilities)
}

func invalidParams(msg string) *RPCError {
	return &RPCError{Code: CodeInvalidParams, Message: msg, HTTPStatus: http.StatusBadRequest}
}

// Options configure a Dispatcher.
type Options struct {
	Store *Store
	// Versions are the protocol versions served on this wire (default
	// 2026-07-28).
	Versions []string
	// ServerInfo goes into every result's _meta.
	ServerInfo any
	// PollInterval may raise a task's poll interval for the caller (so
	// that a client honouring it never meets a rate limit).
	PollInterval func(ctx context.Context, owner string, base time.Duration) time.Duration
	// OpenListen, when set, is asked before a subscriptions/listen streams
	// (HTTP and stdio alike): it bounds the caller's open streams, and an
	// error it returns is the answer instead. release is called when the
	// stream ends.
	OpenListen func(ctx context.Context, owner string) (release func(), e *RPCError)
	// KeepAlive spaces SSE comments on listen streams (default 15 s,
	// DARKROOM_STREAM_KEEPALIVE).
	KeepAlive time.Duration
	Logger    *slog.Logger
}

// Dispatcher serves tasks/get, tasks/update, tasks/cancel and
// subscriptions/listen with taskIds, below go-sdk: it is the poll hot path,
// so it parses only what it needs and answers with precomputed framing.
type Dispatcher struct {
	opts  Options
	kinds map[string]Kind
	// replies are the encoded replies of tasks/get and the lean reads
	// (Replies).
	replies Replies
	ack     json.RawMessage
	// resultMeta is every result's _meta, encoded once.
	resultMeta json.RawMessage
	// drained is done once Drain ran: every listen stream ends.
	drained context.Context
	drain   context.CancelFunc
}

// NewDispatcher builds a dispatcher over a store.
func NewDispatcher(o Options) *Dispatcher {
	if len(o.Versions) == 0 {
		o.Versions = []string{TasksVersion}
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = defaultKeepAlive
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{opts: o, kinds: map[string]Kind{}, replies: newReplies()}
	d.drained, d.drain = context.WithCancel(context.Background())
	d.resultMeta = d.meta(nil)
	d.ack, _ = json.Marshal(map[string]any{"resultType": "complete", "_meta": d.resultMeta})
	return d
}

// Store returns the dispatcher's store.
func (d *Dispatcher) Store() *Store { return d.opts.Store }

// ServerInfo is Options.ServerInfo: the MCP server's Implementation.
func (d *Dispatcher) ServerInfo() any { return d.opts.ServerInfo }

// Serves reports whether version is one of the protocol versions served
// on this wire (Options.Versions).
func (d *Dispatcher) Serves(version string) bool { return slices.Contains(d.opts.Versions, version) }

// Replies is the dispatcher's cache of encoded replies, which the lean
// engine's keyed reads share.
func (d *Dispatcher) Replies() Replies { return d.replies }

// Register makes k responsible for tasks whose ref starts with prefix+":".
func (d *Dispatcher) Register(prefix string, k Kind) { d.kinds[prefix] = k }

func (d *Dispatcher) kind(t *Task) (Kind, error) {
	prefix, _, _ := strings.Cut(t.Ref, ":")
	k, ok := d.kinds[prefix]
	if !ok {
		return nil, fmt.Errorf("task %s: no kind registered for ref %q", t.ID, t.Ref)
	}
	return k, nil
}

// meta encodes a _meta object: serverInfo plus extra keys.
func (d *Dispatcher) meta(extra map[string]any) json.RawMessage {
	m := map[string]any{}
	if d.opts.ServerInfo != nil {
		m[MetaServerInfo] = d.opts.ServerInfo
	}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

// Request is a JSON-RPC request as the dispatcher needs it.
type Request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	// msg is the one parse's message (requestOf), nil for a request made
	// otherwise; typed holds the params already decoded, undecodable
	// notes params that do not decode.
	msg         *envelope.Message
	typed       *params
	undecodable bool
}

// decoded is the request's params as the dispatcher reads them: built
// from the raw fields the one parse kept (typedParams) or, where those
// cannot stand for them (odd bodies: a repeated object key, a value of an
// unexpected type), a strict decode of their own, counted as a second
// parse; nil when they do not decode.
func (r *Request) decoded() *params {
	if r.typed == nil && !r.undecodable {
		r.typed = r.fromParse()
	}
	if r.typed == nil && !r.undecodable {
		edgecount.Parses.Add(1)
		p := new(params)
		if len(r.Params) == 0 || envelope.Unmarshal(r.Params, p) != nil {
			r.undecodable = true
			return nil
		}
		r.typed = p
	}
	return r.typed
}

// fromParse is typedParams over the raw fields the one parse kept, nil
// where they cannot stand for the params.
func (r *Request) fromParse() *params {
	m := r.msg
	if m == nil || m.Fields == nil || !m.MetaOK || repeatsObjectKey(r.Params) {
		return nil
	}
	return typedParams(m.Fields, &m.Meta)
}

type clientCaps struct {
	// Extensions is read for one key only: a struct, not a map, so that
	// decoding it allocates nothing (the last duplicate still wins).
	Extensions struct {
		Tasks json.RawMessage `json:"io.modelcontextprotocol/tasks"`
	} `json:"extensions"`
}

type params struct {
	Meta           *paramsMeta                `json:"_meta"`
	TaskID         json.RawMessage            `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	Notifications  *struct {
		TaskIDs []string `json:"taskIds"`
	} `json:"notifications"`
}

type paramsMeta struct {
	ProtocolVersion    *string     `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities *clientCaps `json:"io.modelcontextprotocol/clientCapabilities"`
}

func (c *clientCaps) hasExtension() bool {
	v := c.Extensions.Tasks
	return len(v) > 0 && v[0] == '{'
}

// parse decodes and checks params in the spec's order: _meta, then
// headers (HTTP only), version, then the extension.
func (d *Dispatcher) parse(req *Request, headers http.Header) (*params, *RPCError) {
	p := req.decoded()
	if p == nil {
		return nil, invalidParams("params must be an object with _meta")
	}
	if p.Meta == nil || p.Meta.ProtocolVersion == nil || p.Meta.ClientCapabilities == nil {
		return nil, MissingMeta()
	}
	if headers != nil {
		if e := checkHeaders(headers, req.Method, *p.Meta.ProtocolVersion, p.TaskID); e != nil {
			return nil, e
		}
	}
	if !slices.Contains(d.opts.Versions, *p.Meta.ProtocolVersion) {
		return nil, &RPCError{Code: CodeUnsupportedProtocol, Message: "Unsupported protocol version", HTTPStatus: http.StatusBadRequest,
			Data: map[string]any{"supported": d.opts.Versions, "requested": *p.Meta.ProtocolVersion}}
	}
	if !p.Meta.ClientCapabilities.hasExtension() {
		return nil, MissingExtension()
	}
	if req.Method == methodListen && p.Notifications != nil {
		if e := checkListen(p); e != nil {
			return nil, e
		}
	}
	return p, nil
}

// HeaderMismatch is the -32020 of a request whose SEP-2243 headers
// disagree with its body.
func HeaderMismatch(msg string) *RPCError {
	return &RPCError{Code: CodeHeaderMismatch, Message: "Header mismatch: " + msg, HTTPStatus: http.StatusBadRequest}
}

// checkHeaders applies SEP-2243 to the tasks methods: MCP-Protocol-Version
// and Mcp-Method must match the body; tasks/* also need Mcp-Name equal to
// params.taskId. The door (server/edge's checkEnvelopeHeaders) passed
// the request: this decides only what it passes as an earlier era and a
// base64 MCP-Protocol-Version, which get -32020 here, not the version's
// -32022.
func checkHeaders(h http.Header, method, version string, rawTaskID json.RawMessage) *RPCError {
	if v := envelope.DecodeHeader(h.Get("Mcp-Protocol-Version")); v != version {
		return HeaderMismatch(fmt.Sprintf("MCP-Protocol-Version %q does not match _meta protocolVersion %q", v, version))
	}
	if m := envelope.DecodeHeader(h.Get("Mcp-Method")); m != method {
		return HeaderMismatch(fmt.Sprintf("Mcp-Method %q does not match method %q", m, method))
	}
	if method == methodListen {
		return nil
	}
	id, _ := envelope.RawString(rawTaskID)
	if n := envelope.DecodeHeader(h.Get("Mcp-Name")); n != id {
		return HeaderMismatch(fmt.Sprintf("Mcp-Name %q does not match params.taskId", n))
	}
	return nil
}

// Call serves one unary method for owner and returns the result object.
// headers is nil off HTTP (stdio), where no header checks apply.
func (d *Dispatcher) Call(ctx context.Context, owner string, req *Request, headers http.Header) (_ json.RawMessage, e *RPCError) {
	defer func() {
		if v := recover(); v != nil {
			e = Recovered(d.opts.Logger, req.Method, "", v)
		}
	}()
	p, e := d.parse(req, headers)
	if e != nil {
		return nil, e
	}
	id, ok := envelope.RawString(p.TaskID)
	if !ok || id == "" {
		return nil, invalidParams("params.taskId must be a non-empty string")
	}
	switch req.Method {
	case methodGet:
		return d.get(ctx, owner, id)
	case methodUpdate:
		if p.InputResponses == nil {
			return nil, invalidParams("params.inputResponses must be an object")
		}
		return d.update(ctx, owner, id, p.InputResponses)
	case methodCancel:
		return d.cancel(ctx, owner, id)
	}
	return nil, &RPCError{Code: CodeMethodNotFound, Message: "Method not found", HTTPStatus: http.StatusNotFound}
}

func (d *Dispatcher) lookup(ctx context.Context, method, owner, id string) (*Task, *RPCError) {
	t, err := d.opts.Store.Lookup(ctx, owner, id)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound()
	}
	if err != nil {
		return nil, Internal(ctx, d.opts.Logger, method, "", err)
	}
	return t, nil
}

// poll sets t's poll interval to owner's (Options.PollInterval).
func (d *Dispatcher) poll(ctx context.Context, owner string, t *Task) {
	if d.opts.PollInterval != nil {
		t.PollInterval = d.opts.PollInterval(ctx, owner, t.PollInterval)
	}
}

// render renders the DetailedTask for t (its poll interval already the
// caller's) as tasks/get returns it (meta nil), or, with a subscription's
// encoded meta, as notifications/tasks params (which are not a result, so
// carry no resultType).
func (d *Dispatcher) render(ctx context.Context, t *Task, meta json.RawMessage) (json.RawMessage, error) {
	var result json.RawMessage
	if t.Status == StatusCompleted {
		result = t.Result
		if len(result) == 0 {
			k, err := d.kind(t)
			if err != nil {
				return nil, err
			}
			if result, err = k.Result(ctx, t); err != nil {
				return nil, err
			}
		}
	}
	w := t.detailed(result)
	w.Meta = d.resultMeta
	if meta != nil {
		w.ResultType, w.Meta = "", meta
	}
	return json.Marshal(w)
}

func (d *Dispatcher) get(ctx context.Context, owner, id string) (json.RawMessage, *RPCError) {
	t, e := d.lookup(ctx, methodGet, owner, id)
	if e != nil {
		return nil, e
	}
	d.poll(ctx, owner, t)
	// A completed task whose result is rendered per read (fresh links)
	// is rendered each time; any other state encodes to the same bytes
	// until it changes, so a poll reuses them.
	perRead := t.Status == StatusCompleted && len(t.Result) == 0
	key := detailKey{state: keyOf(t), poll: t.PollInterval}
	slot := ReplySlot{ID: id, Kind: 't', Modern: true}
	if !perRead {
		if b, ok := d.replies.Get(slot, key); ok {
			return b, nil
		}
	}
	b, err := d.render(ctx, t, nil)
	if err != nil {
		return nil, Internal(ctx, d.opts.Logger, methodGet, "", err)
	}
	if !perRead {
		d.replies.Put(slot, key, b)
	}
	return b, nil
}

// detailKey is what a task's encoded tasks/get result depends on besides
// its immutable fields: its state (terminal results and errors never
// change after the status that carries them) and the caller's poll
// interval.
type detailKey struct {
	state stateKey
	poll  time.Duration
}

func (d *Dispatcher) update(ctx context.Context, owner, id string, responses map[string]json.RawMessage) (json.RawMessage, *RPCError) {
	t, taken, err := d.opts.Store.answer(ctx, owner, id, responses)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound()
	}
	if err != nil {
		return nil, Internal(ctx, d.opts.Logger, methodUpdate, "", err)
	}
	if len(taken) > 0 {
		d.opts.Store.Notify(id)
		k, err := d.kind(t)
		if err != nil {
			return nil, Internal(ctx, d.opts.Logger, methodUpdate, "", err)
		}
		if err := k.Answered(ctx, t, taken); err != nil {
			d.opts.Logger.Error("tasks: apply answers", "task", id, "err", err)
		}
	}
	return d.ack, nil
}

func (d *Dispatcher) cancel(ctx context.Context, owner, id string) (json.RawMessage, *RPCError) {
	t, e := d.lookup(ctx, methodCancel, owner, id)
	if e != nil {
		return nil, e
	}
	if t.Status.Terminal() {
		return d.ack, nil // idempotent
	}
	k, err := d.kind(t)
	if err != nil {
		return nil, Internal(ctx, d.opts.Logger, methodCancel, "", err)
	}
	if err := k.Cancel(ctx, t); err != nil {
		return nil, Internal(ctx, d.opts.Logger, methodCancel, "", err)
	}
	return d.ack, nil
}

// CreateResult renders a CreateTaskResult: the flat task with
// resultType "task", nothing status-specific.
func (d *Dispatcher) CreateResult(ctx context.Context, t *Task) json.RawMessage {
	d.poll(ctx, t.Owner, t)
	w := t.wire("task")
	w.Meta = d.resultMeta
	b, _ := json.Marshal(w)
	return b
}
