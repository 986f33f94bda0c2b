package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/server/edge"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixtures runs the tasks scenarios' fixture tools as tasks of kind
// "fixture": a goroutine per task stands in for real work.
type fixtures struct {
	d       *tasks.Dispatcher
	store   *tasks.Store
	mu      sync.Mutex
	cancels map[string]context.CancelFunc
}

const fixtureOwner = "conformance"

func registerTaskFixtures(s *mcp.Server, d *tasks.Dispatcher, lean *edge.Engine) {
	f := &fixtures{d: d, store: d.Store(), cancels: map[string]context.CancelFunc{}}
	d.Register("fixture", f)
	obj := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(required)
		if required == nil {
			req = []byte("[]")
		}
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
	}
	// The dispatcher serves the fixtures below go-sdk as darkroom's
	// generate is, every outcome answered there: the suite then checks
	// that path too.
	add := func(name, desc string, schema json.RawMessage, h tasks.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: schema}, d.SDKTool(h))
		if name != "test_tool_with_task" { // it asks by MRTR first, an answer only go-sdk encodes
			lean.ServeTool(name, edge.Tool{Task: h})
		}
	}
	s.AddTool(&mcp.Tool{Name: "greet", Description: "Greets by name (synchronous).", InputSchema: obj(`"name":{"type":"string"}`, "name")}, f.greet)
	add("slow_compute", "Sleeps seconds, then answers; runs as a task when the client allows.",
		obj(`"seconds":{"type":"integer","minimum":0},"label":{"type":"string"}`), f.slowCompute)
	add("failing_job", "Requires tasks; ends with a tool error after about a second.", obj(``), f.failingJob)
	add("protocol_error_job", "Ends failed with a JSON-RPC error.", obj(``), f.protocolErrorJob)
	add("confirm_delete", "Asks for confirmation through a task input request.", obj(`"filename":{"type":"string"}`), f.confirmDelete)
	add("multi_input", "Asks two questions at once through task input requests.", obj(``), f.multiInput)
	add("test_tool_with_task", "Asks for a name by MRTR, then answers through a task.", obj(``), f.toolWithTask)
}

func text(s string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}, IsError: isError}
}

func resultJSON(r *mcp.CallToolResult) json.RawMessage {
	b, _ := json.Marshal(r)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["resultType"] = "complete"
	b, _ = json.Marshal(m)
	return b
}

func args[T any](req *mcp.CallToolRequest) T {
	var v T
	_ = json.Unmarshal(req.Params.Arguments, &v)
	return v
}

func (f *fixtures) greet(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a := args[struct{ Name string }](req)
	return text(fmt.Sprintf("Hello, %s!", a.Name), false), nil
}

// start creates a task for req and runs work in the background; work's
// outcome (a result or an error) finishes the task unless it was
// cancelled first.
func (f *fixtures) start(ctx context.Context, req *mcp.CallToolRequest, name string, setup func(t *tasks.Task), work func(ctx context.Context, t *tasks.Task) (*mcp.CallToolResult, *tasks.Error)) (tasks.ToolOutcome, error) {
	t := &tasks.Task{Owner: fixtureOwner, Ref: "fixture:" + name, TTL: time.Hour, PollInterval: 200 * time.Millisecond, ClientCaps: tasks.CapsJSON(req)}
	status := tasks.StatusWorking
	if setup != nil {
		setup(t)
		if len(t.InputRequests) > 0 {
			status = tasks.StatusInputRequired
		}
	}
	t.Status = status
	if err := f.store.Write(ctx, "", func(ctx context.Context, tx tasks.Tx) error { return f.store.Create(ctx, tx, t) }); err != nil {
		return tasks.ToolOutcome{}, err
	}
	if work != nil {
		f.run(t, work)
	}
	return tasks.ToolOutcome{Task: t}, nil
}

func (f *fixtures) run(t *tasks.Task, work func(ctx context.Context, t *tasks.Task) (*mcp.CallToolResult, *tasks.Error)) {
	ctx, cancel := context.WithCancel(context.Background())
	f.mu.Lock()
	f.cancels[t.ID] = cancel
	f.mu.Unlock()
	go func() {
		defer cancel()
		res, terr := work(ctx, t)
		if ctx.Err() != nil {
			return // cancelled: Cancel already finished the task
		}
		f.finish(t.ID, res, terr)
	}()
}

func (f *fixtures) finish(id string, res *mcp.CallToolResult, terr *tasks.Error) {
	ctx := context.Background()
	_ = f.store.Write(ctx, id, func(ctx context.Context, tx tasks.Tx) error {
		var err error
		if terr != nil {
			_, err = f.store.Finish(ctx, tx, id, tasks.StatusFailed, terr.Message, nil, terr)
		} else {
			_, err = f.store.Finish(ctx, tx, id, tasks.StatusCompleted, "done", resultJSON(res), nil)
		}
		return err
	})
	f.mu.Lock()
	delete(f.cancels, id)
	f.mu.Unlock()
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (f *fixtures) slowCompute(ctx context.Context, req *mcp.CallToolRequest) (tasks.ToolOutcome, error) {
	a := args[struct {
		Seconds int
		Label   string
	}](req)
	d := time.Duration(a.Seconds) * time.Second
	answer := fmt.Sprintf("computed %s after %ds", a.Label, a.Seconds)
	if !tasks.Declared(req) {
		if !sleep(ctx, d) {
			return tasks.ToolOutcome{}, ctx.Err()
		}
		return tasks.ToolOutcome{Result: text(answer, false)}, nil
	}
	return f.start(ctx, req, "slow_compute", nil, func(ctx context.Context, t *tasks.Task) (*mcp.CallToolResult, *tasks.Error) {
		sleep(ctx, d)
		return text(answer, false), nil
	})
}

func (f *fixtures) failingJob(ctx context.Context, req *mcp.CallToolRequest) (tasks.ToolOutcome, error) {
	if !tasks.Declared(req) {
		return tasks.ToolOutcome{}, tasks.MissingExtension()
	}
	return f.start(ctx, req, "failing_job", nil, func(ctx context.Context, t *tasks.Task) (*mcp.CallToolResult, *tasks.Error) {
		sleep(ctx, time.Second)
		return text("the job failed: simulated tool error", true), nil
	})
}

func (f *fixtures) protocolErrorJob(ctx context.Context, req *mcp.CallToolRequest) (tasks.ToolOutcome, error) {
	terr := &tasks.Error{Code: tasks.CodeInternal, Message: "simulated internal failure"}
	if !tasks.Declared(req) {
		return tasks.ToolOutcome{}, &tasks.RPCError{Code: terr.Code, Message: terr.Message}
	}
	return f.start(ctx, req, "protocol_error_job", nil, func(ctx context.Context, t *tasks.Task) (*mcp.CallToolResult, *tasks.Error) {
		sleep(ctx, 100*time.Millisecond)
		return nil, terr
	})
}

func elicit(message string, props string, required ...string) map[string]any {
	var schema map[string]any
	_ = json.Unmarshal([]byte(`{"type":"object","properties":{`+props+`}}`), &schema)
	if len(required) > 0 {
		schema["required"] = required
	}
	return map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "form", "message": message, "requestedSchema": schema}}
}

func (f *fixtures) confirmDelete(ctx context.Context, req *mcp.CallToolRequest) (tasks.ToolOutcome, error) {
	a := args[struct{ Filename string }](req)
	if !tasks.Declared(req) {
		return tasks.ToolOutcome{Result: text(fmt.Sprintf("%s was not deleted: confirmation needs the tasks extension", a.Filename), false)}, nil
	}
	return f.start(ctx, req, "confirm_delete", func(t *tasks.Task) {
		t.StatusMessage = "waiting for confirmation"
		t.AddInputRequest("confirm", elicit("Delete "+a.Filename+"?", `"confirm":{"type":"boolean"}`, "confirm"))
	}, nil)
}

func (f *fixtures) multiInput(ctx context.Context, req *mcp.CallToolRequest) (tasks.ToolOutcome, error) {
	if !tasks.Declared(req) {
		return tasks.ToolOutcome{Result: text("multi_input needs the tasks extension", true)}, nil
	}
	return f.start(ctx, req, "multi_input", func(t *tasks.Task) {
		t.StatusMessage = "waiting for two answers"
		t.AddInputRequest("name", elicit("Your name?", `"name":{"type":"string"}`, "name"))
		t.AddInputRequest("confirm", elicit("Proceed?", `"confirm":{"type":"boolean"}`, "confirm"))
	}, nil)
}

func (f *fixtures) toolWithTask(ctx context.Context, req *mcp.CallToolRequest) (tasks.ToolOutcome, error) {
	if !tasks.Declared(req) {
		return tasks.ToolOutcome{}, tasks.MissingExtension()
	}
	resp, ok := req.Params.InputResponses["user_name"].(*mcp.ElicitResult)
	name, _ := func() (string, bool) {
		if !ok || resp == nil || resp.Action != "accept" {
			return "", false
		}
		n, ok := resp.Content["name"].(string)
		return n, ok
	}()
	if name == "" {
		return tasks.ToolOutcome{Result: &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
			"user_name": &mcp.ElicitParams{Message: "What is your name?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}}},
		}}}, nil
	}
	return f.start(ctx, req, "test_tool_with_task", nil, func(ctx context.Context, t *tasks.Task) (*mcp.CallToolResult, *tasks.Error) {
		return text(fmt.Sprintf("Hello, %s! Your task is done.", name), false), nil
	})
}

// Cancel ends a fixture task cancelled at once and stops its work.
func (f *fixtures) Cancel(ctx context.Context, t *tasks.Task) error {
	f.mu.Lock()
	if cancel, ok := f.cancels[t.ID]; ok {
		cancel()
		delete(f.cancels, t.ID)
	}
	f.mu.Unlock()
	return f.store.Write(ctx, t.ID, func(ctx context.Context, tx tasks.Tx) error {
		_, err := f.store.Finish(ctx, tx, t.ID, tasks.StatusCancelled, "cancelled at the client's request", nil, nil)
		return err
	})
}

// Answered resumes a fixture task once every input request is answered.
func (f *fixtures) Answered(ctx context.Context, t *tasks.Task, answers map[string]json.RawMessage) error {
	if len(t.InputRequests) > 0 {
		return nil // still waiting for the rest
	}
	var parts []string
	declined := false
	for _, k := range t.AnsweredKeys {
		var r struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		}
		_ = json.Unmarshal(t.InputResponses[k], &r)
		if r.Action != "accept" {
			declined = true
		}
		parts = append(parts, fmt.Sprintf("%s=%s %v", k, r.Action, r.Content))
	}
	msg := "confirmed: " + strings.Join(parts, ", ")
	if declined {
		msg = "not confirmed: " + strings.Join(parts, ", ")
	}
	f.finish(t.ID, text(msg, false), nil)
	return nil
}

// Result is unused: fixture tasks store their results.
func (f *fixtures) Result(ctx context.Context, t *tasks.Task) (json.RawMessage, error) {
	return nil, fmt.Errorf("fixture task %s has no stored result", t.ID)
}
