package gentask

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/compat"
	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// refPrefix marks tasks that follow a generation.
const refPrefix = "generation"

func genRef(id string) string { return refPrefix + ":" + id }

// GenTasks maps generations onto tasks for clients that declare the Tasks
// extension, and runs the spend-approval gate for every client. It is the
// tasks package's Kind for generation tasks and generation's Observer.
type GenTasks struct {
	D     *tasks.Dispatcher
	Svc   *generation.Service
	Tools *compat.Tools
	// TTL is a new task's lifetime.
	TTL time.Duration
	// ApprovalAbove returns the caller's spend threshold (nil: no gate).
	ApprovalAbove func(ctx context.Context) *int64
	// Approval signs and checks the MRTR requestState of a spend approval
	// asked without tasks.
	Approval ApprovalToken

	ids taskIndex
}

// taskIndex remembers which task follows a generation, which never
// changes: a status change then finds its task by id, without a search by
// ref. Bounded; a miss searches.
type taskIndex struct {
	mu sync.Mutex
	m  map[string]string
}

const taskIndexMax = 100_000

func (x *taskIndex) get(genID string) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	id, ok := x.m[genID]
	return id, ok
}

func (x *taskIndex) put(genID, taskID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil || len(x.m) >= taskIndexMax {
		x.m = map[string]string{}
	}
	x.m[genID] = taskID
}

// task finds the task following a generation, inside tx when non-nil.
func (g *GenTasks) task(ctx context.Context, tx tasks.Tx, genID string) (*tasks.Task, error) {
	store := g.D.Store()
	if id, ok := g.ids.get(genID); ok {
		if tx != nil {
			return store.GetTx(ctx, tx, id)
		}
		return store.Get(ctx, id)
	}
	t, err := store.ByRef(ctx, tx, genRef(genID))
	if err == nil {
		g.ids.put(genID, t.ID)
	}
	return t, err
}

const approveKeyPrefix = "approve_spend"

// Register makes g the kind of generation tasks and lets the dispatcher
// serve a Tasks client's generate itself (see tasks.ServeTool).
func (g *GenTasks) Register() {
	g.D.Register(refPrefix, g)
	g.D.ServeTool("generate", g.leanGenerate)
}

// leanGenerate is generate for the dispatcher's own tools/call path. A
// call with an input image goes the full way: the image is fetched or
// decoded before generate knows its answer, and a refused call would
// fetch it twice.
func (g *GenTasks) leanGenerate(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if bytes.Contains(req.Params.Arguments, []byte(`"inputImage"`)) {
		return nil, nil
	}
	return g.Tools.Generate(ctx, req)
}

// taskStatus is the status mapping of a generation onto its task, as
// data: a failure is a tool error (completed, result.isError) when the
// provider refused, and a task failure when darkroom failed.
var taskStatus = []struct {
	gen  generation.Status
	kind generation.ErrorKind // for failed only
	task tasks.Status
}{
	{generation.StatusReserved, "", tasks.StatusWorking}, // input_required while the approval is asked (see Changed)
	{generation.StatusQueued, "", tasks.StatusWorking},
	{generation.StatusRunning, "", tasks.StatusWorking},
	{generation.StatusCompleted, "", tasks.StatusCompleted},
	{generation.StatusFailed, generation.ErrorProvider, tasks.StatusCompleted},
	{generation.StatusFailed, generation.ErrorInternal, tasks.StatusFailed},
	{generation.StatusCancelled, "", tasks.StatusCancelled},
}

// TaskStatus maps a generation's status (and, when failed, its error
// kind) onto its task's status.
func TaskStatus(gen *generation.Generation) (tasks.Status, bool) {
	for _, m := range taskStatus {
		if m.gen == gen.Status && (m.kind == "" || m.kind == gen.ErrorKind) {
			return m.task, true
		}
	}
	return "", false
}

// unitOfWork is the task side of a generation's transaction: engines
// give one transaction that serves both stores.
func unitOfWork(tx generation.Tx) (tasks.Tx, error) {
	ttx, ok := tx.(tasks.Tx)
	if !ok {
		return nil, fmt.Errorf("gentask: the generation store's transaction %T is not a task store transaction", tx)
	}
	return ttx, nil
}

// Changed keeps the task row in step with its generation, inside the
// generation's write transaction. Terminal task states never change: the
// store's compare-and-set refuses.
func (g *GenTasks) Changed(ctx context.Context, gtx generation.Tx, gen *generation.Generation) error {
	tx, err := unitOfWork(gtx)
	if err != nil {
		return err
	}
	store := g.D.Store()
	t, err := g.task(ctx, tx, gen.ID)
	if errors.Is(err, tasks.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	status, ok := TaskStatus(gen)
	if !ok {
		return fmt.Errorf("gentask: no task status for generation status %q (%q)", gen.Status, gen.ErrorKind)
	}
	switch {
	case gen.Status == generation.StatusReserved && len(t.InputRequests) > 0:
		return nil // still waiting for the approval answer
	case !status.Terminal():
		msg := gen.StatusMessage
		if gen.Progress > 0 && !strings.Contains(msg, "%") {
			msg = fmt.Sprintf("%s (%.0f%%)", msg, gen.Progress*100)
		}
		if gen.Status != generation.StatusReserved {
			t.InputRequests = nil
		}
		_, err = store.SetActive(ctx, tx, t, status, msg)
	case status == tasks.StatusFailed:
		_, err = store.Finish(ctx, tx, t.ID, status, gen.StatusMessage, nil,
			&tasks.Error{Code: tasks.CodeInternal, Message: gen.ErrorMessage})
	default:
		// A completed result carries links minted per read: rendered by
		// Result.
		_, err = store.Finish(ctx, tx, t.ID, status, gen.StatusMessage, nil, nil)
	}
	return err
}

// Notify pushes a committed generation change to task listeners.
func (g *GenTasks) Notify(genID string) {
	if id, ok := g.ids.get(genID); ok {
		g.D.Store().Notify(id)
		return
	}
	if t, err := g.task(context.Background(), nil, genID); err == nil {
		g.D.Store().Notify(t.ID)
	}
}

func genID(t *tasks.Task) string { return strings.TrimPrefix(t.Ref, refPrefix+":") }

// Cancel is tasks/cancel for a generation task: the same code path as
// cancel_generation.
func (g *GenTasks) Cancel(ctx context.Context, t *tasks.Task) error {
	_, _, err := g.Svc.CancelByID(ctx, genID(t))
	return err
}

// Answered applies the spend-approval answer: accept with confirm:true
// queues the generation; anything else cancels it.
func (g *GenTasks) Answered(ctx context.Context, t *tasks.Task, answers map[string]json.RawMessage) error {
	for k, v := range answers {
		if !strings.HasPrefix(k, approveKeyPrefix) {
			continue
		}
		if approved(v) {
			_, err := g.Svc.Approve(ctx, genID(t))
			return err
		}
		_, _, err := g.Svc.CancelByID(ctx, genID(t))
		return err
	}
	return nil
}

func approved(raw json.RawMessage) bool {
	var r struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Action != "accept" {
		return false
	}
	c, _ := r.Content["confirm"].(bool)
	return c
}

// Result renders a finished generation exactly as generate with wait:true
// returns it, with fresh links.
func (g *GenTasks) Result(ctx context.Context, t *tasks.Task) (json.RawMessage, error) {
	gen, err := g.Svc.Get(ctx, t.Owner, genID(t))
	if err != nil {
		return nil, err
	}
	timedOut := false
	res, err := g.Tools.Result(ctx, gen, &timedOut)
	if err != nil {
		return nil, err
	}
	return completeResult(res)
}

func completeResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	// The inlined result is a complete CallToolResult.
	return append([]byte(`{"resultType":"complete",`), b[1:]...), nil
}

// BasePoll is the honest poll interval for a model: a quarter of its
// expected duration, between 250 ms and 5 s (about a second for a typical
// image, five for video).
func BasePoll(m provider.Model) time.Duration {
	return min(max(m.ExpectedDuration/4, 250*time.Millisecond), 5*time.Second)
}

func approvalRequest(m provider.Model) map[string]any {
	return map[string]any{"method": "elicitation/create", "params": map[string]any{
		"mode":    "form",
		"message": fmt.Sprintf("Generating with %s costs %d credits, above your approval threshold. Spend them?", m.ID, m.Credits),
		"requestedSchema": map[string]any{"type": "object", "required": []string{"confirm"},
			"properties": map[string]any{"confirm": map[string]any{"type": "boolean", "title": "Spend the credits"}}},
	}}
}

// BeforeGenerate is compat's hook: it answers with a task when the request
// declared the extension, and runs the approval gate.
func (g *GenTasks) BeforeGenerate(ctx context.Context, req *mcp.CallToolRequest, owner string, cr *generation.CreateRequest, args *compat.GenerateArgs) (*mcp.CallToolResult, error) {
	m, _ := g.Svc.Model(cr.ModelID) // compat validated the request
	threshold := g.ApprovalAbove(ctx)
	needsApproval := threshold != nil && m.Credits > *threshold && !args.ConfirmSpend
	if !tasks.Declared(req) {
		if !needsApproval {
			return nil, nil
		}
		return g.gateWithoutTasks(req, owner, m, args, *threshold)
	}
	if needsApproval && !tasks.ElicitationDeclared(req) {
		return nil, &tasks.RPCError{Code: tasks.CodeMissingCapability, Message: "Missing required client capability: approving this spend needs elicitation",
			Data: map[string]any{"requiredCapabilities": map[string]any{"elicitation": map[string]any{}}}}
	}
	// Built before the write: the writer runs one transaction at a time.
	task := &tasks.Task{Owner: owner, TTL: g.TTL, PollInterval: BasePoll(m), Status: tasks.StatusWorking, ClientCaps: tasks.CapsJSON(req)}
	if needsApproval {
		task.Status = tasks.StatusInputRequired
		task.AddInputRequest(approveKeyPrefix, approvalRequest(m))
	}
	cr.HoldForApproval = needsApproval
	cr.InTx = func(ctx context.Context, gtx generation.Tx, gen *generation.Generation) error {
		tx, err := unitOfWork(gtx)
		if err != nil {
			return err
		}
		task.Ref, task.StatusMessage = genRef(gen.ID), gen.StatusMessage
		return g.D.Store().Create(ctx, tx, task)
	}
	gen, existing, err := g.Svc.Create(ctx, owner, *cr)
	if err != nil {
		return nil, err
	}
	if !existing {
		g.ids.put(gen.ID, task.ID)
	} else {
		if task, err = g.task(ctx, nil, gen.ID); err != nil {
			// The key was first used without the extension: answer as then.
			return g.Tools.Result(ctx, gen, nil)
		}
	}
	return nil, g.D.Created(ctx, task)
}

// gateWithoutTasks asks for spend approval by MRTR when the client can
// elicit, else by the confirmSpend argument.
func (g *GenTasks) gateWithoutTasks(req *mcp.CallToolRequest, owner string, m provider.Model, args *compat.GenerateArgs, threshold int64) (*mcp.CallToolResult, error) {
	if !tasks.ElicitationDeclared(req) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"%s costs %d credits, above your approval threshold of %d: call generate again with confirmSpend:true to spend them", m.ID, m.Credits, threshold)}}}, nil
	}
	digest := argsDigest(req)
	if resp, ok := req.Params.InputResponses[approveKeyPrefix].(*mcp.ElicitResult); ok && g.Approval.Valid(req.Params.RequestState, owner, digest) {
		if c, _ := resp.Content["confirm"].(bool); resp.Action == "accept" && c {
			return nil, nil // approved: create as usual
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "spend not approved: nothing was generated"}}}, nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{approveKeyPrefix: &mcp.ElicitParams{
			Message: fmt.Sprintf("Generating with %s costs %d credits, above your approval threshold. Spend them?", m.ID, m.Credits),
			RequestedSchema: map[string]any{"type": "object", "required": []string{"confirm"},
				"properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}},
		}},
		RequestState: g.Approval.Sign(owner, digest),
	}, nil
}

func argsDigest(req *mcp.CallToolRequest) string {
	sum := sha256.Sum256(req.Params.Arguments)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
