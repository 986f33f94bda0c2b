package gentask

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// GenTasks maps generations onto tasks for clients that declare the Tasks
// extension, and runs the spend-approval gate for every client. It is the
// tasks package's Kind for generation tasks.
type GenTasks struct {
	*Mirror
	Svc *generation.Service
	// TTL is a new task's lifetime.
	TTL time.Duration
	// ApprovalAbove returns the caller's spend threshold (nil: no gate).
	ApprovalAbove func(ctx context.Context) *int64
	// Approval signs and checks the MRTR requestState of a spend approval
	// asked without tasks.
	Approval ApprovalToken
	// tools is the plain generate Generate decorates (Register).
	tools *gentools.Tools
}

const approveKeyPrefix = "approve_spend"

// Register makes g the kind of generation tasks, and Generate the
// handler of tools' generate row, with its lean form for a call without
// input files (leanGenerate).
func (g *GenTasks) Register(tools *gentools.Tools) {
	g.D.Register(refPrefix, g)
	g.tools = tools
	tools.Decorate("generate", g.Generate, leanGenerate)
}

// leanGenerate is the predicate of the dispatcher's own generate: a call
// with input files goes the full way (their fetch and decode are most of
// its cost), decided from the arguments' own keys (a prompt that
// mentions "inputImage" takes no image). Arguments that do not decode go
// the full way too, which says what is wrong.
func leanGenerate(req *mcp.CallToolRequest) bool {
	var args struct {
		InputImage json.RawMessage `json:"inputImage"`
		Inputs     json.RawMessage `json:"inputs"`
	}
	return json.Unmarshal(req.Params.Arguments, &args) == nil && args.InputImage == nil && args.Inputs == nil
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
		var r struct {
			Action  string         `json:"action"`
			Content map[string]any `json:"content"`
		}
		if !strings.HasPrefix(k, approveKeyPrefix) {
			continue
		}
		if json.Unmarshal(v, &r) == nil && confirmed(r.Action, r.Content) {
			_, err := g.Svc.Approve(ctx, genID(t))
			return err
		}
		_, _, err := g.Svc.CancelByID(ctx, genID(t))
		return err
	}
	return nil
}

// confirmed reports an elicitation answer that approves the spend, by
// task input response or by MRTR alike.
func confirmed(action string, content map[string]any) bool {
	c, _ := content["confirm"].(bool)
	return action == "accept" && c
}

// Result renders a finished generation exactly as generate with wait:true
// returns it, with fresh links.
func (g *GenTasks) Result(ctx context.Context, t *tasks.Task) (json.RawMessage, error) {
	gen, err := g.Svc.Get(ctx, t.Owner, genID(t))
	if err != nil {
		return nil, err
	}
	timedOut := false
	res, err := gentools.Result(ctx, g.Svc, gen, &timedOut)
	if err != nil {
		return nil, err
	}
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

// approvalPrompt is the spend-approval question, one for both ways of
// asking it (a task's input request, an MRTR InputRequiredResult).
func approvalPrompt(m provider.Model, credits int64) (message string, schema map[string]any) {
	return fmt.Sprintf("Generating with %s costs %d credits, above your approval threshold. Spend them?", m.ID, credits),
		map[string]any{"type": "object", "required": []string{"confirm"},
			"properties": map[string]any{"confirm": map[string]any{"type": "boolean", "title": "Spend the credits"}}}
}

// Generate is generate as the tool table serves it (Register):
// gentools' plain generate (Tools.Prepare, then Tools.Create) decorated
// with the spend-approval gate and, for a call that declared the Tasks
// extension, the task it answers with, created in the generation's
// transaction.
func (g *GenTasks) Generate(ctx context.Context, req *mcp.CallToolRequest) (tasks.ToolOutcome, error) {
	ctx, abort := gentools.AbortOnPanic(ctx, g.Svc)
	defer abort()
	c, res, err := g.tools.Prepare(ctx, req)
	if c == nil { // a refusal, a dry run
		return tasks.ToolOutcome{Result: res}, err
	}
	threshold := g.ApprovalAbove(ctx)
	needsApproval := gentools.NeedsApproval(c.Request.Credits(), threshold) && !c.Args.ConfirmSpend
	if !tasks.Declared(req) {
		if needsApproval {
			if res, approved := g.gateWithoutTasks(c, *threshold); !approved {
				return tasks.ToolOutcome{Result: res}, nil
			}
		}
		res, err := g.tools.Create(ctx, c)
		return tasks.ToolOutcome{Result: res}, err
	}
	return g.createTask(ctx, c, needsApproval)
}

// createTask creates c's generation and, in its transaction, its task,
// working or, when the spend needs approval, input_required with the
// question. A key first used without the extension is answered as then.
func (g *GenTasks) createTask(ctx context.Context, c *gentools.Creation, needsApproval bool) (tasks.ToolOutcome, error) {
	req, cr, m := c.Req, c.Request, c.Model
	if needsApproval && !tasks.ElicitationDeclared(req) {
		return tasks.ToolOutcome{}, &tasks.RPCError{Code: tasks.CodeMissingCapability, Message: "Missing required client capability: approving this spend needs elicitation",
			Data: map[string]any{"requiredCapabilities": map[string]any{"elicitation": map[string]any{}}}}
	}
	// Built before the write: the writer runs one transaction at a time.
	task := &tasks.Task{Owner: c.Owner, TTL: g.TTL, PollInterval: BasePoll(m), Status: tasks.StatusWorking, ClientCaps: tasks.CapsJSON(req)}
	if needsApproval {
		task.Status = tasks.StatusInputRequired
		msg, schema := approvalPrompt(m, cr.Credits())
		task.AddInputRequest(approveKeyPrefix, map[string]any{"method": "elicitation/create",
			"params": map[string]any{"mode": "form", "message": msg, "requestedSchema": schema}})
	}
	cr.HoldForApproval = needsApproval
	cr.InTx = func(ctx context.Context, gtx generation.Tx, gen *generation.Generation) error {
		tx, err := unitOfWork(gtx)
		if err != nil {
			return err
		}
		task.Ref, task.StatusMessage = genRef(gen.ID), statusMessage(gen)
		return g.D.Store().Create(ctx, tx, task)
	}
	task.ID = tasks.NewID()
	gen, existing, err := g.Svc.Create(generation.LogWith(ctx, "task", task.ID), c.Owner, cr)
	if err != nil { // an input error is a tool error, as generate's
		res, err := gentools.Refused(rateRefusal(err))
		return tasks.ToolOutcome{Result: res}, err
	}
	if !existing {
		g.ids.Put(gen.ID, task.ID)
	} else if task, err = g.task(ctx, nil, gen.ID); err != nil {
		// The key was first used without the extension: answer as then.
		res, err := gentools.Result(ctx, g.Svc, gen, nil)
		return tasks.ToolOutcome{Result: res}, err
	}
	return tasks.ToolOutcome{Task: task}, nil
}

// gateWithoutTasks asks for spend approval by MRTR when the client can
// elicit, else by the confirmSpend argument: approved, or res answers the
// call.
func (g *GenTasks) gateWithoutTasks(c *gentools.Creation, threshold int64) (res *mcp.CallToolResult, approved bool) {
	req, owner, m, credits := c.Req, c.Owner, c.Model, c.Request.Credits()
	if !tasks.ElicitationDeclared(req) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"%s costs %d credits, above your approval threshold of %d: call generate again with confirmSpend:true to spend them", m.ID, credits, threshold)}}}, false
	}
	digest := argsDigest(req)
	if resp, ok := req.Params.InputResponses[approveKeyPrefix].(*mcp.ElicitResult); ok && g.Approval.Valid(req.Params.RequestState, owner, digest) {
		if confirmed(resp.Action, resp.Content) {
			return nil, true
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "spend not approved: nothing was generated"}}}, false
	}
	msg, schema := approvalPrompt(m, credits)
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{approveKeyPrefix: &mcp.ElicitParams{Message: msg, RequestedSchema: schema}},
		RequestState:  g.Approval.Sign(owner, digest),
	}, false
}

func argsDigest(req *mcp.CallToolRequest) string {
	sum := sha256.Sum256(req.Params.Arguments)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// rateRefusal answers a creation over the caller's create rate as the
// admission's bucket does (ratelimited.WriteHTTP): HTTP 429 with Retry-After and
// JSON-RPC error -31429 with data.retryAfterMs. Other errors pass as they
// are.
func rateRefusal(err error) error {
	var re *generation.RateError
	if !errors.As(err, &re) {
		return err
	}
	d := re.RetryAfter
	return &tasks.RPCError{Code: ratelimited.Code, Message: ratelimited.Message(d), Data: ratelimited.ErrorData{RetryAfterMs: ratelimited.RetryAfterMs(d)},
		HTTPStatus: http.StatusTooManyRequests, RetryAfter: ratelimited.RetryAfterHeader(d)}
}
