package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/internal/sse"
)

// Drain ends every open listen stream, on every transport, now and from
// now on (a stream opened afterwards ends at once): the server is
// shutting down and its clients should listen on the next one. The
// dispatcher owns the streams, so it ends them.
func (d *Dispatcher) Drain() { d.drain() }

// MaxListenTaskIDs caps the taskIds of one subscriptions/listen: each is
// looked up and subscribed to.
const MaxListenTaskIDs = 1000

// openListen checks a listen's params (headers nil off HTTP) and takes
// one of the caller's open-stream slots (Options.OpenListen) for it:
// release gives the slot back when the stream ends.
func (d *Dispatcher) openListen(ctx context.Context, owner string, req *Request, headers http.Header) (ids []string, release func(), e *RPCError) {
	p, e := d.parse(req, headers)
	if e != nil {
		return nil, nil, e
	}
	release = func() {}
	if d.opts.OpenListen != nil {
		release, e = d.opts.OpenListen(ctx, owner)
	}
	return p.Notifications.TaskIDs, release, e
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
	ids, release, e := d.openListen(r.Context(), owner, req, r.Header)
	if e != nil {
		envelope.WriteError(w, req.ID, e)
		return
	}
	defer release()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flush := func(err error) error {
		if flusher != nil {
			flusher.Flush()
		}
		return err
	}
	send := func(msg []byte) error {
		_, err := io.WriteString(w, "event: message\ndata: ")
		if err == nil {
			_, err = w.Write(msg)
		}
		if err == nil {
			_, err = io.WriteString(w, "\n\n")
		}
		return flush(err)
	}
	keepAlive := func() error {
		_, err := io.WriteString(w, sse.Comment)
		return flush(err)
	}
	d.listen(r.Context(), owner, req.ID, ids, send, keepAlive)
}

// listen runs one subscription: acknowledgement first (listing only the
// caller's own live tasks), then the current state and every change of
// each agreed task, then the closing response once all have ended. The
// taskIds are all it honours: darkroom's lists never change, so it
// declares no listChanged and sends no list or resource notifications;
// other filter keys (toolsListChanged, ...) are left out of the
// acknowledgement and keep no stream open.
func (d *Dispatcher) listen(ctx context.Context, owner string, id json.RawMessage, want []string, send func([]byte) error, keepAlive func() error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(d.drained, cancel)() // Drain ends it
	// live holds the agreed tasks that have not ended yet.
	agreed, live := []string{}, map[string]bool{}
	for _, tid := range want {
		if _, err := d.opts.Store.Lookup(ctx, owner, tid); err == nil && !live[tid] {
			agreed, live[tid] = append(agreed, tid), true
		}
	}
	sub := d.opts.Store.broker.subscribe(agreed)
	defer d.opts.Store.broker.unsubscribe(sub, agreed)
	subMeta := d.meta(map[string]any{metaSubscriptionID: json.RawMessage(id)})
	ack, _ := json.Marshal(map[string]any{"_meta": subMeta, "notifications": map[string]any{"taskIds": agreed}})
	if send(notification(notificationSubscribed, ack)) != nil {
		return
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
			t, err := d.opts.Store.Lookup(ctx, owner, tid)
			if err != nil {
				delete(live, tid) // expired or purged: nothing more will come
				continue
			}
			k := keyOf(t)
			if sent[tid] == k {
				continue
			}
			sent[tid] = k
			d.poll(ctx, owner, t)
			b, err := d.render(ctx, t, subMeta)
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
	_ = send(envelope.Frame(id, "result", end))
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
