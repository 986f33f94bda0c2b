package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TasksVersion is the first protocol revision with the Tasks extension,
// and the first whose HTTP requests carry the standard headers (SEP-2243).
const TasksVersion = "2026-07-28"

// Version is the protocol revision req is served under. A connection that
// went through initialize (a 2025 stdio session, and go-sdk's stand-in
// session for a pre-2026 HTTP POST, built from MCP-Protocol-Version) keeps
// the version it negotiated, whatever a request's _meta says; otherwise it
// is the request's own _meta protocolVersion, which on HTTP equals the
// header (checked before any handler runs).
func Version(req mcp.Request) string {
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		if ip := ss.InitializeParams(); ip != nil {
			return ip.ProtocolVersion
		}
	}
	if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() { // absent params are typed nils
		v, _ := p.GetMeta()[MetaProtocolVersion].(string)
		return v
	}
	return ""
}

// modern reports whether req is on the 2026-07-28 wire (or later), where
// capabilities come with each request.
func modern(req *mcp.CallToolRequest) bool { return Version(req) >= TasksVersion }

// Declared reports whether a tools/call may be answered with a task: it is
// on the 2026-07-28 wire and its own _meta client capabilities declare the
// Tasks extension. The capabilities of an initialize handshake never count
// (a 2025 client cannot poll tasks/get), nor does anything remembered
// between requests.
func Declared(req *mcp.CallToolRequest) bool {
	m, ok := wireCaps(req)
	if !ok || !modern(req) {
		return false
	}
	ext, _ := m["extensions"].(map[string]any)
	_, obj := ext[ExtensionID].(map[string]any)
	return obj
}

// ElicitationDeclared reports whether the request declared form
// elicitation: on the 2026-07-28 wire in its own _meta only (as Declared),
// before it in the session's capabilities.
func ElicitationDeclared(req *mcp.CallToolRequest) bool {
	if modern(req) {
		m, ok := wireCaps(req)
		if !ok {
			return false
		}
		e, _ := m["elicitation"].(map[string]any)
		return e != nil && (e["form"] != nil || e["url"] == nil)
	}
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && (caps.Elicitation.Form != nil || caps.Elicitation.URL == nil)
}

// CapsJSON returns the request's client capabilities as stored on a task.
// As sent, unless that is larger than maxCapsJSON: then only the fields
// go-sdk knows are kept.
func CapsJSON(req *mcp.CallToolRequest) json.RawMessage {
	if m, ok := wireCaps(req); ok {
		if b, err := json.Marshal(m); err == nil && len(b) <= maxCapsJSON {
			return b
		}
	}
	b, err := json.Marshal(req.ClientCapabilities())
	if err != nil || string(b) == "null" {
		return json.RawMessage("{}")
	}
	return b
}

const maxCapsJSON = 4 << 10

// wireCaps returns the client capabilities as they came off the wire. A
// handler only sees requests whose capabilities go-sdk (or the lean path)
// already decoded successfully, so reading the map directly agrees with
// req.ClientCapabilities(), which re-encodes and decodes _meta on every
// call.
func wireCaps(req *mcp.CallToolRequest) (map[string]any, bool) {
	if req.Params == nil {
		return nil, false
	}
	m, ok := req.Params.Meta[MetaClientCapabilities].(map[string]any)
	return m, ok
}

// ToolOutcome is what a tool that may answer with a task returns (a
// ToolHandler): Task, the task it created, answered with its
// CreateTaskResult; otherwise Result, answered as any tool's result.
type ToolOutcome struct {
	Task   *Task
	Result *mcp.CallToolResult
}

// ToolHandler is a tool handler whose answer may be a task (gentask's
// generate): the lean engine runs it (ServeTool), and go-sdk through
// SDKTool.
type ToolHandler func(ctx context.Context, req *mcp.CallToolRequest) (ToolOutcome, error)

// SDKTool is h as go-sdk's tool handler. go-sdk's handler returns only a
// *CallToolResult, so a task goes up as a *taskCreated error, which
// SDKMiddleware (the receiving middleware right around go-sdk's tool
// call) answers as the flat CreateTaskResult; nothing else sees it.
func (d *Dispatcher) SDKTool(h ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		out, err := h(ctx, req)
		if err == nil && out.Task != nil {
			return nil, &taskCreated{body: d.CreateResult(ctx, out.Task)}
		}
		return out.Result, err
	}
}

// taskCreated carries SDKTool's CreateTaskResult to SDKMiddleware.
type taskCreated struct{ body json.RawMessage }

func (*taskCreated) Error() string { return "tasks: a task answer outside SDKMiddleware" }

type createTaskResult struct {
	mcp.ResultBase
	body json.RawMessage
}

func (c *createTaskResult) MarshalJSON() ([]byte, error) { return c.body, nil }

// SDKMiddleware, for tools/call, sends the task an SDKTool handler
// created as the flat CreateTaskResult and turns an *RPCError into a
// JSON-RPC error; for a pre-2026 client it drops the 2026-only cache
// fields of list results.
func SDKMiddleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method != "tools/call" && err == nil && res != nil {
				return shapeLegacy(req, res), nil
			}
			if method != "tools/call" || err == nil {
				return res, err
			}
			var created *taskCreated
			if errors.As(err, &created) {
				return &createTaskResult{body: created.body}, nil
			}
			var re *RPCError
			if errors.As(err, &re) {
				return nil, re.Wire()
			}
			return res, err
		}
	}
}

// Transport wraps a stdio (or any persistent) transport so that the
// dispatcher serves tasks/* and subscriptions/listen with taskIds on it,
// for owner, before go-sdk sees them.
func (d *Dispatcher) Transport(t mcp.Transport, owner string) mcp.Transport {
	return &transport{inner: t, d: d, owner: owner}
}

type transport struct {
	inner mcp.Transport
	d     *Dispatcher
	owner string
}

func (t *transport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{Connection: c, d: t.d, owner: t.owner, ctx: ctx, cancel: cancel}, nil
}

type conn struct {
	mcp.Connection
	d      *Dispatcher
	owner  string
	ctx    context.Context
	cancel context.CancelFunc
	// listens cancels the open listens by request id.
	listens sync.Map // string -> context.CancelFunc
}

func (c *conn) Close() error {
	c.cancel()
	return c.Connection.Close()
}

func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	return ReadRequests(ctx, c.Connection, func(req *jsonrpc.Request, m *envelope.Message) (bool, error) {
		if req.Method == "notifications/cancelled" {
			c.cancelListen(req.Params)
			return false, nil
		}
		if !Dispatched(m) {
			return false, nil
		}
		go c.serve(req.ID, requestOf(m))
		return true, nil
	})
}

// ReadRequests reads from conn for a wrapping connection's Read: it
// returns the first message that is not a request, or a request that
// take leaves to the layers above (false); a request take answered
// itself (true) is consumed. take gets each request with its one parse
// (envelope.ParseRequest).
func ReadRequests(ctx context.Context, conn mcp.Connection, take func(*jsonrpc.Request, *envelope.Message) (bool, error)) (jsonrpc.Message, error) {
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			return msg, nil
		}
		taken, err := take(req, envelope.ParseRequest(req))
		if err != nil {
			return nil, err
		}
		if !taken {
			return msg, nil
		}
	}
}

func (c *conn) cancelListen(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	if cancel, ok := c.listens.Load(strings.TrimSpace(string(p.RequestID))); ok {
		cancel.(context.CancelFunc)()
	}
}

func (c *conn) serve(id jsonrpc.ID, r *Request) {
	var e *RPCError
	defer func() {
		if v := recover(); v != nil { // a listen's own loop, or anything before Call's guard
			e = Recovered(c.d.opts.Logger, r.Method, "", v)
		}
		if e != nil {
			_ = c.Write(c.ctx, &jsonrpc.Response{ID: id, Error: e.Wire()})
		}
	}()
	edgecount.Handler()
	if r.Method != methodListen {
		var res json.RawMessage
		if res, e = c.d.Call(c.ctx, c.owner, r, nil); e == nil {
			_ = c.Write(c.ctx, &jsonrpc.Response{ID: id, Result: res})
		}
		return
	}
	ids, release, e := c.d.openListen(c.ctx, c.owner, r, nil)
	if e != nil {
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(c.ctx)
	key := string(r.ID)
	c.listens.Store(key, cancel)
	defer func() {
		c.listens.Delete(key)
		cancel()
	}()
	send := func(b []byte) error {
		msg, err := jsonrpc.DecodeMessage(b)
		if err != nil {
			return err
		}
		return c.Write(ctx, msg)
	}
	c.d.listen(ctx, c.owner, r.ID, ids, send, func() error { return nil })
}
