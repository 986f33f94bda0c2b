package tasks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/internal/sse"
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
			case PathLean:
				d.serveLean(w, r, env, l, owner(r))
				return
			case PathSDK:
				next.ServeHTTP(w, r)
				return
			}
			edgecount.Handlers.Add(1)
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

// MaxListenTaskIDs caps the taskIds of one subscriptions/listen: each is
// looked up and subscribed to.
const MaxListenTaskIDs = 1000

// openListen takes one of the caller's open-stream slots (Options.OpenListen)
// for a listen about to stream; release gives it back when it ends.
func (d *Dispatcher) openListen(ctx context.Context, owner string) (release func(), e *RPCError) {
	if d.opts.OpenListen == nil {
		return func() {}, nil
	}
	return d.opts.OpenListen(ctx, owner)
}

// checkListen refuses a listen for more tasks than MaxListenTaskIDs.
func checkListen(p *params) *RPCError {
	if n := len(p.Notifications.TaskIDs); n > MaxListenTaskIDs {
		return invalidParams(fmt.Sprintf("params.notifications.taskIds has %d ids; the limit is %d: listen in several subscriptions", n, MaxListenTaskIDs))
	}
	return nil
}

// serveListen streams notifications/tasks as SSE until the client goes
// away or every listed task has ended.
func (d *Dispatcher) serveListen(w http.ResponseWriter, r *http.Request, owner string, req *Request) {
	p, e := d.parse(req, r.Header)
	if e != nil {
		WriteError(w, req.ID, e)
		return
	}
	release, e := d.openListen(r.Context(), owner)
	if e != nil {
		WriteError(w, req.ID, e)
		return
	}
	defer release()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(msg []byte) error {
		if _, err := io.WriteString(w, "event: message\ndata: "); err != nil {
			return err
		}
		if _, err := w.Write(msg); err != nil {
			return err
		}
		if _, err := io.WriteString(w, "\n\n"); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	keepAlive := func() error {
		_, err := io.WriteString(w, sse.Comment)
		if flusher != nil {
			flusher.Flush()
		}
		return err
	}
	d.listen(r.Context(), owner, req.ID, p.Notifications.TaskIDs, send, keepAlive)
}

// listen runs one subscription: acknowledgement first (listing only the
// caller's own live tasks), then the current state and every change of
// each agreed task, then the closing response once all have ended. The
// taskIds are all it honours: darkroom's lists never change, so it
// declares no listChanged and sends no list or resource notifications;
// other filter keys (toolsListChanged, ...) are left out of the
// acknowledgement and keep no stream open.
func (d *Dispatcher) listen(ctx context.Context, owner string, id json.RawMessage, want []string, send func([]byte) error, keepAlive func() error) {
	agreed := []string{}
	for _, tid := range want {
		if _, err := d.store.Lookup(ctx, owner, tid); err == nil && !slices.Contains(agreed, tid) {
			agreed = append(agreed, tid)
		}
	}
	sub := d.store.broker.subscribe(agreed)
	defer d.store.broker.unsubscribe(sub, agreed)
	subMeta := d.meta(map[string]any{metaSubscriptionID: json.RawMessage(id)})
	ack, _ := json.Marshal(map[string]any{"_meta": subMeta, "notifications": map[string]any{"taskIds": agreed}})
	if send(notification(notificationSubscribed, ack)) != nil {
		return
	}
	live := map[string]bool{}
	for _, tid := range agreed {
		live[tid] = true
	}
	// sent is the state last pushed per task: a wake-up that finds the
	// same state (a resync across replicas, a duplicate signal) sends
	// nothing.
	sent := map[string]stateKey{}
	push := func(ids []string) bool {
		for _, tid := range ids {
			if !live[tid] {
				continue
			}
			t, err := d.store.Lookup(ctx, owner, tid)
			if err != nil {
				delete(live, tid) // expired or purged: nothing more will come
				continue
			}
			k := keyOf(t)
			if sent[tid] == k {
				continue
			}
			sent[tid] = k
			b, err := d.Detailed(ctx, owner, t, subMeta)
			if err != nil || send(notification(notificationTasks, b)) != nil {
				return false
			}
			if t.Status.Terminal() {
				delete(live, tid)
			}
		}
		return true
	}
	if !push(agreed) {
		return
	}
	tick := time.NewTicker(d.opts.KeepAlive)
	defer tick.Stop()
	for len(live) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-sub.wake:
			if !push(sub.take()) {
				return
			}
		case <-tick.C:
			if keepAlive() != nil {
				return
			}
		}
	}
	end, _ := json.Marshal(map[string]any{"resultType": "complete", "_meta": subMeta})
	_ = send(frame(id, "result", end))
}

// stateKey is what distinguishes one pushed state of a task from the
// next.
type stateKey struct {
	status          Status
	updated         time.Time
	message         string
	keySeq          int64
	pending, answer int
}

func keyOf(t *Task) stateKey {
	return stateKey{t.Status, t.LastUpdatedAt, t.StatusMessage, t.KeySeq, len(t.InputRequests), len(t.AnsweredKeys)}
}
