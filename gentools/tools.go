// Package gentools serves the nine generationId tools for clients that do not
// use the Tasks extension (and, through generate, for those that do). The
// handlers are thin: they check arguments, call package generation, and
// render results.
package gentools

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/methods"
	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/server/edge"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config wires the tools.
type Config struct {
	Service *generation.Service
	// Owner names the caller of a request (the authenticated principal).
	Owner func(ctx context.Context, req *mcp.CallToolRequest) string
	// Budget reports the caller's daily credit limit for get_credits; nil
	// means unlimited. (generation enforces it when creating.)
	Budget func(ctx context.Context, owner string) *int64
	// FetchImage downloads an input image given by URL; nil refuses URLs.
	FetchImage func(ctx context.Context, url string, maxBytes int64) ([]byte, string, error)
	// MaxInputBytes caps an input image (default 10 MiB).
	MaxInputBytes int64
	// ApprovalAbove is the caller's spend threshold above which a create
	// needs approval (nil func or nil: no gate); a dry run reports it.
	ApprovalAbove func(ctx context.Context) *int64
	// ProgressEvery is the keep-alive of a wait whose request carries a
	// progressToken: notifications/progress at least this often, and on
	// every change (default 10 s).
	ProgressEvery time.Duration
	// MaxWait bounds every wait, with a progressToken or without, whatever
	// timeoutSeconds or waitSeconds says (default 55 s): clients cut a
	// request at 60 s even while progress arrives (the TypeScript SDK v1
	// unless its caller set resetTimeoutOnProgress, Claude Code, claude.ai).
	MaxWait time.Duration
	// MaxReadBytes caps an output read with resources/read (default
	// 32 MiB); a larger one points to its signed link.
	MaxReadBytes int64
	// Bytes is the process-wide budget of output bytes in flight (nil:
	// unbounded); resources/read takes its shares.
	Bytes *outbytes.Budget
	// Models answers describe_model and search_models (nil: the two
	// tools answer from the service's list alone).
	Models *modelschema.Catalog
}

// Wait bounds (see Config).
const (
	DefaultProgressEvery = 10 * time.Second
	DefaultMaxWait       = 55 * time.Second
)

// Rate classes: the per-caller bucket a tool call draws from, the
// registry's (internal/methods). Every tool names one (a tool that names
// none is charged as create).
const (
	ClassPoll   = methods.ClassPoll   // every other call: shares the bucket with tasks/get
	ClassCreate = methods.ClassCreate // starts a generation (spends credits)
)

// Tool is one row of the tool table (Tools.Table): everything darkroom
// decides about a tool, read by every place that decides it: go-sdk's
// registration and so tools/list (Def, whose _meta carries an app-only
// tool's visibility), the charge at the door (Class), and the lean path
// (Read, Bytes).
type Tool struct {
	Def     *mcp.Tool
	Handler mcp.ToolHandler
	// Task, set by Decorate in place of Handler, is a handler whose
	// answer may be a task (gentask's generate): go-sdk runs it through
	// tasks.Dispatcher.SDKTool, the lean engine through edge.Engine.ServeTool.
	Task tasks.ToolHandler
	// Class is the rate class a call draws from (ClassPoll, ClassCreate).
	Class string
	// Read, when set, lets the lean engine serve a call below go-sdk
	// (edge.Engine.ServeTool) with this handler, answering every outcome
	// as go-sdk would; with Bytes its result streams output bytes
	// (edge.Tool.Bytes).
	Read  edge.ReadHandler
	Bytes bool
	// Lean, when set, decides from a call's parsed request, before
	// anything runs, whether the lean path serves it (Read); a call it
	// refuses is go-sdk's, Handler's.
	Lean func(*mcp.CallToolRequest) bool
}

// Tools holds the handlers.
type Tools struct {
	cfg   Config
	svc   *generation.Service
	table []Tool
}

// Table is every tool darkroom serves, sorted by name: the nine
// generation tools and any Add gave.
func (t *Tools) Table() []Tool { return t.table }

// Add puts a tool served beside the generation tools (the viewer's) in
// the table, before Register.
func (t *Tools) Add(row Tool) {
	t.table = append(t.table, row)
	slices.SortFunc(t.table, func(a, b Tool) int { return strings.Compare(a.Def.Name, b.Def.Name) })
}

// Decorate makes h the named tool's handler, in place of its plain one,
// and lean the predicate of its lean form (a decorator such as gentask's
// generate, which wraps Prepare and Create, reaches down: this package
// never calls up).
func (t *Tools) Decorate(name string, h tasks.ToolHandler, lean func(*mcp.CallToolRequest) bool) {
	row := t.row(name)
	if row == nil {
		panic("gentools: Decorate of an unknown tool " + name)
	}
	row.Handler, row.Task, row.Lean = nil, h, lean
}

// RateClass names the bucket a call of the named tool draws from, as its
// row says ("" for a tool it does not know).
func (t *Tools) RateClass(tool string) string {
	if row := t.row(tool); row != nil {
		return row.Class
	}
	return ""
}

// row is the named tool's row in the table (nil: none).
func (t *Tools) row(name string) *Tool {
	if i, ok := slices.BinarySearchFunc(t.table, name, func(r Tool, n string) int { return strings.Compare(r.Def.Name, n) }); ok {
		return &t.table[i]
	}
	return nil
}

// Names lists the tools, sorted (a bounded label set for metrics).
func (t *Tools) Names() []string {
	names := make([]string, len(t.table))
	for i, r := range t.table {
		names[i] = r.Def.Name
	}
	return names
}

// New returns the tools.
func New(cfg Config) *Tools {
	cfg.MaxInputBytes = cmp.Or(cfg.MaxInputBytes, 10<<20)
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.MaxReadBytes <= 0 {
		cfg.MaxReadBytes = DefaultMaxResourceBytes
	}
	if cfg.Budget == nil {
		cfg.Budget = func(context.Context, string) *int64 { return nil }
	}
	t := &Tools{cfg: cfg, svc: cfg.Service}
	for _, row := range append(t.generationTools(), t.modelTools()...) {
		t.Add(row)
	}
	return t
}

func ptr[T any](v T) *T { return &v }

// fresh is a read whose result is rendered per call (none keyed).
func fresh(h mcp.ToolHandler) edge.ReadHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (edge.Reply, error) {
		res, err := h(ctx, req)
		return edge.Reply{Result: res}, err
	}
}

// answer is a read as go-sdk's handler.
func answer(read edge.ReadHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r, err := read(ctx, req)
		if err != nil {
			return nil, err
		}
		return r.Answer(), nil
	}
}

// Register adds every tool of the table to s; a decorated row's handler
// through d (tasks.Dispatcher.SDKTool), which it needs.
func (t *Tools) Register(s *mcp.Server, d *tasks.Dispatcher) {
	for _, row := range t.table {
		h := row.Handler
		if row.Task != nil {
			h = d.SDKTool(row.Task)
		}
		s.AddTool(row.Def, h)
	}
}

// generationTools are the nine generation tools' rows.
func (t *Tools) generationTools() []Tool {
	return []Tool{
		{Def: def("list_models", "The models here, to choose a modelId: kind (image or video), credits, aspectRatios, durations, maxCount, "+
			"needsInputImage and roles (the input files each takes).",
			emptyInput, listModelsOut, readOnly("List models", false)), Handler: t.listModels, Class: ClassPoll},
		{Def: def("get_credits", "Your credit balance, what you spent today and your daily limit (null: unlimited).",
			emptyInput, creditsOut, readOnly("Get credits", false)), Handler: t.getCredits, Class: ClassPoll, Read: fresh(t.getCredits)},
		{Def: def("generate", "Start an image or video generation; answers at once with its generationId and status (wait:true waits up to "+t.cfg.MaxWait.String()+"). "+
			"Follow it with wait_generation or get_generation, never generate again (an idempotencyKey makes retries safe). "+
			"uploadRequired: send the files with upload_input. dryRun:true prices it, creating nothing.",
			generateInputSchema(t.aspectRatios()), generateOut, &mcp.ToolAnnotations{Title: "Generate", DestructiveHint: ptr(false), OpenWorldHint: ptr(true)}),
			Handler: t.Generate, Class: ClassCreate},
		{Def: def("upload_input", "Upload a file a reserved generation waits for (uploadRequired), in its role from generate's inputs: "+
			"image (first_frame for video), mask (white where it may change; the image's size), reference, last_frame. Queued once none is awaited.",
			uploadInput, generationSchema, &mcp.ToolAnnotations{Title: "Upload input", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}),
			Handler: t.uploadInput, Class: ClassPoll},
		{Def: def("get_generation", "A generation's status and progress now and, once completed, its outputs with short-lived signed links. To wait for the end, use wait_generation.",
			getInput, generationSchema, readOnly("Get generation", false)), Handler: answer(t.readGeneration), Class: ClassPoll, Read: t.readGeneration},
		{Def: def("wait_generation", "Wait until a generation completes, fails or is cancelled, up to timeoutSeconds. "+fmt.Sprintf(
			"Answers within %s whatever timeoutSeconds says; timedOut:true means still running: call again with the same generationId, never resubmit. "+
				"A progressToken gets notifications/progress every %s.", t.cfg.MaxWait, t.cfg.ProgressEvery),
			waitInput, generationSchema, readOnly("Wait for generation", false)), Handler: t.waitGeneration, Class: ClassPoll},
		{Def: def("download_output", "A fresh signed link to one output (index from 0) of a completed generation, once its link expired. "+
			"For the bytes, resources/read its darkroom:// URI.",
			downloadInput, downloadOut, readOnly("Download output", false)), Handler: t.downloadOutput, Class: ClassPoll, Read: fresh(t.downloadOutput)},
		{Def: def("cancel_generation", "Cancel a generation: reserved or queued ends cancelled at once and is refunded; running is asked to stop (cancelRequested) and may still finish.",
			getInput, generationSchema, &mcp.ToolAnnotations{Title: "Cancel generation", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(true)}),
			Handler: t.cancelGeneration, Class: ClassPoll},
		{Def: def("list_generations", "Your generations (as get_generation gives them), newest first, optionally by status. Pass nextCursor back as cursor for the next page.",
			listGenerationsIn, listGenerationsOut, readOnly("List generations", false)), Handler: t.listGenerations, Class: ClassPoll, Read: fresh(t.listGenerations)},
	}
}

// def is a tool's definition, its schemas' bounds filled in.
func def(name, desc, in, out string, ann *mcp.ToolAnnotations) *mcp.Tool {
	return &mcp.Tool{Name: name, Description: desc, InputSchema: raw(in), OutputSchema: raw(out), Annotations: ann}
}

// readOnly annotates a read (a destructive hint means nothing for one,
// the spec says); openWorld says whether it may reach a provider.
func readOnly(title string, openWorld bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(openWorld)}
}

// aspectRatios lists every ratio some model offers, sorted.
func (t *Tools) aspectRatios() []string {
	var ratios []string
	for _, m := range t.svc.Models() {
		ratios = append(ratios, m.AspectRatios...)
	}
	slices.Sort(ratios)
	return slices.Compact(ratios)
}

// fail turns a service error into a result: input errors and not-found are
// tool errors; a create-rate refusal is the JSON-RPC error the admission's
// bucket sends (-31429, data.retryAfterMs); anything else is an internal
// error.
func fail(err error, id string) (*mcp.CallToolResult, error) {
	var ie *generation.InputError
	var re *generation.RateError
	switch {
	case errors.As(err, &ie):
		return toolError("%s", ie.Msg), nil
	case errors.As(err, &re):
		return nil, ratelimited.RPCError(re.RetryAfter)
	case errors.Is(err, generation.ErrNotFound):
		return toolError("no generation with id %q: check the generationId returned by generate, or call list_generations", id), nil
	}
	return nil, err
}

func (t *Tools) listModels(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r := DecodeArgs(req, &struct{}{}); r != nil {
		return r, nil
	}
	models := t.svc.Models()
	for i := range models {
		if models[i].AspectRatios == nil {
			models[i].AspectRatios = []string{}
		}
	}
	return structured(modelsLine(models), map[string]any{"models": models}), nil
}

func (t *Tools) getCredits(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if r := DecodeArgs(req, &struct{}{}); r != nil {
		return r, nil
	}
	owner := t.cfg.Owner(ctx, req)
	spent, err := t.svc.Spent(ctx, owner)
	if err != nil {
		return nil, err
	}
	limit := t.cfg.Budget(ctx, owner)
	out := map[string]any{"currency": "credits", "spent": spent, "limit": nil, "balance": nil}
	text := fmt.Sprintf("Spent %d credits today, with no daily limit", spent)
	if limit != nil {
		bal := max(*limit-spent, 0)
		out["limit"], out["balance"] = *limit, bal
		text = fmt.Sprintf("Balance: %d credits (spent %d of %d today)", bal, spent, *limit)
	}
	return structured(text, out), nil
}

// ImageArg is an input image argument.
type ImageArg struct {
	URL      string `json:"url"`
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
}

// GenerateArgs are generate's arguments.
type GenerateArgs struct {
	ModelID         string    `json:"modelId"`
	Prompt          string    `json:"prompt"`
	AspectRatio     string    `json:"aspectRatio"`
	NegativePrompt  string    `json:"negativePrompt"`
	Seed            *int64    `json:"seed"`
	DurationSeconds *int      `json:"durationSeconds"`
	InputImage      *ImageArg `json:"inputImage"`
	// Inputs are input files by role (an image to edit, its mask,
	// references, a video's first and last frames).
	Inputs []InputArg `json:"inputs"`
	// Count is how many outputs to make (1 up to the model's maxCount).
	Count          *int   `json:"count"`
	IdempotencyKey string `json:"idempotencyKey"`
	Wait           bool   `json:"wait"`
	WaitSeconds    *int   `json:"waitSeconds"`
	ConfirmSpend   bool   `json:"confirmSpend"`
	// DryRun validates everything and says what the call would cost and
	// what the budget and the approval rule would say; it creates nothing.
	DryRun bool `json:"dryRun"`
	// Input are provider-native fields (see describe_model).
	Input json.RawMessage `json:"input"`
}

// bounded is an optional integer argument: def when absent, else one
// from lo to hi (in unit) or refused.
func bounded(name string, v *int, lo, hi, def int, unit string) (int, *mcp.CallToolResult) {
	if v == nil {
		return def, nil
	}
	if *v < lo || *v > hi {
		return 0, toolError("%s must be between %d and %d%s; got %d", name, lo, hi, unit, *v)
	}
	return *v, nil
}

func (t *Tools) image(ctx context.Context, a *ImageArg, field string) (*generation.InputImage, *mcp.CallToolResult) {
	switch {
	case a.URL != "" && a.Data != "":
		return nil, toolError("%s: give either url or data, not both", field)
	case a.URL != "":
		if !strings.HasPrefix(a.URL, "https://") && !strings.HasPrefix(a.URL, "http://") {
			return nil, toolError("%s.url must be an http or https URL", field)
		}
		if t.cfg.FetchImage == nil {
			return nil, toolError("%s.url is not accepted by this server; send data (base64) and mimeType instead", field)
		}
		b, mime, err := t.cfg.FetchImage(ctx, a.URL, t.cfg.MaxInputBytes)
		if err != nil {
			return nil, toolError("%s.url could not be fetched: %v", field, err)
		}
		return &generation.InputImage{Data: b, MimeType: mime}, nil
	case a.Data != "":
		if int64(base64.StdEncoding.DecodedLen(len(a.Data))) > t.cfg.MaxInputBytes+3 {
			return nil, toolError("%s is larger than the %d-byte limit", field, t.cfg.MaxInputBytes)
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(a.Data))
		if err != nil {
			return nil, toolError("%s.data is not valid base64: %v", field, err)
		}
		return &generation.InputImage{Data: b, MimeType: a.MimeType}, nil
	}
	return nil, toolError("%s needs url or data", field)
}

// Generate is the generate tool's plain handler: Prepare, then Create.
func (t *Tools) Generate(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, abort := AbortOnPanic(ctx, t.svc)
	defer abort()
	c, res, err := t.Prepare(ctx, req)
	if c == nil {
		return res, err
	}
	return t.Create(ctx, c)
}

// AbortOnPanic returns ctx, which records the generations created under
// it, and the function to defer that ends them failed and refunded should
// the call panic (its caller never learns their ids: they must not run),
// then panics on to the serving path's guard.
func AbortOnPanic(ctx context.Context, svc *generation.Service) (context.Context, func()) {
	ctx, creates := generation.TrackCreates(ctx)
	return ctx, func() {
		if v := recover(); v != nil {
			svc.AbortCreates(ctx, creates)
			panic(v)
		}
	}
}

// Creation is a generate call decoded and validated, ready to create:
// what Create makes, and what a decorator (gentask's) may act on first.
type Creation struct {
	Req     *mcp.CallToolRequest
	Owner   string
	Args    GenerateArgs
	Request generation.CreateRequest
	// Model is the request's model as validation found it: held here, a
	// qualified model's entry cannot leave the schema cache before use.
	Model provider.Model
	wait  int // seconds
}

// Prepare is generate up to its creation: it decodes and validates the
// arguments and answers a refusal or a dry run with res; otherwise c is
// the creation to make. Exactly one of c, res and err is set.
func (t *Tools) Prepare(ctx context.Context, req *mcp.CallToolRequest) (c *Creation, res *mcp.CallToolResult, err error) {
	c = &Creation{Req: req, Owner: t.cfg.Owner(ctx, req)}
	res, err = t.validate(ctx, c)
	if res == nil && err == nil && c.Args.DryRun {
		res, err = t.dryRun(ctx, c)
	}
	if res != nil || err != nil {
		return nil, res, err
	}
	return c, nil, nil
}

// validate decodes and checks c's arguments, builds its request and finds
// its model; res answers a refused one.
func (t *Tools) validate(ctx context.Context, c *Creation) (res *mcp.CallToolResult, err error) {
	a := &c.Args
	if r := DecodeArgs(c.Req, a); r != nil {
		return r, nil
	}
	if a.ModelID == "" {
		return toolError("modelId is required: call list_models for the available ids"), nil
	}
	if strings.TrimSpace(a.Prompt) == "" {
		return toolError("prompt is required and must not be blank"), nil
	}
	if c.wait, res = bounded("waitSeconds", a.WaitSeconds, minWaitSeconds, MaxWaitSeconds, defWaitSeconds, " seconds"); res != nil {
		return res, nil
	}
	cr := &c.Request
	*cr = generation.CreateRequest{
		ModelID: a.ModelID, Prompt: a.Prompt, NegativePrompt: a.NegativePrompt, AspectRatio: a.AspectRatio,
		Seed: a.Seed, IdempotencyKey: a.IdempotencyKey,
	}
	if r := t.resolveModel(ctx, cr, a.Input); r != nil { // before any input image is fetched
		return r, nil
	}
	if d := a.DurationSeconds; d != nil {
		// 0 is generation's "model default": only an absent argument means that.
		if *d < 1 || *d > generation.MaxDurationSeconds {
			return toolError("durationSeconds must be between 1 and %d; got %d (see durations in list_models)", generation.MaxDurationSeconds, *d), nil
		}
		cr.DurationSeconds = *d
	}
	if n := a.Count; n != nil {
		// 0 is generation's "one": only an absent argument means that.
		if *n < 1 {
			return toolError("count must be at least 1; got %d", *n), nil
		}
		cr.Count = *n
	}
	if a.InputImage != nil {
		if cr.InputImage, res = t.image(ctx, a.InputImage, "inputImage"); res != nil {
			return res, nil
		}
	}
	if len(a.Inputs) > 0 {
		if cr.Inputs, res, err = t.roleInputs(ctx, c.Owner, a.Inputs); res != nil || err != nil {
			return res, err
		}
	}
	if c.Model, err = t.svc.Validate(cr); err != nil {
		return fail(err, "")
	}
	return nil, nil
}

// Create makes c as a plain generate does: the generation, then its
// result, after a wait if the call asked for one.
func (t *Tools) Create(ctx context.Context, c *Creation) (*mcp.CallToolResult, error) {
	g, _, err := t.svc.Create(ctx, c.Owner, c.Request)
	if err != nil {
		return fail(err, "")
	}
	if !c.Args.Wait || g.Status.Terminal() || g.Status == generation.StatusReserved {
		return Result(ctx, t.svc, g, nil)
	}
	g, timedOut, err := t.wait(ctx, c.Req, c.Owner, g.ID, c.wait)
	if err != nil {
		return nil, err
	}
	return Result(ctx, t.svc, g, &timedOut)
}

// Refused answers a creation's error as generate does: an input error
// (a new idempotency key's mismatch, say) is a tool error; any other
// error passes as it is.
func Refused(err error) (*mcp.CallToolResult, error) {
	var ie *generation.InputError
	if errors.As(err, &ie) {
		return fail(err, "")
	}
	return nil, err
}

// idArgs is the generationId every per-generation tool takes; each
// tool's argument struct embeds it with that tool's own fields.
type idArgs struct {
	GenerationID string `json:"generationId"`
}

func (a idArgs) generationID() string { return a.GenerationID }

// decodeWithID decodes a tool's arguments into a and checks their
// generationId.
func decodeWithID(req *mcp.CallToolRequest, a interface{ generationID() string }) *mcp.CallToolResult {
	if r := DecodeArgs(req, a); r != nil {
		return r
	}
	id := a.generationID()
	if id == "" {
		return toolError("generationId is required")
	}
	if n := utf8.RuneCountInString(id); n > maxIDChars {
		return toolError("generationId is %d characters; the limit is %d: pass the generationId returned by generate", n, maxIDChars)
	}
	return nil
}

// generationOf decodes the arguments into a and reads the caller's
// generation they name; or, when g is nil, answers with res and err.
func (t *Tools) generationOf(ctx context.Context, req *mcp.CallToolRequest, a interface{ generationID() string }) (g *generation.Generation, res *mcp.CallToolResult, err error) {
	if res := decodeWithID(req, a); res != nil {
		return nil, res, nil
	}
	g, err = t.svc.Get(ctx, t.cfg.Owner(ctx, req), a.generationID())
	if err != nil {
		res, err = fail(err, a.generationID())
		return nil, res, err
	}
	return g, nil, nil
}

func (t *Tools) waitGeneration(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		idArgs
		TimeoutSeconds *int `json:"timeoutSeconds"`
	}
	if bad := decodeWithID(req, &a); bad != nil {
		return bad, nil
	}
	secs, bad := bounded("timeoutSeconds", a.TimeoutSeconds, minWaitSeconds, MaxWaitSeconds, defWaitSeconds, " seconds")
	if bad != nil {
		return bad, nil
	}
	g, timedOut, err := t.wait(ctx, req, t.cfg.Owner(ctx, req), a.GenerationID, secs)
	if err != nil {
		return fail(err, a.GenerationID)
	}
	return Result(ctx, t.svc, g, &timedOut)
}

func (t *Tools) downloadOutput(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		idArgs
		Index int `json:"index"` // absent: 0
	}
	g, res, err := t.generationOf(ctx, req, &a)
	if g == nil {
		return res, err
	}
	if g.Status != generation.StatusCompleted {
		return toolError("generation %s is %s, not completed: there is nothing to download yet (use wait_generation)", g.ID, g.Status), nil
	}
	if g.OutputsExpired {
		return toolError("the outputs of generation %s were deleted after the %s retention period; generate again if you need them", g.ID, t.svc.Retention()), nil
	}
	i := a.Index
	if i < 0 || i >= len(g.Outputs) {
		return toolError("index %d is out of range: generation %s has %s, numbered from 0", i, g.ID, words.Count(len(g.Outputs), "output")), nil
	}
	v, err := View(ctx, t.svc, g)
	if err != nil {
		return nil, err
	}
	o := v.Outputs[i]
	res = structured(outputLine(i, string(g.Kind), o, time.Now()), o)
	size := o.Bytes
	res.Content = append(res.Content, &mcp.ResourceLink{URI: OutputURI(g.ID, i), Name: fmt.Sprintf("%s-%d", g.ID, i), MIMEType: o.MimeType, Size: &size})
	return res, nil
}

func (t *Tools) uploadInput(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		idArgs
		Image *ImageArg `json:"image"`
		// Role is what the image is for ("": the first input the
		// generation waits for).
		Role string `json:"role"`
	}
	if bad := decodeWithID(req, &a); bad != nil {
		return bad, nil
	}
	if a.Image == nil {
		return toolError("image is required: {url} or {data, mimeType}"), nil
	}
	img, bad := t.image(ctx, a.Image, "image")
	if bad != nil {
		return bad, nil
	}
	g, err := t.svc.UploadInput(ctx, t.cfg.Owner(ctx, req), a.GenerationID, a.Role, *img)
	if err != nil {
		return fail(err, a.GenerationID)
	}
	return Result(ctx, t.svc, g, nil)
}

func (t *Tools) cancelGeneration(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a idArgs
	if bad := decodeWithID(req, &a); bad != nil {
		return bad, nil
	}
	g, _, err := t.svc.Cancel(ctx, t.cfg.Owner(ctx, req), a.GenerationID)
	if err != nil {
		return fail(err, a.GenerationID)
	}
	return Result(ctx, t.svc, g, nil) // a failed one is an isError result
}

func (t *Tools) listGenerations(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		Limit  *int   `json:"limit"`
		Cursor string `json:"cursor"`
		Status string `json:"status"`
	}
	if r := DecodeArgs(req, &a); r != nil {
		return r, nil
	}
	limit, bad := bounded("limit", a.Limit, 1, maxListLimit, defListLimit, "")
	if bad != nil {
		return bad, nil
	}
	gens, next, err := t.svc.List(ctx, t.cfg.Owner(ctx, req), generation.Status(a.Status), a.Cursor, limit)
	if err != nil {
		return fail(err, "")
	}
	views := make([]*GenerationView, 0, len(gens))
	for _, g := range gens {
		v, err := View(ctx, t.svc, g)
		if err != nil {
			return nil, err
		}
		views = append(views, v)
	}
	out := map[string]any{"generations": views}
	text := generationsLine(views)
	if next != "" {
		out["nextCursor"] = next
		text += "; more on the next page (pass nextCursor as cursor)"
	}
	return structured(text, out), nil
}
