package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
)

const testVersion = "2026-07-28"

// testKind records what the dispatcher asks of it.
type testKind struct {
	mu       sync.Mutex
	answered []map[string]json.RawMessage
	cancels  []string
	// onAnswered runs inside Answered (before the ack is sent).
	onAnswered func(t *Task, answers map[string]json.RawMessage)
	cancelErr  error
}

func (k *testKind) Cancel(ctx context.Context, t *Task) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cancels = append(k.cancels, t.ID)
	return k.cancelErr
}

func (k *testKind) Answered(ctx context.Context, t *Task, answers map[string]json.RawMessage) error {
	if k.onAnswered != nil {
		k.onAnswered(t, answers)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.answered = append(k.answered, maps.Clone(answers))
	return nil
}

func (k *testKind) Result(ctx context.Context, t *Task) (json.RawMessage, error) {
	return json.RawMessage(`{"resultType":"complete","content":[{"type":"text","text":"rendered"}]}`), nil
}

func (k *testKind) calls() ([]map[string]json.RawMessage, []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.answered), slices.Clone(k.cancels)
}

func newTestDispatcher(t testing.TB) (*Dispatcher, *Store, *testclock.Clock, *testKind) {
	t.Helper()
	s, _, c := newTestStore(t)
	d := NewDispatcher(Options{Store: s, ServerInfo: map[string]string{"name": "test"}})
	k := &testKind{}
	d.Register("test", k)
	return d, s, c, k
}

func tasksCaps() map[string]any {
	return map[string]any{"extensions": map[string]any{ExtensionID: map[string]any{}}}
}

// rpc builds a request with _meta declaring the extension.
func rpc(method string, params map[string]any) *Request {
	p := map[string]any{"_meta": map[string]any{MetaProtocolVersion: testVersion, MetaClientCapabilities: tasksCaps()}}
	maps.Copy(p, params)
	b, _ := json.Marshal(p)
	return &Request{ID: json.RawMessage("1"), Method: method, Params: b}
}

func decode(t *testing.T, b json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

func keysOf[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// TestUpdatePartial answers one of two outstanding keys at a time through
// tasks/update: only the answered key leaves inputRequests, before the ack;
// unknown and already answered keys are ignored.
func TestUpdatePartial(t *testing.T) {
	d, s, _, k := newTestDispatcher(t)
	ctx := context.Background()
	task := &Task{Owner: "alice", Status: StatusInputRequired, TTL: time.Hour}
	k1 := task.AddInputRequest("approve", map[string]any{"method": "elicitation/create"})
	k2 := task.AddInputRequest("upload", map[string]any{"method": "elicitation/create"})
	mkTask(t, s, task)

	// Inside Answered (before the ack), tasks/get already lists only what
	// is still outstanding.
	var seenInside []string
	k.onAnswered = func(_ *Task, _ map[string]json.RawMessage) {
		res, e := d.Call(ctx, "alice", rpc(methodGet, map[string]any{"taskId": task.ID}), nil)
		if e != nil {
			t.Errorf("tasks/get inside Answered: %v", e)
			return
		}
		reqs, _ := decode(t, res)["inputRequests"].(map[string]any)
		seenInside = keysOf(reqs)
	}

	steps := []struct {
		name         string
		responses    map[string]any
		wantAnswered []string // keys passed to Answered; nil: not called
		wantPending  []string
		wantStatus   Status
	}{
		{"unknown key only", map[string]any{"nope": map[string]any{"action": "accept"}}, nil, []string{k1, k2}, StatusInputRequired},
		{"first key plus unknown", map[string]any{k1: map[string]any{"action": "accept"}, "nope": map[string]any{}}, []string{k1}, []string{k2}, StatusInputRequired},
		{"first key again", map[string]any{k1: map[string]any{"action": "decline"}}, nil, []string{k2}, StatusInputRequired},
		{"empty responses", map[string]any{}, nil, []string{k2}, StatusInputRequired},
		{"second key", map[string]any{k2: map[string]any{"action": "accept"}}, []string{k2}, []string{}, StatusInputRequired},
		{"both again", map[string]any{k1: map[string]any{}, k2: map[string]any{}}, nil, []string{}, StatusInputRequired},
	}
	prevCalls := 0
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			seenInside = nil
			res, e := d.Call(ctx, "alice", rpc(methodUpdate, map[string]any{"taskId": task.ID, "inputResponses": st.responses}), nil)
			if e != nil {
				t.Fatalf("tasks/update: %v", e)
			}
			if ack := decode(t, res); ack["resultType"] != "complete" || len(ack) != 2 {
				t.Fatalf("ack = %s, want resultType and _meta only", res)
			}
			answered, _ := k.calls()
			switch {
			case st.wantAnswered == nil && len(answered) != prevCalls:
				t.Fatalf("Answered called with %v", answered[len(answered)-1])
			case st.wantAnswered != nil:
				if len(answered) != prevCalls+1 {
					t.Fatalf("Answered called %d times, want once", len(answered)-prevCalls)
				}
				if got := keysOf(answered[len(answered)-1]); !slices.Equal(got, st.wantAnswered) {
					t.Fatalf("Answered with %v, want %v", got, st.wantAnswered)
				}
				if !slices.Equal(seenInside, st.wantPending) {
					t.Fatalf("tasks/get before the ack listed %v, want %v", seenInside, st.wantPending)
				}
			}
			prevCalls = len(answered)
			got, err := s.Get(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if pending := keysOf(got.InputRequests); !slices.Equal(pending, st.wantPending) || got.Status != st.wantStatus {
				t.Fatalf("after update: %s pending %v, want %s %v", got.Status, pending, st.wantStatus, st.wantPending)
			}
		})
	}
	got, _ := s.Get(ctx, task.ID)
	if !slices.Equal(slices.Sorted(slices.Values(got.AnsweredKeys)), []string{k1, k2}) {
		t.Fatalf("answered keys = %v", got.AnsweredKeys)
	}
	if string(got.InputResponses[k1]) != `{"action":"accept"}` {
		t.Fatalf("the first answer was overwritten by the repeat: %s", got.InputResponses[k1])
	}
	// A new request after answers gets a fresh key, never a reused one.
	if next := got.AddInputRequest("approve", nil); next == k1 || next == k2 {
		t.Fatalf("key %s reused", next)
	}
}

func TestUpdateForeignAndTerminal(t *testing.T) {
	d, s, _, k := newTestDispatcher(t)
	ctx := context.Background()
	task := &Task{Owner: "alice", Status: StatusInputRequired}
	key := task.AddInputRequest("approve", nil)
	mkTask(t, s, task)
	// Bob's answer is refused exactly like an unknown task, and not taken.
	_, foreign := d.Call(ctx, "bob", rpc(methodUpdate, map[string]any{"taskId": task.ID, "inputResponses": map[string]any{key: map[string]any{}}}), nil)
	_, unknown := d.Call(ctx, "bob", rpc(methodUpdate, map[string]any{"taskId": "nope", "inputResponses": map[string]any{key: map[string]any{}}}), nil)
	if foreign == nil || unknown == nil || *foreign != *unknown {
		t.Fatalf("foreign %+v vs unknown %+v", foreign, unknown)
	}
	if got, _ := s.Get(ctx, task.ID); len(got.InputRequests) != 1 {
		t.Fatal("a foreign answer was recorded")
	}
	// A terminal task acks and ignores answers.
	if ok, err := finish(s, task.ID, StatusCancelled, "gone", nil, nil); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, e := d.Call(ctx, "alice", rpc(methodUpdate, map[string]any{"taskId": task.ID, "inputResponses": map[string]any{key: map[string]any{}}}), nil); e != nil {
		t.Fatalf("update of a terminal task: %v", e)
	}
	if a, _ := k.calls(); len(a) != 0 {
		t.Fatalf("Answered called for a terminal task: %v", a)
	}
	// inputResponses is required.
	if _, e := d.Call(ctx, "alice", rpc(methodUpdate, map[string]any{"taskId": task.ID}), nil); e == nil || e.Code != CodeInvalidParams {
		t.Fatalf("update without inputResponses: %+v", e)
	}
}

// TestGetHidesForeignAndExpired: tasks/get answers a foreign, an expired
// and an unknown id with the very same error.
func TestGetHidesForeignAndExpired(t *testing.T) {
	d, s, c, _ := newTestDispatcher(t)
	ctx := context.Background()
	mine := mkTask(t, s, &Task{Owner: "alice", TTL: time.Hour})
	short := mkTask(t, s, &Task{Owner: "alice", TTL: time.Minute})
	get := func(owner, id string) (json.RawMessage, *RPCError) {
		return d.Call(ctx, owner, rpc(methodGet, map[string]any{"taskId": id}), nil)
	}
	if res, e := get("alice", short.ID); e != nil || decode(t, res)["status"] != "working" {
		t.Fatalf("own task: %s %v", res, e)
	}
	c.Advance(time.Minute)
	_, unknown := get("alice", "0123456789abcdef0123456789abcdef")
	for _, m := range []string{methodGet, methodCancel, methodUpdate} {
		for name, probe := range map[string]struct{ owner, id string }{
			"foreign": {"bob", mine.ID},
			"expired": {"alice", short.ID},
			"unknown": {"alice", "0123456789abcdef0123456789abcdef"},
		} {
			res, e := d.Call(ctx, probe.owner, rpc(m, map[string]any{"taskId": probe.id, "inputResponses": map[string]any{}}), nil)
			if e == nil || *e != *unknown || res != nil {
				t.Errorf("%s %s: %s %+v, want %+v", m, name, res, e, unknown)
			}
		}
	}
	if unknown.Code != CodeInvalidParams || unknown.Message != notFoundMessage {
		t.Fatalf("not found error = %+v", unknown)
	}
}

func TestGetRendersStatusSpecificFields(t *testing.T) {
	d, s, _, _ := newTestDispatcher(t)
	ctx := context.Background()
	stored := mkTask(t, s, &Task{Owner: "alice", TTL: time.Hour})
	_, _ = finish(s, stored.ID, StatusCompleted, "done", json.RawMessage(`{"resultType":"complete","content":[]}`), nil)
	rendered := mkTask(t, s, &Task{Owner: "alice"})
	_, _ = finish(s, rendered.ID, StatusCompleted, "done", nil, nil)
	failed := mkTask(t, s, &Task{Owner: "alice"})
	_, _ = finish(s, failed.ID, StatusFailed, "broke", nil, &Error{Code: -32603, Message: "broke"})
	asking := &Task{Owner: "alice", Status: StatusInputRequired}
	asking.AddInputRequest("k", map[string]any{"method": "elicitation/create"})
	mkTask(t, s, asking)
	cases := []struct {
		id    string
		check func(m map[string]any) bool
	}{
		{stored.ID, func(m map[string]any) bool {
			return m["status"] == "completed" && m["result"].(map[string]any)["content"] != nil && m["ttlMs"] == float64(3600000)
		}},
		{rendered.ID, func(m map[string]any) bool {
			return m["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] == "rendered" && m["ttlMs"] == nil
		}},
		{failed.ID, func(m map[string]any) bool {
			return m["status"] == "failed" && m["error"].(map[string]any)["message"] == "broke" && m["result"] == nil
		}},
		{asking.ID, func(m map[string]any) bool {
			return m["status"] == "input_required" && len(m["inputRequests"].(map[string]any)) == 1
		}},
	}
	for _, c := range cases {
		res, e := d.Call(ctx, "alice", rpc(methodGet, map[string]any{"taskId": c.id}), nil)
		if e != nil {
			t.Fatal(e)
		}
		m := decode(t, res)
		if m["resultType"] != "complete" || m["_meta"].(map[string]any)[MetaServerInfo] == nil || !c.check(m) {
			t.Errorf("tasks/get %s", res)
		}
	}
}

func TestCancelCallsKindOnlyForLiveTasks(t *testing.T) {
	d, s, _, k := newTestDispatcher(t)
	ctx := context.Background()
	live := mkTask(t, s, &Task{Owner: "alice"})
	done := mkTask(t, s, &Task{Owner: "alice"})
	_, _ = finish(s, done.ID, StatusCompleted, "", json.RawMessage(`{}`), nil)
	for _, id := range []string{live.ID, done.ID, done.ID} {
		if res, e := d.Call(ctx, "alice", rpc(methodCancel, map[string]any{"taskId": id}), nil); e != nil || decode(t, res)["resultType"] != "complete" {
			t.Fatalf("cancel %s: %s %v", id, res, e)
		}
	}
	if _, cancels := k.calls(); !slices.Equal(cancels, []string{live.ID}) {
		t.Fatalf("Kind.Cancel called for %v, want only the live task", cancels)
	}
	k.cancelErr = errors.New("provider down")
	if _, e := d.Call(ctx, "alice", rpc(methodCancel, map[string]any{"taskId": live.ID}), nil); e == nil || e.Code != CodeInternal {
		t.Fatalf("failing cancel: %+v", e)
	}
}

// TestParamChecks covers the checks that apply off HTTP too (headers nil).
func TestParamChecks(t *testing.T) {
	d, s, _, _ := newTestDispatcher(t)
	task := mkTask(t, s, &Task{Owner: "alice"})
	raw := func(params string) *Request {
		return &Request{ID: json.RawMessage("7"), Method: methodGet, Params: json.RawMessage(params)}
	}
	meta := func(version string, caps string) string {
		return `{"` + MetaProtocolVersion + `":"` + version + `","` + MetaClientCapabilities + `":` + caps + `}`
	}
	ext := `{"extensions":{"` + ExtensionID + `":{}}}`
	cases := []struct {
		name string
		req  *Request
		code int64
	}{
		{"no params", raw(``), CodeInvalidParams},
		{"params not an object", raw(`[1]`), CodeInvalidParams},
		{"no _meta", raw(`{"taskId":"` + task.ID + `"}`), CodeInvalidParams},
		{"_meta without version", raw(`{"taskId":"x","_meta":{"` + MetaClientCapabilities + `":{}}}`), CodeInvalidParams},
		{"_meta without caps", raw(`{"taskId":"x","_meta":{"` + MetaProtocolVersion + `":"` + testVersion + `"}}`), CodeInvalidParams},
		{"unsupported version", raw(`{"taskId":"x","_meta":` + meta("2099-01-01", ext) + `}`), CodeUnsupportedProtocol},
		{"no extension", raw(`{"taskId":"x","_meta":` + meta(testVersion, `{}`) + `}`), CodeMissingCapability},
		{"extension not an object", raw(`{"taskId":"x","_meta":` + meta(testVersion, `{"extensions":{"`+ExtensionID+`":true}}`) + `}`), CodeMissingCapability},
		{"taskId missing", raw(`{"_meta":` + meta(testVersion, ext) + `}`), CodeInvalidParams},
		{"taskId not a string", raw(`{"taskId":5,"_meta":` + meta(testVersion, ext) + `}`), CodeInvalidParams},
		{"ok", raw(`{"taskId":"` + task.ID + `","_meta":` + meta(testVersion, ext) + `}`), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, e := d.Call(context.Background(), "alice", c.req, nil)
			switch {
			case c.code == 0 && e != nil:
				t.Fatalf("error %+v", e)
			case c.code != 0 && (e == nil || e.Code != c.code):
				t.Fatalf("error %+v, want code %d", e, c.code)
			}
		})
	}
}
