package tasks

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeTool lets the dispatcher run the named tool's handler itself, below
// go-sdk, for a tools/call that declared the Tasks extension: durable
// creation is a hot path, and go-sdk's generic tools/call costs about a
// millisecond of CPU per call, several times the creation itself.
//
// The dispatcher keeps the handler's answer only when it created a task
// (AnswerTask) or is an *RPCError. Any other answer is dropped and the
// request handed to go-sdk, which runs the handler again and encodes that
// answer itself. So h must change nothing unless it creates a task. A
// request the dispatcher is not sure go-sdk would accept as it stands
// (other versions, odd headers, MRTR retries) goes to go-sdk untouched.
// The tool must not declare x-mcp-header parameters, and h must not modify
// req.Params.Meta (requests with the same _meta share it).
func (d *Dispatcher) ServeTool(name string, h mcp.ToolHandler) {
	if d.tools == nil {
		d.tools = map[string]mcp.ToolHandler{}
	}
	d.tools[name] = d.guardTool(name, h)
}

const methodToolsCall = "tools/call"

// serveTool runs a Tasks client's create (route chose it), and reports
// false, with nothing written, when its handler answered without creating
// a task: go-sdk then serves the request.
func (d *Dispatcher) serveTool(w http.ResponseWriter, r *http.Request, env *Envelope, l *leanCall) bool {
	ctx, slot := withAnswer(r.Context())
	_, herr := l.tool(ctx, l.call)
	var re *RPCError
	switch {
	case slot.task != nil:
		tell(w, 0, false)
		writeFramed(w, http.StatusOK, env.ID, "result", slot.task)
	case errors.As(herr, &re):
		WriteError(w, env.ID, re)
	default: // an answer that changed nothing: go-sdk gives it again
		return false
	}
	return true
}

const metaClientInfo = "io.modelcontextprotocol/clientInfo"

// metaCache holds the _meta objects clients send, decoded, keyed by their
// bytes: a client sends the same one on every call, and decoding and
// checking it is a good part of a call's cost. Only objects go-sdk would
// accept are kept, at most metaCacheMax; the maps are shared between
// requests and never modified.
type metaCache struct {
	mu sync.RWMutex
	m  map[string]map[string]any
}

const metaCacheMax = 1024

// get returns raw decoded, or nil when go-sdk would refuse it.
func (c *metaCache) get(raw json.RawMessage) map[string]any {
	var m map[string]any
	if caches.On(caches.RequestMeta) {
		c.mu.RLock()
		cached, ok := c.m[string(raw)]
		c.mu.RUnlock()
		if ok {
			return cached
		}
	}
	if json.Unmarshal(raw, &m) != nil || !sdkWouldDecode(m) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= metaCacheMax {
		c.m = map[string]map[string]any{} // bounded: at worst, decode again
	}
	c.m[string(raw)] = m
	return m
}

// sdkWouldDecode reports whether go-sdk accepts a request's _meta: the
// client capabilities decode into its ClientCapabilities (with the 2026
// roots shape) and clientInfo, if present, into an Implementation: the
// checks go-sdk makes on every request, made here once per distinct _meta.
func sdkWouldDecode(meta map[string]any) bool {
	var caps struct {
		mcp.ClientCapabilities
		//lint:ignore SA1019 go-sdk still decodes roots (deprecated, served for twelve months): so must this check
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}
	if !redecode(meta[metaClientCapabilities], &caps) {
		return false
	}
	info, ok := meta[metaClientInfo]
	return !ok || (info != nil && redecode(info, new(mcp.Implementation)))
}

func redecode(v any, into any) bool {
	b, err := json.Marshal(v)
	return err == nil && json.Unmarshal(b, into) == nil
}

// sdkWouldAcceptHTTP reports whether go-sdk's stateless Streamable HTTP
// handler lets a POST through: the headers and Host it checks before
// reading the message.
func sdkWouldAcceptHTTP(r *http.Request) bool {
	if r.Header.Get("Last-Event-ID") != "" {
		return false
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" { // the usual value, without a parse
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return false
		}
	}
	accept := r.Header.Values("Accept")
	// The usual value is accepted without splitting it.
	usual := len(accept) == 1 && accept[0] == "application/json, text/event-stream"
	jsonOK, streamOK := usual, usual
	for _, v := range accept {
		if usual {
			break
		}
		for tok := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(tok, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	// go-sdk's DNS-rebinding guard is Admit's (HostAllowed), which ran
	// before: a request it refuses never reaches here.
	return jsonOK && streamOK
}
