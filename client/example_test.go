package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/client"
)

// The examples talk to standIn, a small in-process stand-in for darkroom's
// /mcp endpoint (the real server is assembled in package main; the
// acceptance tests run it as a process). It speaks just enough of the
// Tasks wire: server/discover, and generate as a task that completes on
// its second tasks/get, after a spend approval (input_required, answered
// by tasks/update) for models costing more than 10 credits.

func Example() {
	srv := standIn()
	defer srv.Close()

	c, err := client.New(client.Options{Endpoint: srv.URL + "/mcp"}) // no StatePath: state in memory
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	d, err := c.Discover(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tasks extension:", d.Tasks)

	// CallTool creates the task, polls tasks/get until it ends, and
	// returns the CallToolResult.
	out, err := c.CallTool(ctx, "generate", map[string]any{"modelId": "local-sketch", "prompt": "a lighthouse at dusk"})
	if err != nil {
		log.Fatal(err)
	}
	var gen struct {
		GenerationID string `json:"generationId"`
		Status       string `json:"status"`
		Outputs      []struct {
			MimeType string `json:"mimeType"`
		} `json:"outputs"`
	}
	if err := out.StructuredContent(&gen); err != nil {
		log.Fatal(err)
	}
	fmt.Println("task:", out.TaskID, out.Task.Status)
	fmt.Println("generation:", gen.GenerationID, gen.Status, gen.Outputs[0].MimeType)
	// Output:
	// tasks extension: true
	// task: task-1 completed
	// generation: gen-1 completed image/png
}

// Start records the task in the state file and returns at once; Wait
// follows it to the end. A process that died in between finds the task
// in Pending, and Resume finishes it.
func ExampleClient_Start() {
	srv := standIn()
	defer srv.Close()
	dir, err := os.MkdirTemp("", "darkroom-client")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	c, err := client.New(client.Options{Endpoint: srv.URL + "/mcp", StatePath: filepath.Join(dir, "state.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	started, err := c.Start(ctx, "generate", map[string]any{"modelId": "local-sketch", "prompt": "a slow pan"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("started:", started.TaskID, started.Task.Status)
	pending, err := c.Pending()
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range pending {
		fmt.Println("pending:", p.TaskID, p.Tool, string(p.Args))
	}

	out, err := c.Wait(ctx, started.TaskID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ended:", out.Task.Status, "tool error:", out.IsError())
	pending, _ = c.Pending()
	fmt.Println("pending now:", len(pending))
	// Output:
	// started: task-1 working
	// pending: task-1 generate {"modelId":"local-sketch","prompt":"a slow pan"}
	// ended: completed tool error: false
	// pending now: 0
}

// A task that needs input (darkroom asks before a spend above the caller's
// approval threshold) is answered through OnInput: the client sends each
// answer once, with tasks/update, and carries on polling.
func ExampleOptions_onInput() {
	srv := standIn()
	defer srv.Close()

	approve := func(ctx context.Context, taskID, key string, request json.RawMessage) (json.RawMessage, error) {
		var req struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		}
		if err := json.Unmarshal(request, &req); err != nil {
			return nil, err
		}
		fmt.Printf("%s asks (%s, key %s): %s\n", taskID, req.Method, key, req.Params.Message)
		return json.RawMessage(`{"action":"accept","content":{"confirm":true}}`), nil
	}
	c, err := client.New(client.Options{Endpoint: srv.URL + "/mcp", OnInput: approve})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	out, err := c.CallTool(context.Background(), "generate", map[string]any{"modelId": "local-motion", "prompt": "a train crossing a bridge"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("task:", out.TaskID, out.Task.Status)
	// Output:
	// task-1 asks (elicitation/create, key approve-1): local-motion costs 20 credits. Spend them?
	// task: task-1 completed
}

// standInTask is one task of the stand-in.
type standInTask struct {
	id, genID, model, mime string
	created                time.Time
	needsApproval          bool
	gets                   int
}

// standIn serves the stand-in endpoint; see the comment at the top.
func standIn() *httptest.Server {
	var mu sync.Mutex
	tasks := map[string]*standInTask{}
	credits := map[string]int{"local-sketch": 1, "local-motion": 20}
	mimes := map[string]string{"local-sketch": "image/png", "local-motion": "image/gif"}

	render := func(t *standInTask, resultType string) map[string]any {
		m := map[string]any{
			"resultType": resultType, "taskId": t.id, "status": "working",
			"createdAt": t.created, "lastUpdatedAt": t.created, "ttlMs": 60000, "pollIntervalMs": 10,
		}
		switch {
		case t.needsApproval:
			m["status"] = "input_required"
			m["inputRequests"] = map[string]any{"approve-1": map[string]any{"method": "elicitation/create", "params": map[string]any{
				"mode": "form", "message": fmt.Sprintf("%s costs %d credits. Spend them?", t.model, credits[t.model]),
				"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}},
			}}}
		case t.gets >= 2:
			m["status"] = "completed"
			gen := map[string]any{"generationId": t.genID, "status": "completed", "outputs": []any{map[string]any{"mimeType": t.mime}}}
			m["result"] = map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": "done"}}, "structuredContent": gen}
		}
		return m
	}

	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name           string                     `json:"name"`
				Arguments      map[string]any             `json:"arguments"`
				TaskID         string                     `json:"taskId"`
				InputResponses map[string]json.RawMessage `json:"inputResponses"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		var result any
		var rpcErr map[string]any
		p := req.Params
		switch {
		case req.Method == "server/discover":
			result = map[string]any{"resultType": "complete", "supportedVersions": []string{client.ProtocolVersion},
				"capabilities": map[string]any{"extensions": map[string]any{client.ExtensionID: map[string]any{}}}}
		case req.Method == "tools/call" && p.Name == "generate":
			model, _ := p.Arguments["modelId"].(string)
			n := len(tasks) + 1
			t := &standInTask{id: fmt.Sprintf("task-%d", n), genID: fmt.Sprintf("gen-%d", n), model: model, mime: mimes[model],
				created: time.Now().UTC(), needsApproval: credits[model] > 10}
			tasks[t.id] = t
			result = render(t, "task")
		case req.Method == "tasks/get" && tasks[p.TaskID] != nil:
			t := tasks[p.TaskID]
			if !t.needsApproval {
				t.gets++
			}
			result = render(t, "complete")
		case req.Method == "tasks/update" && tasks[p.TaskID] != nil:
			var answer struct {
				Action  string `json:"action"`
				Content struct {
					Confirm bool `json:"confirm"`
				} `json:"content"`
			}
			_ = json.Unmarshal(p.InputResponses["approve-1"], &answer)
			if answer.Action == "accept" && answer.Content.Confirm {
				tasks[p.TaskID].needsApproval = false
			}
			result = map[string]any{"resultType": "complete"}
		case req.Method == "tasks/get" || req.Method == "tasks/update" || req.Method == "tasks/cancel":
			rpcErr = map[string]any{"code": client.CodeInvalidParams, "message": "Task not found"}
		default:
			rpcErr = map[string]any{"code": client.CodeMethodNotFound, "message": "Method not found"}
		}
		msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if rpcErr != nil {
			msg["error"] = rpcErr
		} else {
			msg["result"] = result
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(msg)
	}))
}
