package tasks

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/internal/envelope"
)

func notification(method string, params []byte) []byte {
	out := make([]byte, 0, len(params)+64)
	out = append(out, `{"jsonrpc":"2.0","method":"`...)
	out = append(out, method...)
	out = append(out, `","params":`...)
	out = append(out, params...)
	return append(out, '}')
}

// Serve answers one of the dispatcher's own requests (tasks/*, and
// subscriptions/listen with taskIds: the envelope's Dispatched) on the MCP
// endpoint for owner, the authenticated caller: the request is the one
// the door left in r's context (envelope.From).
func (d *Dispatcher) Serve(w http.ResponseWriter, r *http.Request, owner string) {
	edgecount.Handler()
	env, _ := envelope.From(r.Context())
	req := requestOf(&env.Message)
	if req.Method == methodListen {
		d.serveListen(w, r, owner, req)
		return
	}
	res, e := d.Call(r.Context(), owner, req, r.Header)
	if e != nil {
		envelope.WriteError(w, req.ID, e)
		return
	}
	envelope.Tell(w, 0, false)
	envelope.WriteFramed(w, http.StatusOK, req.ID, "result", res)
}

// requestOf is m as the dispatcher reads it, made on first use and kept
// in m (its Dispatch), so that its params decode once however many
// layers ask (the charge, the route, Serve).
func requestOf(m *envelope.Message) *Request {
	if r, ok := m.Dispatch.(*Request); ok {
		return r
	}
	r := &Request{ID: m.ID, Method: m.Method, Params: m.Params, msg: m}
	m.Dispatch = r
	return r
}

// Dispatched reports a message the dispatcher serves rather than go-sdk:
// a call of tasks/get, tasks/update or tasks/cancel, or a
// subscriptions/listen call that names taskIds.
func Dispatched(m *envelope.Message) bool {
	if !m.Request || !m.Call {
		return false
	}
	return m.Row.Task() || m.Method == methodListen && taskIDs(m) != nil
}

// ListenIDs is the number of task ids a subscriptions/listen asks for (0
// when its params do not decode: the dispatcher then refuses it).
func ListenIDs(m *envelope.Message) int { return len(taskIDs(m)) }

// taskIDs is params.notifications.taskIds as the dispatcher decodes them.
func taskIDs(m *envelope.Message) []string {
	if !m.Request {
		return nil
	}
	if p := requestOf(m).decoded(); p != nil && p.Notifications != nil {
		return p.Notifications.TaskIDs
	}
	return nil
}

// objectKeys are the keys of params whose values the dispatcher decodes
// into structs or maps: where one repeats, the strict decode merges the
// objects, while the raw fields keep only the last.
var objectKeys = [][]byte{[]byte(`"_meta"`), []byte(`"notifications"`), []byte(`"inputResponses"`),
	[]byte(`"` + MetaClientCapabilities + `"`), []byte(`"extensions"`)}

// repeatsObjectKey reports raw params in which one of objectKeys occurs
// twice (or a string holds it: the typed params are then left to the
// dispatcher's own decode, which is only slower).
func repeatsObjectKey(raw []byte) bool {
	for _, k := range objectKeys {
		if i := bytes.Index(raw, k); i >= 0 && bytes.Contains(raw[i+len(k):], k) {
			return true
		}
	}
	return false
}

// typedParams is envelope.Unmarshal(params, &params{}) from the fields
// the one parse kept raw, or nil when that decode could fail or read more.
func typedParams(p *envelope.RawParams, meta *envelope.Meta) *params {
	tp := &params{TaskID: p.TaskID}
	if len(p.Meta) > 0 && string(p.Meta) != "null" {
		tp.Meta = new(paramsMeta)
		if !decodeRaw(meta.ProtocolVersion, &tp.Meta.ProtocolVersion) || !decodeRaw(meta.ClientCapabilities, &tp.Meta.ClientCapabilities) {
			return nil
		}
	}
	if !decodeRaw(p.Notifications, &tp.Notifications) || !decodeRaw(p.InputResponses, &tp.InputResponses) {
		return nil
	}
	return tp
}

// decodeRaw decodes a field one pass kept raw (absent: left as it is) as
// the strict decode of the whole params would.
func decodeRaw(raw json.RawMessage, v any) bool {
	return len(raw) == 0 || envelope.Unmarshal(raw, v) == nil
}
