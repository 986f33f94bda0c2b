package gentask_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentask"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/testclock"
	"github.com/darkroom-mcp/darkroom/internal/testrig"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestTaskStatus(t *testing.T) {
	tests := []struct {
		status generation.Status
		kind   generation.ErrorKind
		want   tasks.Status
	}{
		{generation.StatusReserved, "", tasks.StatusWorking},
		{generation.StatusQueued, "", tasks.StatusWorking},
		{generation.StatusRunning, "", tasks.StatusWorking},
		{generation.StatusCompleted, "", tasks.StatusCompleted},
		{generation.StatusFailed, generation.ErrorProvider, tasks.StatusCompleted}, // a tool error
		{generation.StatusFailed, generation.ErrorInternal, tasks.StatusFailed},
		{generation.StatusCancelled, "", tasks.StatusCancelled},
	}
	for _, tt := range tests {
		t.Run(string(tt.status)+"/"+string(tt.kind), func(t *testing.T) {
			got, ok := gentask.TaskStatus(&generation.Generation{Status: tt.status, ErrorKind: tt.kind})
			if !ok || got != tt.want {
				t.Fatalf("TaskStatus = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
	for _, s := range generation.Statuses {
		if _, ok := gentask.TaskStatus(&generation.Generation{Status: s, ErrorKind: generation.ErrorInternal}); !ok {
			t.Errorf("no task status for %s", s)
		}
	}
}

// rig is a generation service on the embedded engine with GenTasks over
// it, decorating the tools' generate; spends above 0 credits need
// approval.
func rig(t *testing.T) *gentask.GenTasks {
	t.Helper()
	parts := testrig.New(t)
	disp := tasks.NewDispatcher(tasks.Options{Store: tasks.NewStore(parts.DB.Tasks(), nil)})
	mirror := gentask.NewMirror(disp)
	svc := parts.Service(t, generation.Config{Observer: mirror})
	zero := int64(0)
	g := &gentask.GenTasks{Mirror: mirror, Svc: svc, TTL: time.Hour,
		Approval:      gentask.ApprovalToken{Secret: bytes.Repeat([]byte{9}, 32)},
		ApprovalAbove: func(context.Context) *int64 { return &zero }}
	g.Register(gentools.New(gentools.Config{Service: svc, Owner: ownerOf}))
	return g
}

type ownerKey struct{}

// as is ctx serving owner (the rig's tools read it: ownerOf).
func as(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

func ownerOf(ctx context.Context, _ *mcp.CallToolRequest) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

func call(args map[string]any, state string, confirm *bool) *mcp.CallToolRequest {
	raw, _ := json.Marshal(args)
	p := &mcp.CallToolParamsRaw{Name: "generate", Arguments: raw, RequestState: state,
		Meta: mcp.Meta{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}}}
	if confirm != nil {
		p.InputResponses = mcp.InputResponseMap{"approve_spend": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": *confirm}}}
	}
	return &mcp.CallToolRequest{Params: p}
}

// TestApprovalWithoutTasks asks a spend approval by MRTR and accepts the
// answer for the same caller and arguments only, whatever the principal
// id holds (Auth0 subjects contain '|').
func TestApprovalWithoutTasks(t *testing.T) {
	g := rig(t)
	ctx := context.Background()
	args := map[string]any{"modelId": "local-sketch", "prompt": "a heron"}
	yes := true
	for _, owner := range []string{"auth0|5f7c8ec7e5b1", "a b", "x=y", "José|ü", "a.b", "|"} {
		t.Run(owner, func(t *testing.T) {
			ctx := as(ctx, owner)
			out, err := g.Generate(ctx, call(args, "", nil))
			ask := out.Result
			if err != nil || out.Task != nil || ask == nil || ask.RequestState == "" || ask.InputRequests["approve_spend"] == nil {
				t.Fatalf("first call: %v %+v", err, out)
			}
			out, err = g.Generate(ctx, call(args, ask.RequestState, &yes))
			if gens, _, _ := g.Svc.List(ctx, owner, "", "", 10); err != nil || out.Task != nil || out.Result == nil || out.Result.IsError ||
				out.Result.InputRequests != nil || len(gens) != 1 {
				t.Fatalf("approved answer for %q not accepted: %v %+v, %d generations", owner, err, out, len(gens))
			}
			// Another caller, or other arguments, with the same token: asked again.
			other := map[string]any{"modelId": "local-sketch", "prompt": "another"}
			for _, c := range []struct {
				owner string
				args  map[string]any
			}{{owner + "x", args}, {"x" + owner, args}, {owner, other}} {
				out, err := g.Generate(as(ctx, c.owner), call(c.args, ask.RequestState, &yes))
				if err != nil || out.Result == nil || out.Result.InputRequests["approve_spend"] == nil {
					t.Fatalf("token reused by %q %v: %v %+v", c.owner, c.args, err, out)
				}
			}
		})
	}
}

// TestTaskFollowsGeneration: a Tasks client's generate creates the task
// in the generation's transaction, and the task follows the generation
// to its end (here a cancel) through the mirror.
func TestTaskFollowsGeneration(t *testing.T) {
	g := rig(t)
	g.ApprovalAbove = func(context.Context) *int64 { return nil }
	ctx := context.Background()
	args, _ := json.Marshal(map[string]any{"modelId": "local-sketch", "prompt": "a heron"})
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "generate", Arguments: args,
		Meta: mcp.Meta{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}}}}
	ctx = as(ctx, "alice")
	// Served as go-sdk's path serves it: SDKMiddleware sends the task the
	// handler created.
	serve := tasks.SDKMiddleware()(func(ctx context.Context, _ string, _ mcp.Request) (mcp.Result, error) {
		return g.D.SDKTool(g.Generate)(ctx, req)
	})
	res, err := serve(ctx, "tools/call", &mcp.CallToolRequest{})
	if b, _ := json.Marshal(res); err != nil || !strings.Contains(string(b), `"resultType":"task"`) {
		t.Fatalf("generate = %s, %v; want the created task", b, err)
	}
	gens, _, err := g.Svc.List(ctx, "alice", "", "", 10)
	if err != nil || len(gens) != 1 {
		t.Fatalf("generations: %v %d", err, len(gens))
	}
	task, err := g.D.Store().ByRef(ctx, nil, "generation:"+gens[0].ID)
	if err != nil || task.Status != tasks.StatusWorking || task.Owner != "alice" {
		t.Fatalf("task: %v %+v", err, task)
	}
	if _, _, err := g.Svc.Cancel(ctx, "alice", gens[0].ID); err != nil {
		t.Fatal(err)
	}
	after, err := g.D.Store().Get(ctx, task.ID)
	if err != nil || after.Status != tasks.StatusCancelled {
		t.Fatalf("after cancel: %v %+v", err, after)
	}
}

// TestTaskFailsWhenReservationExpires: a Tasks client's generate that
// waits for an upload nobody makes does not stay working for its whole
// TTL: once the reservation expires, its task is failed, saying why.
func TestTaskFailsWhenReservationExpires(t *testing.T) {
	clock := testclock.New(time.Now())
	parts := testrig.New(t)
	disp := tasks.NewDispatcher(tasks.Options{Store: tasks.NewStore(parts.DB.Tasks(), nil)})
	mirror := gentask.NewMirror(disp)
	svc := parts.Service(t, generation.Config{Observer: mirror, Now: clock.Now, ReservationTTL: 30 * time.Minute})
	g := &gentask.GenTasks{Mirror: mirror, Svc: svc, TTL: 24 * time.Hour, ApprovalAbove: func(context.Context) *int64 { return nil }}
	g.Register(gentools.New(gentools.Config{Service: svc, Owner: ownerOf}))
	ctx := as(context.Background(), "alice")
	var png64 bytes.Buffer
	_ = png.Encode(&png64, image.NewRGBA(image.Rect(0, 0, 64, 64)))
	args, _ := json.Marshal(map[string]any{"modelId": "local-edit", "prompt": "erase the boat", "inputs": []map[string]any{
		{"role": "image", "image": map[string]any{"data": base64.StdEncoding.EncodeToString(png64.Bytes()), "mimeType": "image/png"}}, {"role": "mask"}}})
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "generate", Arguments: args,
		Meta: mcp.Meta{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}}}}
	if out, err := g.Generate(ctx, req); err != nil || out.Task == nil {
		t.Fatalf("generate = %+v, %v; want a task", out, err)
	}
	gens, _, err := svc.List(ctx, "alice", "", "", 10)
	if err != nil || len(gens) != 1 || !gens[0].UploadRequired() {
		t.Fatalf("generations: %v %+v", err, gens)
	}
	task, err := disp.Store().ByRef(ctx, nil, "generation:"+gens[0].ID)
	if err != nil || task.Status != tasks.StatusWorking {
		t.Fatalf("task: %v %+v", err, task)
	}
	clock.Advance(31 * time.Minute)
	if n, err := svc.ExpireReservations(ctx); n != 1 || err != nil {
		t.Fatalf("ExpireReservations = %d, %v", n, err)
	}
	after, err := disp.Store().Get(ctx, task.ID)
	if err != nil || after.Status != tasks.StatusFailed || after.Error == nil || !strings.Contains(after.Error.Message, "its mask never came") ||
		!strings.Contains(after.StatusMessage, "refunded") {
		t.Fatalf("task after the reservation expired: %v %+v", err, after)
	}
}
