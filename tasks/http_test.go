package tasks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
)

// streamTimeout bounds each wait for an SSE message.
const streamTimeout = 10 * time.Second

// httpFixture serves the dispatcher's middleware in front of a handler
// that marks requests passed through. The caller is named by X-Owner.
type httpFixture struct {
	srv    *httptest.Server
	passed chan string // method of each request handed to next
}

func newHTTPFixture(t *testing.T, d *Dispatcher) *httpFixture {
	t.Helper()
	f := &httpFixture{passed: make(chan string, 16)}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env, _ := envelope.From(r.Context())
		m := ""
		if env != nil {
			m = env.Method
		}
		f.passed <- m
		w.WriteHeader(http.StatusTeapot)
	})
	owner := func(r *http.Request) string { return r.Header.Get("X-Owner") }
	f.srv = httptest.NewServer(door(d, owner, next))
	t.Cleanup(f.srv.Close)
	return f
}

// door stands in for server/edge's (which this package's tests cannot
// import): the body parsed once and left in the context, then the
// dispatcher's own requests served (Serve) and every other passed to
// next. The door's own checks are server/edge's tests.
func door(d *Dispatcher, owner func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		env, err := envelope.ParseBody(body)
		if err != nil {
			envelope.WriteError(w, nil, err.(*RPCError))
			return
		}
		r = r.WithContext(envelope.NewContext(r.Context(), env))
		if !Dispatched(&env.Message) {
			next.ServeHTTP(w, r)
			return
		}
		d.Serve(w, r, owner(r))
	})
}

type post struct {
	owner   string
	method  string // JSON-RPC method
	params  map[string]any
	noMeta  bool
	headers map[string]string // override or add; "" value deletes
}

func (f *httpFixture) do(t *testing.T, p post) *http.Response {
	t.Helper()
	params := map[string]any{}
	for k, v := range p.params {
		params[k] = v
	}
	if !p.noMeta {
		params["_meta"] = map[string]any{MetaProtocolVersion: testVersion, MetaClientCapabilities: tasksCaps()}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 42, "method": p.method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Owner", p.owner)
	req.Header.Set("Mcp-Protocol-Version", testVersion)
	req.Header.Set("Mcp-Method", p.method)
	if id, ok := p.params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", id)
	}
	for k, v := range p.headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Params json.RawMessage `json:"params"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func readJSON(t *testing.T, resp *http.Response) rpcResponse {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r rpcResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("response %d %q: %v", resp.StatusCode, b, err)
	}
	return r
}

func TestHeaderChecks(t *testing.T) {
	d, s, _, _ := newTestDispatcher(t)
	f := newHTTPFixture(t, d)
	task := mkTask(t, s, &Task{Owner: "alice"})
	b64 := func(v string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?=" }
	get := map[string]any{"taskId": task.ID}
	cases := []struct {
		name       string
		p          post
		wantStatus int
		wantCode   int64 // 0: success
	}{
		{"ok", post{method: methodGet, params: get}, 200, 0},
		{"base64 Mcp-Name", post{method: methodGet, params: get, headers: map[string]string{"Mcp-Name": b64(task.ID)}}, 200, 0},
		{"Mcp-Name mismatch", post{method: methodGet, params: get, headers: map[string]string{"Mcp-Name": "other"}}, 400, CodeHeaderMismatch},
		{"Mcp-Name missing", post{method: methodGet, params: get, headers: map[string]string{"Mcp-Name": ""}}, 400, CodeHeaderMismatch},
		{"Mcp-Method mismatch", post{method: methodGet, params: get, headers: map[string]string{"Mcp-Method": methodCancel}}, 400, CodeHeaderMismatch},
		{"protocol header mismatch", post{method: methodGet, params: get, headers: map[string]string{"Mcp-Protocol-Version": "2025-11-25"}}, 400, CodeHeaderMismatch},
		{"missing _meta", post{method: methodGet, params: get, noMeta: true}, 400, CodeInvalidParams},
		{"missing _meta beats header mismatch", post{method: methodGet, params: get, noMeta: true, headers: map[string]string{"Mcp-Name": "other"}}, 400, CodeInvalidParams},
		{"no extension", post{method: methodGet, params: map[string]any{"taskId": task.ID, "_meta": map[string]any{MetaProtocolVersion: testVersion, MetaClientCapabilities: map[string]any{}}}, noMeta: true}, 400, CodeMissingCapability},
		{"unsupported version", post{method: methodGet, params: map[string]any{"taskId": task.ID, "_meta": map[string]any{MetaProtocolVersion: "2099-01-01", MetaClientCapabilities: tasksCaps()}}, noMeta: true,
			headers: map[string]string{"Mcp-Protocol-Version": "2099-01-01"}}, 400, CodeUnsupportedProtocol},
		{"header mismatch beats version", post{method: methodGet, params: map[string]any{"taskId": task.ID, "_meta": map[string]any{MetaProtocolVersion: "2099-01-01", MetaClientCapabilities: tasksCaps()}}, noMeta: true}, 400, CodeHeaderMismatch},
		// The door passes these as an earlier era (or, the second, as a
		// header equal to the body): the dispatcher's own check answers
		// -32020 before the version's -32022.
		{"earlier era without Mcp-Method", post{method: methodGet, params: map[string]any{"taskId": task.ID, "_meta": map[string]any{MetaProtocolVersion: "2025-06-18", MetaClientCapabilities: tasksCaps()}}, noMeta: true,
			headers: map[string]string{"Mcp-Protocol-Version": "2025-06-18", "Mcp-Method": ""}}, 400, CodeHeaderMismatch},
		{"protocol header decoded before comparing", post{method: methodGet, params: map[string]any{"taskId": task.ID, "_meta": map[string]any{MetaProtocolVersion: b64(testVersion), MetaClientCapabilities: tasksCaps()}}, noMeta: true,
			headers: map[string]string{"Mcp-Protocol-Version": b64(testVersion)}}, 400, CodeHeaderMismatch},
		{"cancel Mcp-Name mismatch", post{method: methodCancel, params: get, headers: map[string]string{"Mcp-Name": "x"}}, 400, CodeHeaderMismatch},
		{"update Mcp-Name mismatch", post{method: methodUpdate, params: map[string]any{"taskId": task.ID, "inputResponses": map[string]any{}}, headers: map[string]string{"Mcp-Name": "x"}}, 400, CodeHeaderMismatch},
		{"listen Mcp-Method mismatch", post{method: methodListen, params: map[string]any{"notifications": map[string]any{"taskIds": []string{task.ID}}}, headers: map[string]string{"Mcp-Method": methodGet}}, 400, CodeHeaderMismatch},
		{"unknown task", post{method: methodGet, params: map[string]any{"taskId": "nope"}}, 200, CodeInvalidParams},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.p.owner = "alice"
			resp := f.do(t, c.p)
			if resp.StatusCode != c.wantStatus {
				t.Errorf("HTTP %d, want %d", resp.StatusCode, c.wantStatus)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			r := readJSON(t, resp)
			if string(r.ID) != "42" {
				t.Errorf("id %s, want 42", r.ID)
			}
			switch {
			case c.wantCode == 0 && (r.Error != nil || r.Result == nil):
				t.Fatalf("want success, got error %+v", r.Error)
			case c.wantCode != 0 && (r.Error == nil || r.Error.Code != c.wantCode):
				t.Fatalf("error %+v, want code %d", r.Error, c.wantCode)
			}
		})
	}
	select {
	case m := <-f.passed:
		t.Fatalf("a tasks request (%s) reached the next handler", m)
	default:
	}
}

func TestMiddlewarePassesOtherRequests(t *testing.T) {
	d, _, _, _ := newTestDispatcher(t)
	f := newHTTPFixture(t, d)
	cases := []struct {
		name string
		p    post
	}{
		{"tools/call", post{method: "tools/call", params: map[string]any{"name": "generate"}, headers: map[string]string{"Mcp-Name": "generate"}}},
		{"listen without taskIds", post{method: methodListen, params: map[string]any{"notifications": map[string]any{"toolsListChanged": true}}}},
		{"tasks/list is not served here", post{method: "tasks/list", params: map[string]any{}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := f.do(t, c.p)
			resp.Body.Close()
			if resp.StatusCode != http.StatusTeapot {
				t.Fatalf("HTTP %d: not passed through", resp.StatusCode)
			}
			if m := <-f.passed; m != c.p.method {
				t.Fatalf("next saw method %q", m)
			}
		})
	}
	// GET goes straight through.
	resp, err := http.Get(f.srv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	<-f.passed
}

// readStream reads a listen stream's data lines into a channel, closed at EOF.
func readStream(t *testing.T, resp *http.Response) <-chan rpcResponse {
	t.Helper()
	out := make(chan rpcResponse, 64)
	// Hanging up ends a stream the server failed to end, so that the
	// server's Close (which waits for handlers) cannot hang the test.
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			d, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m rpcResponse
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Errorf("bad SSE data %q: %v", d, err)
				return
			}
			out <- m
		}
	}()
	return out
}

func next(t *testing.T, c <-chan rpcResponse) rpcResponse {
	t.Helper()
	select {
	case m, ok := <-c:
		if !ok {
			t.Fatal("stream ended early")
		}
		return m
	case <-time.After(streamTimeout):
		t.Fatal("no message on the stream")
	}
	return rpcResponse{}
}

type taskNote struct {
	TaskID        string         `json:"taskId"`
	Status        Status         `json:"status"`
	StatusMessage string         `json:"statusMessage"`
	Meta          map[string]any `json:"_meta"`
}

func note(t *testing.T, m rpcResponse) taskNote {
	t.Helper()
	if m.Method != notificationTasks {
		t.Fatalf("got %s %s %s, want %s", m.Method, m.Result, m.Params, notificationTasks)
	}
	var n taskNote
	if err := json.Unmarshal(m.Params, &n); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(n.Meta[metaSubscriptionID]) != "42" {
		t.Fatalf("notification without the subscription id: %s", m.Params)
	}
	return n
}

func setActive(t *testing.T, s *Store, id string, st Status, msg string) {
	t.Helper()
	err := s.Write(context.Background(), id, func(ctx context.Context, tx Tx) error {
		task, err := s.GetTx(ctx, tx, id)
		if err != nil {
			return err
		}
		ok, err := s.SetActive(ctx, tx, task, st, msg)
		if err == nil && !ok {
			err = fmt.Errorf("task %s did not move", id)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func finishNotify(t *testing.T, s *Store, id string, st Status, msg string) {
	t.Helper()
	if ok, err := finish(s, id, st, msg, json.RawMessage(`{"resultType":"complete","content":[]}`), nil); !ok || err != nil {
		t.Fatalf("finish %s: %v %v", id, ok, err)
	}
	s.Notify(id)
}

// TestListenStream: the acknowledgement comes first and agrees only to
// the caller's own tasks; the current state follows, then one
// notification per change; foreign changes never show; the stream ends
// with the response once every agreed task is terminal.
func TestListenStream(t *testing.T) {
	d, s, c, _ := newTestDispatcher(t)
	f := newHTTPFixture(t, d)
	a := mkTask(t, s, &Task{Owner: "alice", TTL: time.Hour})
	b := mkTask(t, s, &Task{Owner: "alice", TTL: time.Hour})
	done := mkTask(t, s, &Task{Owner: "alice", TTL: time.Hour})
	finishNotify(t, s, done.ID, StatusCompleted, "already done")
	expired := mkTask(t, s, &Task{Owner: "alice", TTL: time.Second})
	foreign := mkTask(t, s, &Task{Owner: "bob", TTL: time.Hour})
	c.Advance(2 * time.Second)

	resp := f.do(t, post{owner: "alice", method: methodListen, params: map[string]any{"notifications": map[string]any{
		"taskIds": []string{a.ID, foreign.ID, "unknown", expired.ID, b.ID, done.ID, a.ID},
	}}})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("listen: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	stream := readStream(t, resp)
	ack := next(t, stream)
	if ack.Method != notificationSubscribed {
		t.Fatalf("first message is %s %s, want the acknowledgement", ack.Method, ack.Result)
	}
	var ackParams struct {
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(ack.Params, &ackParams)
	if got, want := ackParams.Notifications.TaskIDs, []string{a.ID, b.ID, done.ID}; !slices.Equal(got, want) {
		t.Fatalf("agreed %v, want %v (own, live or ended, deduplicated, in request order)", got, want)
	}
	if fmt.Sprint(ackParams.Meta[metaSubscriptionID]) != "42" {
		t.Fatalf("ack meta %v", ackParams.Meta)
	}
	// Current state of each agreed task.
	initial := map[string]Status{}
	for range 3 {
		n := note(t, next(t, stream))
		initial[n.TaskID] = n.Status
	}
	if initial[a.ID] != StatusWorking || initial[b.ID] != StatusWorking || initial[done.ID] != StatusCompleted {
		t.Fatalf("initial states %v", initial)
	}
	// A foreign change, then an own one: only the own one arrives.
	setActive(t, s, foreign.ID, StatusWorking, "bob's progress")
	setActive(t, s, a.ID, StatusWorking, "50%")
	if n := note(t, next(t, stream)); n.TaskID != a.ID || n.StatusMessage != "50%" {
		t.Fatalf("after a change: %+v", n)
	}
	setActive(t, s, b.ID, StatusInputRequired, "need input")
	if n := note(t, next(t, stream)); n.TaskID != b.ID || n.Status != StatusInputRequired {
		t.Fatalf("after b's change: %+v", n)
	}
	finishNotify(t, s, a.ID, StatusCompleted, "a done")
	if n := note(t, next(t, stream)); n.TaskID != a.ID || n.Status != StatusCompleted {
		t.Fatalf("a's end: %+v", n)
	}
	// A notify without a change re-sends b's state, harmlessly.
	finishNotify(t, s, b.ID, StatusCancelled, "b cancelled")
	if n := note(t, next(t, stream)); n.TaskID != b.ID || n.Status != StatusCancelled {
		t.Fatalf("b's end: %+v", n)
	}
	end := next(t, stream)
	if end.Method != "" || end.Result == nil || string(end.ID) != "42" {
		t.Fatalf("after every task ended: %s %s, want the response", end.Method, end.Result)
	}
	select {
	case m, ok := <-stream:
		if ok {
			t.Fatalf("message after the response: %+v", m)
		}
	case <-time.After(streamTimeout):
		t.Fatal("the stream stayed open after its response")
	}
	// No subscription is left behind.
	s.broker.mu.Lock()
	left := len(s.broker.subs)
	s.broker.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d broker entries left after the stream ended", left)
	}
}

// TestListenClientGoneUnsubscribes: a client that hangs up frees its
// subscription.
func TestListenClientGoneUnsubscribes(t *testing.T) {
	d, s, _, _ := newTestDispatcher(t)
	a := mkTask(t, s, &Task{Owner: "alice"})
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 42, "method": methodListen, "params": map[string]any{
		"_meta":         map[string]any{MetaProtocolVersion: testVersion, MetaClientCapabilities: tasksCaps()},
		"notifications": map[string]any{"taskIds": []string{a.ID}},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	msgs := make(chan []byte, 8)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var req Request
		_ = json.Unmarshal(body, &req)
		p, e := d.parse(&req, nil)
		if e != nil {
			t.Error(e)
			return
		}
		d.listen(ctx, "alice", req.ID, p.Notifications.TaskIDs, func(b []byte) error { msgs <- b; return nil }, func() error { return nil })
	}()
	<-msgs // ack
	<-msgs // current state
	s.broker.mu.Lock()
	subscribed := len(s.broker.subs[a.ID])
	s.broker.mu.Unlock()
	if subscribed != 1 {
		t.Fatalf("%d subscriptions while listening", subscribed)
	}
	cancel()
	<-done
	s.broker.mu.Lock()
	left := len(s.broker.subs)
	s.broker.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d broker entries after the client left", left)
	}
}

// TestListenTaskIDsCap: a listen for more than MaxListenTaskIDs tasks is
// refused with -32602 naming the limit, on HTTP and off it (parse), and
// subscribes to nothing; one for exactly the limit is served.
func TestListenTaskIDsCap(t *testing.T) {
	d, s, _, _ := newTestDispatcher(t)
	f := newHTTPFixture(t, d)
	a := mkTask(t, s, &Task{Owner: "alice", TTL: time.Hour})
	ids := func(n int) []string {
		out := []string{a.ID}
		for i := 1; i < n; i++ {
			out = append(out, fmt.Sprint("unknown-", i))
		}
		return out
	}
	cases := []struct {
		name   string
		ids    []string
		refuse bool
	}{
		{"one over", ids(MaxListenTaskIDs + 1), true},
		{"far over", ids(5 * MaxListenTaskIDs), true},
		{"at the limit", ids(MaxListenTaskIDs), false}, // last: it leaves a subscription behind until the server sees the hang-up
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			params := map[string]any{"notifications": map[string]any{"taskIds": c.ids}}
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": methodListen, "params": map[string]any{
				"_meta":         map[string]any{MetaProtocolVersion: testVersion, MetaClientCapabilities: tasksCaps()},
				"notifications": params["notifications"],
			}})
			var req Request
			if err := json.Unmarshal(body, &req); err != nil {
				t.Fatal(err)
			}
			_, perr := d.parse(&req, nil)
			resp := f.do(t, post{owner: "alice", method: methodListen, params: params})
			if !c.refuse {
				defer resp.Body.Close()
				if perr != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("parse %v; HTTP %d %s: want the stream", perr, resp.StatusCode, resp.Header.Get("Content-Type"))
				}
				if ack := next(t, readStream(t, resp)); ack.Method != notificationSubscribed || !strings.Contains(string(ack.Params), a.ID) {
					t.Fatalf("first message %s %s, want the acknowledgement of %s", ack.Method, ack.Params, a.ID)
				}
				return
			}
			want := fmt.Sprintf("has %d ids; the limit is %d", len(c.ids), MaxListenTaskIDs)
			if perr == nil || perr.Code != CodeInvalidParams || !strings.Contains(perr.Message, want) {
				t.Errorf("parse = %+v, want -32602 with %q", perr, want)
			}
			if resp.StatusCode != http.StatusBadRequest {
				resp.Body.Close() // a stream would not end
				t.Fatalf("HTTP %d %s, want 400", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			r := readJSON(t, resp)
			if r.Error == nil || r.Error.Code != CodeInvalidParams || !strings.Contains(r.Error.Message, want) {
				t.Fatalf("error %+v, want -32602 with %q", r.Error, want)
			}
			s.broker.mu.Lock()
			subs := len(s.broker.subs)
			s.broker.mu.Unlock()
			if subs != 0 {
				t.Fatalf("a refused listen left %d subscriptions", subs)
			}
		})
	}
}
