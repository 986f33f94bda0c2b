package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Unit tests against a scripted server: the protocol corners darkroom does
// not exercise.

type fakeReq struct {
	ID     json.RawMessage
	Method string
	Params map[string]json.RawMessage
	Header http.Header
	At     time.Time
}

func (r fakeReq) param(key string, v any) error { return json.Unmarshal(r.Params[key], v) }

type fake struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []fakeReq
	handle func(w http.ResponseWriter, r fakeReq)
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r fakeReq)) *fake {
	f := &fake{handle: handle}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage            `json:"id"`
			Method string                     `json:"method"`
			Params map[string]json.RawMessage `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		fr := fakeReq{ID: req.ID, Method: req.Method, Params: req.Params, Header: r.Header.Clone(), At: time.Now()}
		f.mu.Lock()
		f.reqs = append(f.reqs, fr)
		f.mu.Unlock()
		f.handle(w, fr)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) endpoint() string { return f.srv.URL + "/mcp" }

func (f *fake) requests(method string) []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeReq
	for _, r := range f.reqs {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

func frame(id json.RawMessage, result string) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":` + result + `}`
}

func errFrame(id json.RawMessage, code int, msg string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, code, msg)
}

func replyJSON(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, msg)
}

func replySSE(w http.ResponseWriter, msgs ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, m := range msgs {
		_, _ = io.WriteString(w, "event: message\ndata: "+m+"\n\n")
	}
}

// task renders a flat task with resultType rt ("" for none).
func task(rt, id, status string, pollMs int, extra string) string {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	s := fmt.Sprintf(`{"taskId":%q,"status":%q,"createdAt":%q,"lastUpdatedAt":%q,"ttlMs":60000,"pollIntervalMs":%d`, id, status, now, now, pollMs)
	if rt != "" {
		s += fmt.Sprintf(`,"resultType":%q`, rt)
	}
	if extra != "" {
		s += "," + extra
	}
	return s + "}"
}

const okResult = `{"resultType":"complete","content":[{"type":"text","text":"ok"}],"structuredContent":{"ok":true}}`

func fakeClient(t *testing.T, f *fake, o Options) *Client {
	o.Endpoint = f.endpoint()
	if o.StatePath == "" {
		o.StatePath = filepath.Join(t.TempDir(), "state.db")
	}
	return newClient(t, o)
}

func TestCallToolResultTypes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		reply   func(w http.ResponseWriter, id json.RawMessage)
		wantErr func(error) bool
		task    bool
	}{
		{"complete json", func(w http.ResponseWriter, id json.RawMessage) { replyJSON(w, frame(id, okResult)) }, nil, false},
		{"complete sse after notifications", func(w http.ResponseWriter, id json.RawMessage) {
			replySSE(w, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}`,
				`{"jsonrpc":"2.0","id":999,"result":{}}`, frame(id, okResult))
		}, nil, false},
		{"sse with comments and multi-line data", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			_, _ = io.WriteString(w, ":\r\n\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":"+string(id)+",\"result\":"+okResult+"}\r\n\r\n")
		}, nil, false},
		{"missing resultType is complete", func(w http.ResponseWriter, id json.RawMessage) {
			replyJSON(w, frame(id, `{"content":[]}`))
		}, nil, false},
		{"flat task", func(w http.ResponseWriter, id json.RawMessage) {
			replyJSON(w, frame(id, task("task", "t1", "working", 1000, "")))
		}, nil, true},
		{"unknown resultType", func(w http.ResponseWriter, id json.RawMessage) {
			replyJSON(w, frame(id, `{"resultType":"mystery","content":[]}`))
		}, isProtocol, false},
		{"nested task", func(w http.ResponseWriter, id json.RawMessage) {
			replyJSON(w, frame(id, `{"resultType":"task","task":`+task("", "t1", "working", 1000, "")+`}`))
		}, isProtocol, false},
		{"task without taskId", func(w http.ResponseWriter, id json.RawMessage) {
			replyJSON(w, frame(id, `{"resultType":"task","status":"working"}`))
		}, isProtocol, false},
		{"task with unknown status", func(w http.ResponseWriter, id json.RawMessage) {
			replyJSON(w, frame(id, task("task", "t1", "sleeping", 1000, "")))
		}, isProtocol, false},
		{"response id mismatch", func(w http.ResponseWriter, id json.RawMessage) {
			replyJSON(w, frame(json.RawMessage(`"other"`), okResult))
		}, isProtocol, false},
		{"json-rpc error", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, errFrame(id, CodeMissingCapability, "Missing required client capability"))
		}, func(err error) bool {
			var re *RPCError
			return errors.As(err, &re) && re.Code == CodeMissingCapability
		}, false},
		{"http 401", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="x"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		}, func(err error) bool {
			var he *HTTPError
			return errors.As(err, &he) && he.StatusCode == 401 && he.WWWAuthenticate != ""
		}, false},
		{"sse ends early", func(w http.ResponseWriter, id json.RawMessage) {
			replySSE(w, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)
		}, func(err error) bool { return errors.Is(err, ErrStreamEnded) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(w http.ResponseWriter, r fakeReq) { tc.reply(w, r.ID) })
			c := fakeClient(t, f, Options{})
			out, err := c.Start(context.Background(), "tool", map[string]any{"x": 1})
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.task != (out.TaskID != "") {
				t.Fatalf("outcome %+v", out)
			}
			if !tc.task && len(out.Result) == 0 {
				t.Fatalf("no result")
			}
			if p, _ := c.Pending(); tc.task != (len(p) == 1) {
				t.Fatalf("pending %+v", p)
			}
		})
	}
}

func isProtocol(err error) bool { return errors.Is(err, ErrProtocol) }

func TestRequestHeadersAndMeta(t *testing.T) {
	t.Parallel()
	for _, withInput := range []bool{false, true} {
		t.Run(fmt.Sprintf("OnInput=%v", withInput), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(w http.ResponseWriter, r fakeReq) {
				switch r.Method {
				case "tools/call":
					replyJSON(w, frame(r.ID, task("task", "tâche-1", "working", 20, "")))
				case "tasks/get":
					replyJSON(w, frame(r.ID, task("complete", "tâche-1", "completed", 20, `"result":`+okResult)))
				}
			})
			o := Options{Token: "secret-token"}
			if withInput {
				o.OnInput = func(context.Context, string, string, json.RawMessage) (json.RawMessage, error) { return nil, nil }
			}
			c := fakeClient(t, f, o)
			if _, err := c.CallTool(context.Background(), "générer", nil); err != nil {
				t.Fatal(err)
			}
			call, get := f.requests("tools/call"), f.requests("tasks/get")
			if len(call) != 1 || len(get) != 1 {
				t.Fatalf("requests: %d tools/call, %d tasks/get", len(call), len(get))
			}
			b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
			for _, tc := range []struct {
				r      fakeReq
				method string
				name   string
			}{{call[0], "tools/call", b64("générer")}, {get[0], "tasks/get", b64("tâche-1")}} {
				h := tc.r.Header
				want := map[string]string{
					"Mcp-Protocol-Version": ProtocolVersion, "Mcp-Method": tc.method, "Mcp-Name": tc.name,
					"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
					"Authorization": "Bearer secret-token",
				}
				for k, v := range want {
					if got := h.Get(k); got != v {
						t.Errorf("%s: header %s = %q, want %q", tc.method, k, got, v)
					}
				}
				var meta struct {
					Version string `json:"io.modelcontextprotocol/protocolVersion"`
					Caps    struct {
						Extensions  map[string]json.RawMessage `json:"extensions"`
						Elicitation json.RawMessage            `json:"elicitation"`
					} `json:"io.modelcontextprotocol/clientCapabilities"`
					Info struct{ Name, Version string } `json:"io.modelcontextprotocol/clientInfo"`
				}
				if err := tc.r.param("_meta", &meta); err != nil {
					t.Fatal(err)
				}
				if meta.Version != ProtocolVersion || string(meta.Caps.Extensions[ExtensionID]) != "{}" || meta.Info.Name == "" {
					t.Errorf("%s: _meta %+v", tc.method, meta)
				}
				if (len(meta.Caps.Elicitation) > 0) != withInput {
					t.Errorf("%s: elicitation declared = %s with OnInput %v", tc.method, meta.Caps.Elicitation, withInput)
				}
			}
			var taskID string
			_ = get[0].param("taskId", &taskID)
			if taskID != "tâche-1" {
				t.Errorf("tasks/get taskId = %q", taskID)
			}
		})
	}
}

func TestMRTR(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r fakeReq) {
		var state string
		_ = r.param("requestState", &state)
		switch state {
		case "": // round 1
			if _, ok := r.Params["inputResponses"]; ok {
				replyJSON(w, errFrame(r.ID, CodeInvalidParams, "round 1 carries no inputResponses"))
				return
			}
			replyJSON(w, frame(r.ID, `{"resultType":"input_required","requestState":"s1","inputRequests":{
				"name":{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}},
				"age":{"method":"elicitation/create","params":{"message":"Age?","requestedSchema":{"type":"object","properties":{"age":{"type":"integer"}}}}}}}`))
		case "s1": // round 2: both answers, then only state
			var resp map[string]json.RawMessage
			_ = r.param("inputResponses", &resp)
			if len(resp) != 2 || !strings.Contains(string(resp["name"]), "Ada") {
				replyJSON(w, errFrame(r.ID, CodeInvalidParams, "round 2 answers: "+fmt.Sprint(resp)))
				return
			}
			replyJSON(w, frame(r.ID, `{"resultType":"input_required","requestState":"s2"}`))
		case "s2":
			replyJSON(w, frame(r.ID, task("task", "t-mrtr", "working", 10, "")))
		default:
			replyJSON(w, errFrame(r.ID, CodeInvalidParams, "bad state"))
		}
	})
	var asked []string
	c := fakeClient(t, f, Options{OnInput: func(ctx context.Context, taskID, key string, req json.RawMessage) (json.RawMessage, error) {
		if taskID != "" {
			return nil, fmt.Errorf("MRTR input with task %q", taskID)
		}
		asked = append(asked, key)
		if key == "name" {
			return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
		}
		return json.RawMessage(`{"action":"accept","content":{"age":36}}`), nil
	}})
	out, err := c.Start(context.Background(), "greet", map[string]any{"x": 1})
	if err != nil {
		t.Fatal(err)
	}
	if out.TaskID != "t-mrtr" || strings.Join(asked, ",") != "age,name" {
		t.Fatalf("outcome %+v, asked %v", out, asked)
	}
	calls := f.requests("tools/call")
	ids := map[string]bool{}
	for _, r := range calls {
		ids[string(r.ID)] = true
		var args map[string]int
		if err := r.param("arguments", &args); err != nil || args["x"] != 1 {
			t.Fatalf("retry lost the arguments: %s", r.Params["arguments"])
		}
	}
	if len(calls) != 3 || len(ids) != 3 {
		t.Fatalf("%d tools/call with %d distinct ids", len(calls), len(ids))
	}

	// Without OnInput, input is an error; and rounds are bounded.
	c2 := fakeClient(t, f, Options{})
	if _, err := c2.Start(context.Background(), "greet", nil); !errors.Is(err, ErrNoInputHandler) {
		t.Fatalf("no handler: %v", err)
	}
	loop := newFake(t, func(w http.ResponseWriter, r fakeReq) {
		replyJSON(w, frame(r.ID, `{"resultType":"input_required","requestState":"again"}`))
	})
	c3 := fakeClient(t, loop, Options{MaxInputRounds: 3})
	if _, err := c3.Start(context.Background(), "greet", nil); err == nil || !strings.Contains(err.Error(), "3 rounds") {
		t.Fatalf("endless MRTR: %v", err)
	}
	if n := len(loop.requests("tools/call")); n != 3 {
		t.Fatalf("endless MRTR: %d calls", n)
	}
}

// A task asks for input; the server is slow to drop answered keys. Each
// key is answered once, also by a new Client on the same state file.
func TestTaskInputDeduplicated(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	gets := 0
	input := func(keys ...string) string {
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf(`%q:{"method":"elicitation/create","params":{"message":%q,"requestedSchema":{"type":"object","properties":{}}}}`, k, k))
		}
		return `"inputRequests":{` + strings.Join(parts, ",") + `}`
	}
	script := []string{
		task("complete", "t1", "input_required", 10, input("k1")),
		task("complete", "t1", "input_required", 10, input("k1")), // stale
		task("complete", "t1", "input_required", 10, input("k1", "k2")),
		task("complete", "t1", "input_required", 10, input("k2")), // stale again
		task("complete", "t1", "input_required", 10, input("k2")),
		task("complete", "t1", "working", 10, ""),
		task("complete", "t1", "completed", 10, `"result":`+okResult),
	}
	// The first client is stopped (its context cancelled) by the first
	// poll after it answered k1: that poll is never answered to it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	updated := false
	f := newFake(t, func(w http.ResponseWriter, r fakeReq) {
		switch r.Method {
		case "tools/call":
			replyJSON(w, frame(r.ID, task("task", "t1", "working", 10, "")))
		case "tasks/get":
			mu.Lock()
			if updated && ctx.Err() == nil {
				cancel()
				mu.Unlock()
				return
			}
			i := min(gets, len(script)-1)
			gets++
			mu.Unlock()
			replyJSON(w, frame(r.ID, script[i]))
		case "tasks/update":
			mu.Lock()
			updated = true
			mu.Unlock()
			replyJSON(w, frame(r.ID, `{"resultType":"complete"}`))
		}
	})
	statePath := filepath.Join(t.TempDir(), "state.db")
	var asked []string
	onInput := func(ctx context.Context, taskID, key string, req json.RawMessage) (json.RawMessage, error) {
		mu.Lock()
		asked = append(asked, taskID+"/"+key)
		mu.Unlock()
		return json.RawMessage(`{"action":"accept","content":{}}`), nil
	}
	c1 := fakeClient(t, f, Options{StatePath: statePath, OnInput: onInput})
	if _, err := c1.CallTool(ctx, "job", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("first client: %v", err)
	}
	_ = c1.Close()

	c2 := fakeClient(t, f, Options{StatePath: statePath, OnInput: onInput})
	p, err := c2.Pending()
	if err != nil || len(p) != 1 || strings.Join(p[0].AnsweredKeys, ",") != "k1" {
		t.Fatalf("pending: %v %+v", err, p)
	}
	res, err := c2.Resume(context.Background())
	if err != nil || len(res) != 1 || res[0].Err != nil || string(res[0].Outcome.Result) != okResult {
		t.Fatalf("resume: %v %+v", err, res)
	}
	if strings.Join(asked, ",") != "t1/k1,t1/k2" {
		t.Fatalf("asked %v", asked)
	}
	var updates []string
	for _, r := range f.requests("tasks/update") {
		var resp map[string]json.RawMessage
		_ = r.param("inputResponses", &resp)
		var keys []string
		for k := range resp {
			keys = append(keys, k)
		}
		updates = append(updates, strings.Join(keys, "+"))
		if r.Header.Get("Mcp-Name") != "t1" {
			t.Errorf("tasks/update Mcp-Name %q", r.Header.Get("Mcp-Name"))
		}
	}
	if strings.Join(updates, ",") != "k1,k2" {
		t.Fatalf("tasks/update sent %v", updates)
	}
}

// The latest pollIntervalMs paces the polls, on a timer.
func TestPollIntervalHonoured(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	gets := 0
	f := newFake(t, func(w http.ResponseWriter, r fakeReq) {
		switch r.Method {
		case "tools/call":
			replyJSON(w, frame(r.ID, task("task", "t1", "working", 50, "")))
		case "tasks/get":
			mu.Lock()
			gets++
			n := gets
			mu.Unlock()
			switch {
			case n < 3:
				replyJSON(w, frame(r.ID, task("complete", "t1", "working", 50, "")))
			case n < 5:
				replyJSON(w, frame(r.ID, task("complete", "t1", "working", 150, "")))
			default:
				replyJSON(w, frame(r.ID, task("complete", "t1", "completed", 150, `"result":`+okResult)))
			}
		}
	})
	c := fakeClient(t, f, Options{})
	if _, err := c.CallTool(context.Background(), "job", nil); err != nil {
		t.Fatal(err)
	}
	call := f.requests("tools/call")[0]
	gets2 := f.requests("tasks/get")
	if len(gets2) != 5 {
		t.Fatalf("%d polls", len(gets2))
	}
	prev := call.At
	// Gaps: after the create (50), polls 1,2 said 50, polls 3,4 said 150.
	want := []time.Duration{50, 50, 50, 150, 150}
	for i, g := range gets2 {
		if gap := g.At.Sub(prev); gap < want[i]*time.Millisecond {
			t.Errorf("poll %d came %v after the previous request; interval %dms", i+1, gap, want[i])
		}
		prev = g.At
	}
}

func TestRateLimitRetryAfter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		header  string
		body    string
		minWait time.Duration
	}{
		{"Retry-After seconds", "1", "", time.Second},
		{"retryAfterMs in body", "", `{"jsonrpc":"2.0","id":null,"error":{"code":-31429,"message":"rate limited","data":{"retryAfterMs":120}}}`, 120 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			n := 0
			f := newFake(t, func(w http.ResponseWriter, r fakeReq) {
				mu.Lock()
				n++
				first := n == 1
				mu.Unlock()
				if first {
					if tc.header != "" {
						w.Header().Set("Retry-After", tc.header)
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = io.WriteString(w, tc.body)
					return
				}
				replyJSON(w, frame(r.ID, okResult))
			})
			c := fakeClient(t, f, Options{})
			if _, err := c.CallTool(context.Background(), "list_models", nil); err != nil {
				t.Fatal(err)
			}
			reqs := f.requests("tools/call")
			if len(reqs) != 2 || string(reqs[0].ID) == string(reqs[1].ID) {
				t.Fatalf("%d requests", len(reqs))
			}
			if gap := reqs[1].At.Sub(reqs[0].At); gap < tc.minWait {
				t.Fatalf("retried after %v, want at least %v", gap, tc.minWait)
			}
		})
	}
}

func TestTerminalOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		final string
		check func(t *testing.T, o *Outcome, err error)
	}{
		{"completed", task("complete", "t1", "completed", 10, `"result":`+okResult), func(t *testing.T, o *Outcome, err error) {
			if err != nil || string(o.Result) != okResult {
				t.Fatalf("%v %+v", err, o)
			}
		}},
		{"completed with tool error", task("complete", "t1", "completed", 10, `"result":{"resultType":"complete","content":[],"isError":true}`), func(t *testing.T, o *Outcome, err error) {
			if err != nil || !o.IsError() {
				t.Fatalf("%v %+v", err, o)
			}
		}},
		{"failed", task("complete", "t1", "failed", 10, `"statusMessage":"boom","error":{"code":-32603,"message":"provider exploded"}`), func(t *testing.T, o *Outcome, err error) {
			var fe *TaskFailedError
			var re *RPCError
			if !errors.As(err, &fe) || fe.TaskID != "t1" || !errors.As(err, &re) || re.Code != CodeInternalError || re.Message != "provider exploded" {
				t.Fatalf("%v", err)
			}
		}},
		{"cancelled", task("complete", "t1", "cancelled", 10, ""), func(t *testing.T, o *Outcome, err error) {
			if !errors.Is(err, ErrCancelled) || o.Task.Status != StatusCancelled {
				t.Fatalf("%v %+v", err, o)
			}
		}},
		{"tasks/get says task", task("task", "t1", "completed", 10, `"result":`+okResult), func(t *testing.T, o *Outcome, err error) {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("%v", err)
			}
		}},
		{"another task", task("complete", "t2", "completed", 10, `"result":`+okResult), func(t *testing.T, o *Outcome, err error) {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("%v", err)
			}
		}},
		{"not found", "", func(t *testing.T, o *Outcome, err error) {
			if !errors.Is(err, ErrTaskNotFound) {
				t.Fatalf("%v", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(w http.ResponseWriter, r fakeReq) {
				if tc.final == "" {
					replyJSON(w, errFrame(r.ID, CodeInvalidParams, "Task not found"))
					return
				}
				replyJSON(w, frame(r.ID, tc.final))
			})
			c := fakeClient(t, f, Options{})
			o, err := c.Wait(context.Background(), "t1")
			tc.check(t, o, err)
			if p, _ := c.Pending(); len(p) != 0 {
				t.Fatalf("pending: %+v", p)
			}
		})
	}
}

// Polling gives up at createdAt + ttlMs.
func TestWaitExpires(t *testing.T) {
	t.Parallel()
	created := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	body := fmt.Sprintf(`{"resultType":"complete","taskId":"t1","status":"working","createdAt":%q,"lastUpdatedAt":%q,"ttlMs":1300,"pollIntervalMs":100}`, created, created)
	f := newFake(t, func(w http.ResponseWriter, r fakeReq) { replyJSON(w, frame(r.ID, body)) })
	c := fakeClient(t, f, Options{})
	start := time.Now()
	if _, err := c.Wait(context.Background(), "t1"); !errors.Is(err, ErrExpired) {
		t.Fatalf("Wait: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("gave up after %v", d)
	}
	if p, _ := c.Pending(); len(p) != 0 {
		t.Fatalf("expired task still pending: %+v", p)
	}
}

// Transient failures while polling are retried with backoff.
func TestPollRetriesTransientFailures(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	f := newFake(t, func(w http.ResponseWriter, r fakeReq) {
		if r.Method == "tools/call" {
			replyJSON(w, frame(r.ID, task("task", "t1", "working", 10, "")))
			return
		}
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		switch i {
		case 1:
			http.Error(w, "upstream down", http.StatusBadGateway)
		case 2:
			replySSE(w) // stream ends without the response
		default:
			replyJSON(w, frame(r.ID, task("complete", "t1", "completed", 10, `"result":`+okResult)))
		}
	})
	c := fakeClient(t, f, Options{})
	if _, err := c.CallTool(context.Background(), "job", nil); err != nil {
		t.Fatal(err)
	}
	if got := len(f.requests("tasks/get")); got != 3 {
		t.Fatalf("%d polls", got)
	}
}

func listenFake(t *testing.T, stream func(w http.ResponseWriter, id json.RawMessage)) *fake {
	return newFake(t, func(w http.ResponseWriter, r fakeReq) {
		switch r.Method {
		case "subscriptions/listen":
			stream(w, r.ID)
		case "tasks/get":
			replyJSON(w, frame(r.ID, task("complete", "t1", "completed", 10, `"result":`+okResult)))
		}
	})
}

func ack(sub json.RawMessage, ids string) string {
	return `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(sub) + `},"notifications":{"taskIds":` + ids + `}}}`
}

func notify(sub json.RawMessage, status, extra string) string {
	params := strings.TrimSuffix(task("", "t1", status, 10, extra), "}") + `,"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(sub) + `}}`
	return `{"jsonrpc":"2.0","method":"notifications/tasks","params":` + params + `}`
}

func TestListenProtocol(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		stream func(w http.ResponseWriter, id json.RawMessage)
		want   []Status
		check  func(error) bool
	}{
		{"ack, notifications, end", func(w http.ResponseWriter, id json.RawMessage) {
			replySSE(w, ack(id, `["t1"]`), notify(id, "working", ""),
				notify(json.RawMessage(`"someone-else"`), "failed", ""), // another subscription: ignored
				notify(id, "completed", `"result":`+okResult), frame(id, `{"resultType":"complete"}`))
		}, []Status{StatusWorking, StatusCompleted}, func(err error) bool { return err == nil }},
		{"first message not the acknowledgement", func(w http.ResponseWriter, id json.RawMessage) {
			replySSE(w, notify(id, "working", ""), ack(id, `["t1"]`))
		}, nil, isProtocol},
		{"acknowledgement for another subscription", func(w http.ResponseWriter, id json.RawMessage) {
			replySSE(w, ack(json.RawMessage(`12345678`), `["t1"]`))
		}, nil, isProtocol},
		{"stream ends early", func(w http.ResponseWriter, id json.RawMessage) {
			replySSE(w, ack(id, `["t1"]`), notify(id, "working", ""))
		}, []Status{StatusWorking}, func(err error) bool { return errors.Is(err, ErrStreamEnded) }},
		{"rejected", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, errFrame(id, CodeMissingCapability, "Missing required client capability"))
		}, nil, func(err error) bool {
			var re *RPCError
			return errors.As(err, &re) && re.Code == CodeMissingCapability
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := listenFake(t, tc.stream)
			c := fakeClient(t, f, Options{})
			var got []Status
			err := c.Listen(context.Background(), []string{"t1"}, func(dt DetailedTask) { got = append(got, dt.Status) })
			if !tc.check(err) {
				t.Fatalf("Listen: %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("delivered %v, want %v", got, tc.want)
			}
			var filter struct {
				TaskIDs []string `json:"taskIds"`
			}
			r := f.requests("subscriptions/listen")[0]
			if err := r.param("notifications", &filter); err != nil || fmt.Sprint(filter.TaskIDs) != "[t1]" || r.Header.Get("Mcp-Method") != "subscriptions/listen" {
				t.Fatalf("listen request: %s %v", r.Params["notifications"], r.Header)
			}
		})
	}
}

func TestWaitByNotificationsFallsBack(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		stream func(w http.ResponseWriter, id json.RawMessage)
		gets   int
	}{
		{"terminal on the stream", func(w http.ResponseWriter, id json.RawMessage) {
			replySSE(w, ack(id, `["t1"]`), notify(id, "working", ""), notify(id, "completed", `"result":`+okResult))
		}, 0},
		{"stream ends early", func(w http.ResponseWriter, id json.RawMessage) {
			replySSE(w, ack(id, `["t1"]`), notify(id, "working", ""))
		}, 1},
		{"listen not supported", func(w http.ResponseWriter, id json.RawMessage) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, errFrame(id, CodeMethodNotFound, "Method not found"))
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := listenFake(t, tc.stream)
			c := fakeClient(t, f, Options{})
			final, err := c.WaitByNotifications(context.Background(), "t1")
			if err != nil || final.Status != StatusCompleted {
				t.Fatalf("%v %+v", err, final)
			}
			if o, err := OutcomeOf(final); err != nil || string(o.Result) != okResult {
				t.Fatalf("OutcomeOf: %v %+v", err, o)
			}
			if n := len(f.requests("tasks/get")); n != tc.gets {
				t.Fatalf("%d tasks/get, want %d", n, tc.gets)
			}
		})
	}
}

func TestNewRejectsBadEndpoint(t *testing.T) {
	t.Parallel()
	for _, e := range []string{"", "localhost:8080", "ftp://x/mcp", "http://"} {
		if _, err := New(Options{Endpoint: e}); err == nil {
			t.Errorf("New(%q) succeeded", e)
		}
	}
}

func TestHeaderValue(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"generate":   "generate",
		"abc123":     "abc123",
		" padded":    "=?base64?IHBhZGRlZA==?=",
		"naïve":      "=?base64?bmHDr3Zl?=",
		"tab\tinner": "=?base64?dGFiCWlubmVy?=",
	}
	for in, want := range cases {
		if got := headerValue(in); got != want {
			t.Errorf("headerValue(%q) = %q, want %q", in, got, want)
		}
	}
}
