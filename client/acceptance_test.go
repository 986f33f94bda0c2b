package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The seed acceptance checks: darkroom runs as a subprocess, the client
// drives it over HTTP.

// (1) A video generation driven to completion by polling.
func TestAcceptancePollToCompletion(t *testing.T) {
	t.Parallel()
	d := startDarkroom(t, t.TempDir())
	counter := &methodCounter{}
	c := newClient(t, Options{Endpoint: d.endpoint(), StatePath: filepath.Join(t.TempDir(), "state.db"),
		HTTPClient: &http.Client{Transport: counter}})
	ctx := testContext(t)
	out, err := c.CallTool(ctx, "generate", videoArgs("a lighthouse at dusk"))
	if err != nil {
		t.Fatal(err)
	}
	if out.TaskID == "" || out.Task == nil || out.Task.Status != StatusCompleted {
		t.Fatalf("outcome: task %q, %+v", out.TaskID, out.Task)
	}
	checkOutput(t, out.Result)
	if n := counter.count("tasks/get"); n < 1 {
		t.Fatalf("tasks/get calls = %d", n)
	}
	if p, err := c.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after completion: %v, %+v", err, p)
	}
	// A synchronous tool comes back without a task.
	models, err := c.CallTool(ctx, "list_models", nil)
	if err != nil || models.TaskID != "" || models.IsError() {
		t.Fatalf("list_models: %v %+v", err, models)
	}
}

// (2) The same, followed by notifications/tasks instead of polling.
func TestAcceptanceNotifications(t *testing.T) {
	t.Parallel()
	d := startDarkroom(t, t.TempDir())
	counter := &methodCounter{}
	c := newClient(t, Options{Endpoint: d.endpoint(), StatePath: filepath.Join(t.TempDir(), "state.db"),
		HTTPClient: &http.Client{Transport: counter}})
	ctx := testContext(t)
	started, err := c.Start(ctx, "generate", videoArgs("a train crossing a bridge"))
	if err != nil {
		t.Fatal(err)
	}
	if started.TaskID == "" || started.Result != nil {
		t.Fatalf("Start: %+v", started)
	}
	final, err := c.WaitByNotifications(ctx, started.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != StatusCompleted {
		t.Fatalf("final: %+v", final)
	}
	checkOutput(t, final.Result)
	if n := counter.count("tasks/get"); n != 0 {
		t.Fatalf("WaitByNotifications polled %d times", n)
	}
	if n := counter.count("subscriptions/listen"); n != 1 {
		t.Fatalf("subscriptions/listen calls = %d", n)
	}
	if p, _ := c.Pending(); len(p) != 0 {
		t.Fatalf("pending: %+v", p)
	}

	// Listen on an ended task and an unknown one: only the known task's
	// final state, then the server ends the subscription.
	var got []DetailedTask
	if err := c.Listen(ctx, []string{started.TaskID, "0123456789abcdef0123456789abcdef"}, func(t DetailedTask) { got = append(got, t) }); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	if len(got) != 1 || got[0].TaskID != started.TaskID || got[0].Status != StatusCompleted || len(got[0].Result) == 0 {
		t.Fatalf("Listen delivered %+v", got)
	}
}

// (3) tasks/cancel is acknowledged and the task ends cancelled.
func TestAcceptanceCancel(t *testing.T) {
	t.Parallel()
	d := startDarkroom(t, t.TempDir())
	c := newClient(t, Options{Endpoint: d.endpoint(), StatePath: filepath.Join(t.TempDir(), "state.db")})
	ctx := testContext(t)
	started, err := c.Start(ctx, "generate", videoArgs("a slow pan"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, started.TaskID); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	out, err := c.Wait(ctx, started.TaskID)
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("Wait after cancel: %v (%+v)", err, out)
	}
	if out == nil || out.Task == nil || out.Task.Status != StatusCancelled || out.Result != nil {
		t.Fatalf("cancelled outcome: %+v", out)
	}
	if p, _ := c.Pending(); len(p) != 0 {
		t.Fatalf("pending: %+v", p)
	}
	// Idempotent on a terminal task.
	if err := c.Cancel(ctx, started.TaskID); err != nil {
		t.Fatalf("second Cancel: %v", err)
	}
	// An unknown task is -32602.
	var re *RPCError
	if err := c.Cancel(ctx, "0123456789abcdef0123456789abcdef"); !errors.As(err, &re) || re.Code != CodeInvalidParams {
		t.Fatalf("Cancel unknown: %v", err)
	}
	if _, err := c.Wait(ctx, "0123456789abcdef0123456789abcdef"); !errors.Is(err, ErrTaskNotFound) {
		t.Fatalf("Wait unknown: %v", err)
	}
}

// rawCall posts one tools/call without the Tasks extension in _meta and
// returns the result object.
func rawCall(t *testing.T, endpoint string, id int, tool string, args map[string]any) map[string]json.RawMessage {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
		"_meta": map[string]any{
			metaProtocolVersion:    ProtocolVersion,
			metaClientCapabilities: map[string]any{},
			metaClientInfo:         map[string]any{"name": "raw", "version": "1"},
		},
		"name": tool, "arguments": args,
	}})
	req, _ := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", ProtocolVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", tool, resp.StatusCode, raw)
	}
	// The body is one JSON object or SSE: take the message with our id.
	var frames [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data:"); ok {
				frames = append(frames, []byte(strings.TrimSpace(v)))
			}
		}
	} else {
		frames = [][]byte{raw}
	}
	for _, f := range frames {
		var m struct {
			ID     json.RawMessage            `json:"id"`
			Result map[string]json.RawMessage `json:"result"`
			Error  json.RawMessage            `json:"error"`
		}
		if json.Unmarshal(f, &m) != nil || string(m.ID) != fmt.Sprint(id) {
			continue
		}
		if m.Error != nil {
			t.Fatalf("%s: error %s", tool, m.Error)
		}
		return m.Result
	}
	t.Fatalf("%s: no response in %s", tool, raw)
	return nil
}

// (4) A client that did not declare the extension never gets a task
// handle, from any of the nine tools.
func TestAcceptanceNoExtensionNoTask(t *testing.T) {
	t.Parallel()
	d := startDarkroom(t, t.TempDir())
	var buf bytes.Buffer
	_ = png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 64, 36)))
	pngData := base64.StdEncoding.EncodeToString(buf.Bytes())

	var genID, animateID string
	id := 0
	structured := func(res map[string]json.RawMessage) generationView {
		var g generationView
		_ = json.Unmarshal(res["structuredContent"], &g)
		return g
	}
	cases := []struct {
		tool  string
		args  func(t *testing.T) map[string]any
		after func(t *testing.T, res map[string]json.RawMessage)
	}{
		{tool: "list_models", args: func(*testing.T) map[string]any { return map[string]any{} }},
		{tool: "get_credits", args: func(*testing.T) map[string]any { return map[string]any{} }},
		{tool: "generate", args: func(*testing.T) map[string]any { return videoArgs("no tasks here") },
			after: func(t *testing.T, res map[string]json.RawMessage) {
				if genID = structured(res).GenerationID; genID == "" {
					t.Fatalf("generate gave no generationId")
				}
			}},
		{tool: "get_generation", args: func(*testing.T) map[string]any { return map[string]any{"generationId": genID} }},
		{tool: "wait_generation", args: func(*testing.T) map[string]any { return map[string]any{"generationId": genID, "timeoutSeconds": 30} },
			after: func(t *testing.T, res map[string]json.RawMessage) {
				if s := structured(res).Status; s != "completed" {
					t.Fatalf("wait_generation: %s", s)
				}
			}},
		{tool: "download_output", args: func(*testing.T) map[string]any { return map[string]any{"generationId": genID} }},
		{tool: "list_generations", args: func(*testing.T) map[string]any { return map[string]any{} }},
		{tool: "upload_input", args: func(t *testing.T) map[string]any {
			// An image-to-video generation waiting for its input image.
			id++
			res := rawCall(t, d.endpoint(), 1000+id, "generate", map[string]any{"modelId": "local-animate", "prompt": "ripples", "durationSeconds": 2})
			animateID = structured(res).GenerationID
			return map[string]any{"generationId": animateID, "image": map[string]any{"data": pngData, "mimeType": "image/png"}}
		}},
		{tool: "cancel_generation", args: func(*testing.T) map[string]any { return map[string]any{"generationId": animateID} }},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			id++
			res := rawCall(t, d.endpoint(), id, tc.tool, tc.args(t))
			var rt string
			_ = json.Unmarshal(res["resultType"], &rt)
			if rt != "complete" {
				t.Fatalf("resultType %q", rt)
			}
			if _, ok := res["taskId"]; ok {
				t.Fatalf("top-level taskId in %v", res)
			}
			var isError bool
			_ = json.Unmarshal(res["isError"], &isError)
			if isError {
				t.Fatalf("tool error: %s", res["content"])
			}
			if tc.after != nil {
				tc.after(t, res)
			}
			seen[tc.tool] = true
		})
	}
	if len(seen) != 9 {
		t.Fatalf("covered %d of the nine tools", len(seen))
	}
}

// (5) Resume: a task started by one Client is finished by another on the
// same state file, as after a restart of the client's process.
func TestAcceptanceResume(t *testing.T) {
	t.Parallel()
	d := startDarkroom(t, t.TempDir())
	statePath := filepath.Join(t.TempDir(), "state.db")
	ctx := testContext(t)
	args := videoArgs("a river at night")
	c1, err := New(Options{Endpoint: d.endpoint(), StatePath: statePath})
	if err != nil {
		t.Fatal(err)
	}
	started, err := c1.Start(ctx, "generate", args)
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}

	c2 := newClient(t, Options{Endpoint: d.endpoint(), StatePath: statePath})
	pending, err := c2.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 {
		t.Fatalf("pending: %+v", pending)
	}
	p := pending[0]
	var gotArgs map[string]any
	_ = json.Unmarshal(p.Args, &gotArgs)
	if p.TaskID != started.TaskID || p.Tool != "generate" || gotArgs["prompt"] != args["prompt"] ||
		p.TTLMs == nil || *p.TTLMs <= 0 || p.PollIntervalMs <= 0 || p.CreatedAt.IsZero() || p.Status.Terminal() {
		t.Fatalf("pending task: %+v", p)
	}
	resumed, err := c2.Resume(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(resumed) != 1 || resumed[0].TaskID != started.TaskID || resumed[0].Err != nil {
		t.Fatalf("resumed: %+v", resumed)
	}
	checkOutput(t, resumed[0].Outcome.Result)
	if p, _ := c2.Pending(); len(p) != 0 {
		t.Fatalf("pending after Resume: %+v", p)
	}
}

// (6) Durability: darkroom is killed -9 right after the CreateTaskResult
// arrives and restarted on the same data directory (on a new port): the
// task is still there and completes.
func TestAcceptanceKill9(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	statePath := filepath.Join(t.TempDir(), "state.db")
	ctx := testContext(t)
	d1 := startDarkroom(t, data)
	c1 := newClient(t, Options{Endpoint: d1.endpoint(), StatePath: statePath})
	started, err := c1.Start(ctx, "generate", videoArgs("a storm over the sea"))
	if err != nil {
		t.Fatal(err)
	}
	d1.kill()

	d2 := startDarkroom(t, data)
	if d2.base == d1.base {
		t.Logf("restarted on the same address %s", d2.base)
	}
	c2 := newClient(t, Options{Endpoint: d2.endpoint(), StatePath: statePath})
	out, err := c2.Wait(ctx, started.TaskID)
	if err != nil {
		t.Fatalf("Wait after restart: %v", err)
	}
	checkOutput(t, out.Result)
}

// (7) Spend approval asked as task input: accepted, the generation runs;
// declined, the task ends cancelled.
func TestAcceptanceApproval(t *testing.T) {
	t.Parallel()
	d := startDarkroom(t, t.TempDir(), "DARKROOM_APPROVAL_ABOVE_CREDITS=5")
	cases := []struct {
		name            string
		answer          string
		byNotifications bool
		wantErr         error
	}{
		{"accept", `{"action":"accept","content":{"confirm":true}}`, false, nil},
		{"decline", `{"action":"decline"}`, false, ErrCancelled},
		{"accept by notifications", `{"action":"accept","content":{"confirm":true}}`, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var asked []string
			var taskIDs []string
			c := newClient(t, Options{Endpoint: d.endpoint(), StatePath: filepath.Join(t.TempDir(), "state.db"),
				OnInput: func(ctx context.Context, taskID, key string, request json.RawMessage) (json.RawMessage, error) {
					var r struct {
						Method string `json:"method"`
						Params struct {
							Message         string         `json:"message"`
							RequestedSchema map[string]any `json:"requestedSchema"`
						} `json:"params"`
					}
					if err := json.Unmarshal(request, &r); err != nil || r.Method != "elicitation/create" || r.Params.RequestedSchema == nil {
						return nil, fmt.Errorf("unexpected input request %s", request)
					}
					mu.Lock()
					asked = append(asked, key)
					taskIDs = append(taskIDs, taskID)
					mu.Unlock()
					if !strings.HasPrefix(key, "approve_spend") {
						return nil, fmt.Errorf("unexpected key %q", key)
					}
					return json.RawMessage(tc.answer), nil
				}})
			ctx := testContext(t)
			start := time.Now()
			var out *Outcome
			var err error
			if tc.byNotifications {
				if out, err = c.Start(ctx, "generate", videoArgs("an expensive "+tc.name)); err != nil {
					t.Fatal(err)
				}
				if out.Task.Status != StatusInputRequired {
					t.Fatalf("created task is %s, want input_required", out.Task.Status)
				}
				var final *DetailedTask
				if final, err = c.WaitByNotifications(ctx, out.TaskID); err == nil {
					out, err = OutcomeOf(final)
				}
			} else {
				out, err = c.CallTool(ctx, "generate", videoArgs("an expensive "+tc.name))
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("CallTool: %v, want %v", err, tc.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 || out == nil || taskIDs[0] != out.TaskID {
				t.Fatalf("asked %v for tasks %v (outcome %+v)", asked, taskIDs, out)
			}
			if tc.wantErr == nil {
				checkOutput(t, out.Result)
			} else if out.Task.Status != StatusCancelled {
				t.Fatalf("declined task is %s", out.Task.Status)
			}
			t.Logf("%s: %s", tc.name, time.Since(start).Round(time.Millisecond))
		})
	}
}
