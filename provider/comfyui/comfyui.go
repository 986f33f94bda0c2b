// Package comfyui is darkroom's adapter for ComfyUI, the operator's own
// GPU: each workflow file of a folder is a model (workflow.go), run on one
// or more ComfyUI backends.
//
// Wire facts it relies on, read from Comfy-Org/ComfyUI (server.py,
// execution.py, main.py, comfy_execution/jobs.py at index commit
// 002c3fb9; the git snapshot a125cd84 of 2025-10-12 lacks the jobs API):
//
//   - POST /prompt {prompt, prompt_id, client_id, extra_data} queues the
//     graph under the prompt_id we give, which must be a UUID in
//     canonical lowercase form (else 400 invalid_prompt_id). ComfyUI does
//     not refuse an id it already holds: it would queue it twice (260a5ca5's
//     message says the queue rejects a duplicate; its execution.py
//     PromptQueue.put only pushes it, at a125cd84 too). So
//     darkroom looks the id up before it submits (Find after a crash, and
//     on the backend it chose in Submit), and the id is derived from the
//     generation id (PromptID): exactly once.
//   - A ComfyUI older than commit 260a5ca5 (2025-07-14, "Allow the prompt
//     request to specify the prompt ID", #8189) ignores our prompt_id and
//     answers the str(uuid.uuid4()) it made (since 974958ff, 2023-05-10;
//     before that no id at all, which darkroom refuses). Its job is
//     recorded under the backend's id; the crash window (killed after
//     the submit, before the record) is closed by the marker darkroom
//     puts in extra_data (markerKey): ComfyUI keeps extra_data as item[3]
//     of the queue item (number, prompt_id, prompt, extra_data,
//     outputs_to_execute) that GET /queue lists, and as prompt[3] of each
//     history entry (execution.py PromptQueue.task_done, which pops only
//     the comfy.org credentials of SENSITIVE_EXTRA_DATA_KEYS), so Find
//     scans /queue and the whole /history (at most MAXIMUM_HISTORY_SIZE,
//     10000 entries, streamed) of a backend without the jobs API.
//   - Before commit 464ba1d6 (2025-09-02, #9607) POST /interrupt ignored
//     its body and interrupted whatever ran: darkroom interrupts only when
//     /queue shows its prompt running.
//   - 400 {error:{type,message,details,extra_info}, node_errors:{node:
//     {errors:[{type,message,details,extra_info:{input_name}}],
//     class_type}}}: a refused graph, a PermanentError naming the node and
//     input; the generation is refunded (RefundsFailures).
//   - GET /api/jobs/{id}: pending, in_progress, completed, failed (with
//     execution_error), cancelled (an interrupted run), with the outputs;
//     404 {"error":"Job not found"}. A ComfyUI without the jobs API
//     answers aiohttp's plain 404: then GET /history/{id} and GET /queue.
//   - POST /api/jobs/{id}/cancel {cancelled}: idempotent, interrupts the
//     running job or dequeues a pending one; without it POST /interrupt
//     {prompt_id} (only if that prompt runs) and POST /queue {delete}.
//   - outputs: history outputs {node: {images|gifs|videos: [{filename,
//     subfolder, type}]}}, read with GET /view?filename&subfolder&type;
//     only the workflow's save nodes' files of type "output" are results.
//   - POST /upload/image (multipart image, overwrite, type): inputs, named
//     from the generation's prompt id and overwritten, so a retried submit
//     replaces its file instead of adding "name (1).png".
//   - GET /prompt {exec_info:{queue_remaining}}: a backend's load; a
//     backend that does not answer takes no new prompt.
//   - /ws?clientId=: progress (ws.go). Events of a prompt go only to the
//     socket of the client_id it was queued with, so each process has its
//     own clientId and a prompt queued by a process that died is polled.
package comfyui

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
)

// Name is the provider's id.
const Name = "comfyui"

// Config configures a Provider.
type Config struct {
	// URLs are the ComfyUI origins (http://host:8188), one or more.
	URLs []string
	// Header ("Name: value") goes with every request, for a ComfyUI
	// behind an authenticating proxy.
	Header string
	// Workflows are the models served.
	Workflows []*Workflow
	// GiveUp is how long a backend may stay unreachable while it holds a
	// job before the job is given up, failed and refunded (default 5 min).
	GiveUp time.Duration
	// HTTPClient sends the requests (nil: one with a 30 s timeout).
	HTTPClient *http.Client
	// NoWebsocket turns progress over the websocket off: jobs are polled.
	NoWebsocket bool
	Logger      *slog.Logger
	Now         func() time.Time
}

// Provider is the ComfyUI adapter. It is safe for concurrent use.
type Provider struct {
	cfg      Config
	http     *httpx.Client // API calls, each within 30 s
	files    *httpx.Client // outputs, streamed as long as they take
	header   http.Header
	backends []*backend
	models   map[string]*Workflow
	list     []provider.Model
	clientID string
	live     *liveSet

	startOnce sync.Once
	stop      context.CancelFunc
	onFrame   func() // tests: after each websocket frame

	mu        sync.Mutex
	cancelled map[string]time.Time // prompt ids we asked to cancel
}

// backend is one ComfyUI origin and what this process knows of it.
type backend struct {
	origin string
	host   string

	mu        sync.Mutex
	downSince time.Time       // zero while it answers
	queue     int             // queue_remaining at the last look
	inflight  int             // submits under way here
	picked    int             // submits sent here, for ties
	noJobs    bool            // an older ComfyUI: no /api/jobs
	mints     bool            // older still: it answered its own prompt id
	keeps     bool            // it answered ours: Find needs no marker there
	classes   map[string]bool // its node classes at the last Listed (nil: not read)
	ws        *watcher
}

// New builds a Provider.
func New(cfg Config) (*Provider, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("comfyui: at least one ComfyUI URL is needed")
	}
	if cfg.GiveUp <= 0 {
		cfg.GiveUp = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	hc := httpx.Config{Provider: Name, HTTPClient: clientOf(cfg.HTTPClient, 30*time.Second), Now: cfg.Now}
	fc := httpx.Config{Provider: Name, HTTPClient: clientOf(cfg.HTTPClient, 0), Now: cfg.Now}
	hdr := http.Header{}
	if cfg.Header != "" {
		name, value, ok := strings.Cut(cfg.Header, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || value == "" {
			return nil, errors.New(`comfyui: the header is "Name: value"`)
		}
		hc.AuthHeader, hc.AuthValue = name, value
		fc.AuthHeader, fc.AuthValue = name, value
		hdr.Set(name, value)
	}
	var id [16]byte
	rand.Read(id[:])
	p := &Provider{cfg: cfg, http: httpx.New(hc), files: httpx.New(fc), header: hdr, models: map[string]*Workflow{}, clientID: hex.EncodeToString(id[:]),
		live: newLiveSet(cfg.Now), cancelled: map[string]time.Time{}}
	for _, raw := range cfg.URLs {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("comfyui: bad URL %q (an origin: http://host:8188)", raw)
		}
		origin := u.Scheme + "://" + u.Host
		if slices.ContainsFunc(p.backends, func(b *backend) bool { return b.origin == origin }) {
			continue
		}
		p.backends = append(p.backends, &backend{origin: origin, host: u.Host})
	}
	for _, w := range cfg.Workflows {
		if _, dup := p.models[w.Model.ID]; dup {
			return nil, fmt.Errorf("comfyui: two workflows named %s", w.Name)
		}
		p.models[w.Model.ID] = w
		p.list = append(p.list, w.Model)
	}
	return p, nil
}

// clientOf is base (or a new client) following redirects only within the
// origin asked (the header goes with every call: it never leaves the
// backend), with timeout as its whole-call timeout (0: none).
func clientOf(base *http.Client, timeout time.Duration) *http.Client {
	c := &http.Client{}
	if base != nil {
		*c = *base
	}
	if c.Timeout == 0 {
		c.Timeout = timeout
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("comfyui: too many redirects")
		}
		if !httpx.SameOrigin(via[0].URL.String(), req.URL.String()) {
			return fmt.Errorf("comfyui: a redirect off the backend (%s) is not followed", req.URL.Host)
		}
		return nil
	}
	return c
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Models implements provider.Provider: one per workflow.
func (p *Provider) Models() []provider.Model { return slices.Clone(p.list) }

// Workflow is the workflow of a model id.
func (p *Provider) Workflow(id string) (*Workflow, bool) {
	w, ok := p.models[id]
	return w, ok
}

// RefundsFailures implements provider.RefundsFailures: a refused graph, a
// run that failed or a prompt a backend lost made nothing, and nothing is
// charged for it.
func (p *Provider) RefundsFailures() bool { return true }

// Close stops the websockets (and keeps them from starting).
func (p *Provider) Close() {
	p.startOnce.Do(func() { p.stop = func() {} })
	p.stop()
}

// start connects the websockets (once, at first use).
func (p *Provider) start() {
	p.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		p.stop = cancel
		if p.cfg.NoWebsocket {
			return
		}
		for _, b := range p.backends {
			b.ws = &watcher{p: p, b: b}
			go b.ws.run(ctx)
		}
	})
}

// PromptID is the prompt id of a generation: a UUID (version 8, RFC 9562)
// from a hash of its id, in the canonical lowercase form ComfyUI accepts.
func PromptID(key string) string {
	s := sha256.Sum256([]byte("darkroom comfyui prompt\x00" + key))
	b := s[:16]
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// jobData is what Job.Data holds.
type jobData struct {
	Backend string `json:"backend"`
	Model   string `json:"modelId"`
	// Ours is the prompt id darkroom derived, kept only where the backend
	// minted its own (a ComfyUI before 2025-07-14): the live preview of
	// the generation is asked for by ours.
	Ours string `json:"ours,omitempty"`
}

// jobOf is the job of prompt id on b; ours is the prompt id darkroom
// derived from the generation (the same as id unless b minted its own).
func (p *Provider) jobOf(b *backend, model, id, ours string) provider.Job {
	d := jobData{Backend: b.origin, Model: model}
	if ours != id {
		d.Ours = ours
	}
	raw, _ := json.Marshal(d)
	return provider.Job{ID: id, Data: raw}
}

func (p *Provider) backendOf(job provider.Job) (*backend, jobData, error) {
	var d jobData
	_ = json.Unmarshal(job.Data, &d)
	for _, b := range p.backends {
		if b.origin == d.Backend {
			return b, d, nil
		}
	}
	return nil, d, &provider.PermanentError{Message: fmt.Sprintf("the ComfyUI at %s that holds this job is no longer configured (DARKROOM_COMFYUI_URL)", cmp.Or(d.Backend, "an unknown address"))}
}

// --- backend health and choice ---

func (b *backend) answered() {
	b.mu.Lock()
	b.downSince = time.Time{}
	b.mu.Unlock()
}

func (b *backend) failed(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.downSince.IsZero() {
		b.downSince = now
	}
	return now.Sub(b.downSince)
}

// unreachable reports whether err is the backend not answering (as
// opposed to the caller's own context ending).
func unreachable(ctx context.Context, err error) bool {
	var re *provider.RetryableError
	return ctx.Err() == nil && errors.As(err, &re)
}

// load asks a backend its queue length (GET /prompt).
func (p *Provider) load(ctx context.Context, b *backend) (int, error) {
	var r struct {
		ExecInfo struct {
			QueueRemaining *int `json:"queue_remaining"`
		} `json:"exec_info"`
	}
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, b.origin+"/prompt", nil, nil)
	if err == nil {
		err = p.http.Err(resp)
	}
	if err == nil && (json.Unmarshal(resp.Body, &r) != nil || r.ExecInfo.QueueRemaining == nil) {
		err = &provider.RetryableError{Err: fmt.Errorf("comfyui: %s answers GET /prompt without exec_info.queue_remaining", b.host)}
	}
	if err != nil {
		b.failed(p.cfg.Now())
		return 0, err
	}
	b.answered()
	b.mu.Lock()
	b.queue = *r.ExecInfo.QueueRemaining
	b.mu.Unlock()
	return *r.ExecInfo.QueueRemaining, nil
}

// choose asks every backend that can run w its queue length and takes the
// shortest (counting submits under way); among those of equal length the
// one with the most free VRAM, then the one picked least; a backend that
// does not answer is left out.
func (p *Provider) choose(ctx context.Context, w *Workflow) (*backend, error) {
	var shortest []*backend
	bestLoad := 0
	var errs []string
	for _, a := range askAll(p.able(w), func(b *backend) (int, error) { return p.load(ctx, b) }) {
		if a.err != nil {
			errs = append(errs, a.b.host+": "+a.err.Error())
			continue
		}
		a.b.mu.Lock()
		load := a.v + a.b.inflight
		a.b.mu.Unlock()
		switch {
		case shortest == nil || load < bestLoad:
			shortest, bestLoad = []*backend{a.b}, load
		case load == bestLoad:
			shortest = append(shortest, a.b)
		}
	}
	if shortest == nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		slices.Sort(errs)
		return nil, &provider.RetryableError{Err: fmt.Errorf("%w: no ComfyUI answers (%s)", provider.ErrNotCreated, strings.Join(errs, "; ")), After: 5 * time.Second}
	}
	free := p.vramFree(ctx, shortest)
	best := slices.MinFunc(shortest, func(a, b *backend) int {
		if c := cmp.Compare(free[b], free[a]); c != 0 {
			return c // more free VRAM first
		}
		a.mu.Lock()
		pa := a.picked
		a.mu.Unlock()
		b.mu.Lock()
		pb := b.picked
		b.mu.Unlock()
		return cmp.Or(cmp.Compare(pa, pb), strings.Compare(a.origin, b.origin))
	})
	best.mu.Lock()
	best.inflight++
	best.picked++
	best.mu.Unlock()
	return best, nil
}

// able are the backends that have every node class of w, as the last
// Listed read them (one not read yet may); all of them when none has: the
// one chosen refuses the graph, naming the node.
func (p *Provider) able(w *Workflow) []*backend {
	var out []*backend
	for _, b := range p.backends {
		b.mu.Lock()
		has := b.classes == nil || !slices.ContainsFunc(w.classes(), func(c string) bool { return !b.classes[c] })
		b.mu.Unlock()
		if has {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return p.backends
	}
	return out
}

// vramFree is the free VRAM of each of several backends (GET
// /system_stats: the largest devices[].vram_free; server.py system_stats
// lists the torch device ComfyUI runs on), -1 where it cannot be had; nil
// for a single backend, which needs no tie broken.
func (p *Provider) vramFree(ctx context.Context, bs []*backend) map[*backend]int64 {
	if len(bs) < 2 {
		return nil
	}
	out := map[*backend]int64{}
	for _, a := range askAll(bs, func(b *backend) (int64, error) {
		var st struct {
			Devices []struct {
				VRAMFree int64 `json:"vram_free"`
			} `json:"devices"`
		}
		free := int64(-1)
		if p.http.GetJSON(ctx, b.origin+"/system_stats", &st) == nil {
			for _, d := range st.Devices {
				free = max(free, d.VRAMFree)
			}
		}
		return free, nil
	}) {
		out[a.b] = a.v
	}
	return out
}

// reply is one backend's answer to askAll.
type reply[T any] struct {
	b   *backend
	v   T
	err error
}

// askAll asks every backend of bs at once; the replies in bs's order.
func askAll[T any](bs []*backend, ask func(*backend) (T, error)) []reply[T] {
	out := make([]reply[T], len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() {
			v, err := ask(b)
			out[i] = reply[T]{b, v, err}
		})
	}
	wg.Wait()
	return out
}

// Ping implements provider.Pinger: some backend answers /system_stats.
func (p *Provider) Ping(ctx context.Context) error {
	var errs []string
	for _, b := range p.backends {
		resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, b.origin+"/system_stats", nil, nil)
		if err == nil {
			err = p.http.Err(resp)
		}
		if err == nil {
			b.answered()
			return nil
		}
		b.failed(p.cfg.Now())
		errs = append(errs, b.host+": "+err.Error())
	}
	return fmt.Errorf("comfyui: no backend answers: %s", strings.Join(errs, "; "))
}

// --- submit ---

// Submit implements provider.Provider: the inputs uploaded, the graph
// built and queued under the generation's prompt id on the least loaded
// backend, unless that backend already holds it.
func (p *Provider) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	w, ok := p.models[req.Model.ID]
	if !ok {
		return provider.Job{}, &provider.PermanentError{Message: fmt.Sprintf("no ComfyUI workflow serves model %q here", req.Model.ID)}
	}
	if err := w.CheckInput(req.Input); err != nil {
		return provider.Job{}, &provider.PermanentError{Message: err.Error()}
	}
	p.start()
	b, err := p.choose(ctx, w)
	if err != nil {
		return provider.Job{}, err
	}
	defer func() {
		b.mu.Lock()
		b.inflight--
		b.mu.Unlock()
	}()
	id := PromptID(req.IdempotencyKey)
	if held, heldID, err := p.holder(ctx, b, id, req.IdempotencyKey, w); err != nil {
		return provider.Job{}, httpx.SubmitErr(err, nil)
	} else if held != nil {
		return p.jobOf(held, w.Model.ID, heldID, id), nil // queued by an earlier attempt: never twice
	}
	job := p.jobOf(b, w.Model.ID, id, id)
	files, err := p.uploadInputs(ctx, b, w, id, req)
	if err != nil {
		return provider.Job{}, err
	}
	graph, err := w.build(req, files)
	if err != nil {
		return provider.Job{}, err
	}
	p.live.track(id)
	body := map[string]any{"prompt": graph, "prompt_id": id, "client_id": p.clientID,
		"extra_data": map[string]any{markerKey: req.IdempotencyKey}}
	resp, err := p.http.Do(ctx, httpx.Create, http.MethodPost, b.origin+"/prompt", body, nil)
	if err != nil {
		return provider.Job{}, httpx.SubmitErr(err, nil)
	}
	if resp.Status == http.StatusBadRequest {
		return provider.Job{}, &provider.PermanentError{Message: refusal(w, resp.Body)}
	}
	if err := p.http.Err(resp); err != nil {
		return provider.Job{}, httpx.SubmitErr(err, resp)
	}
	var r struct {
		PromptID string `json:"prompt_id"`
	}
	if json.Unmarshal(resp.Body, &r) != nil || r.PromptID == "" {
		// A ComfyUI before 974958ff (2023-05-10) names no prompt: it
		// cannot be followed.
		return provider.Job{}, &provider.PermanentError{Message: fmt.Sprintf("the ComfyUI at %s queued the prompt without naming it (a ComfyUI from before May 2023); update ComfyUI", b.host)}
	}
	b.answered()
	if r.PromptID != id {
		// Older than 260a5ca5 (2025-07-14): the backend minted its own id.
		// The job is recorded under it; after a crash before this record,
		// Find finds the prompt by its marker.
		b.mu.Lock()
		b.mints, b.noJobs = true, true // the jobs API came much later
		b.mu.Unlock()
		p.live.forget(id)
		p.live.trackAs(r.PromptID, id)
		p.cfg.Logger.Info("comfyui: the backend ignored darkroom's prompt id (ComfyUI before 2025-07-14); following its own", "backend", b.host, "prompt", r.PromptID)
		job = p.jobOf(b, w.Model.ID, r.PromptID, id)
	} else {
		b.mu.Lock()
		b.keeps = true
		b.mu.Unlock()
	}
	return job, nil
}

// markerKey is the extra_data key of the generation id darkroom queues a
// prompt with: ComfyUI keeps it in the queue and the history, where Find
// looks for it on a backend too old to keep our prompt id.
const markerKey = "darkroom_generation"

// holder is the backend that already holds prompt id (or, on one known to
// mint its own ids, the prompt marked with key) and the prompt's id
// there, if one that answers does: the chosen one must answer; one that
// does not answer was left out by choose (the runner's Find, which asks
// every backend, is what settles a submit whose outcome is unknown).
func (p *Provider) holder(ctx context.Context, chosen *backend, id, key string, w *Workflow) (*backend, string, error) {
	var held *backend
	var heldID string
	var err error
	for _, a := range askAll(p.backends, func(b *backend) (*view, error) {
		b.mu.Lock()
		mark := ""
		if b.mints {
			mark = key
		}
		b.mu.Unlock()
		v, found, err := p.lookup(ctx, b, id, mark, w)
		if !found {
			return nil, err
		}
		return &v, err
	}) {
		switch {
		case a.v != nil:
			held, heldID = a.b, a.v.id
		case a.err != nil && a.b == chosen:
			err = a.err
		}
	}
	if held != nil {
		return held, heldID, nil
	}
	return nil, "", err
}

// nodeError is one entry of a 400's node_errors.
type nodeError struct {
	ClassType string `json:"class_type"`
	Errors    []struct {
		Type      string         `json:"type"`
		Message   string         `json:"message"`
		Details   string         `json:"details"`
		ExtraInfo map[string]any `json:"extra_info"`
	} `json:"errors"`
}

// refusal is the message of a 400 from POST /prompt: each node and input
// named, in darkroom's words where the input is one of generate's own.
func refusal(w *Workflow, body []byte) string {
	var r struct {
		Error struct {
			Type      string         `json:"type"`
			Message   string         `json:"message"`
			Details   string         `json:"details"`
			ExtraInfo map[string]any `json:"extra_info"`
		} `json:"error"`
		NodeErrors map[string]nodeError `json:"node_errors"`
	}
	if json.Unmarshal(body, &r) != nil {
		return clip.Message("ComfyUI refused the workflow: " + httpx.Message(body))
	}
	owned := w.owned()
	var parts []string
	for _, node := range slices.Sorted(mapsKeys(r.NodeErrors)) {
		ne := r.NodeErrors[node]
		for _, e := range ne.Errors {
			in, _ := e.ExtraInfo["input_name"].(string)
			s := fmt.Sprintf("node %s (%s)", node, ne.ClassType)
			if in != "" {
				s += " input " + in
				if arg, ok := owned[node+"."+in]; ok {
					s += " (set by " + arg + ")"
				}
			}
			s += ": " + e.Message
			if e.Details != "" {
				s += " (" + e.Details + ")"
			}
			parts = append(parts, s)
		}
	}
	msg := "ComfyUI refused workflow " + w.Name
	if r.Error.Type != "" {
		msg += " (" + r.Error.Type + ")"
	}
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, "; ")
	} else {
		msg += ": " + strings.TrimSuffix(r.Error.Message, ".")
		if r.Error.Details != "" {
			msg += " (" + r.Error.Details + ")"
		}
		if r.Error.Type == "missing_node_type" {
			msg += "; install the custom node on every ComfyUI darkroom uses"
		}
	}
	return clip.Message(msg)
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// uploadInputs uploads each input file to the node input its role maps
// to, named from the prompt id and overwritten: a retry replaces its
// file. It returns what each node input is to name.
func (p *Provider) uploadInputs(ctx context.Context, b *backend, w *Workflow, id string, req provider.Request) (map[string]string, error) {
	files := map[string]string{}
	refs := 0
	all := slices.Clone(req.Extra)
	if req.InputImage != nil {
		in := *req.InputImage
		in.Role = provider.RoleImage
		all = append([]provider.Input{in}, all...)
	}
	for _, in := range all {
		var ref, role string
		switch in.Role {
		case provider.RoleImage, provider.RoleFirstFrame, "":
			ref, role = w.Map.Image, "image"
		case provider.RoleMask:
			ref, role = w.Map.Mask, "mask"
		case provider.RoleLastFrame:
			ref, role = w.Map.LastFrame, "last_frame"
		case provider.RoleReference:
			if refs < len(w.Map.References) {
				ref = w.Map.References[refs]
			}
			role = fmt.Sprintf("reference-%d", refs+1)
			refs++
		}
		if ref == "" {
			return nil, &provider.PermanentError{Message: fmt.Sprintf("workflow %s takes no %s input", w.Name, in.Role)}
		}
		name := "darkroom-" + id + "-" + role + extOf(in.MimeType)
		var got string
		var err error
		if role == "mask" && ref == w.Map.Image {
			// The mask of a LoadImage node is its image's alpha: ComfyUI's
			// own /upload/mask writes the image with the mask as alpha.
			got, err = p.uploadAlphaMask(ctx, b, "darkroom-"+id+"-mask.png", files[ref], in)
		} else {
			got, err = p.upload(ctx, b, name, in, "/upload/image", nil)
		}
		if err != nil {
			return nil, err
		}
		files[ref] = got
	}
	return files, nil
}

// uploadAlphaMask sends a mask to POST /upload/mask over the image
// uploaded as original: darkroom's mask is white where the image
// changes, LoadImage's is where its alpha is clear (its MASK is 1 -
// alpha), so the mask is turned into an alpha channel first, decoded
// within package preview's budget.
func (p *Provider) uploadAlphaMask(ctx context.Context, b *backend, name, original string, in provider.Input) (string, error) {
	if original == "" {
		return "", &provider.PermanentError{Message: "a mask on the input image's own node needs the input image"}
	}
	rc, err := in.Open(ctx)
	if err != nil {
		return "", fmt.Errorf("comfyui: read mask: %w", err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	err = preview.Decode(rc, func(src image.Image) error {
		r := src.Bounds()
		out := image.NewNRGBA(image.Rect(0, 0, r.Dx(), r.Dy()))
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				g := color.GrayModel.Convert(src.At(x, y)).(color.Gray)
				out.SetNRGBA(x-r.Min.X, y-r.Min.Y, color.NRGBA{A: 255 - g.Y})
			}
		}
		return png.Encode(&buf, out)
	})
	if err != nil {
		return "", &provider.PermanentError{Message: fmt.Sprintf("the mask cannot be read: %v", err)}
	}
	ref, _ := json.Marshal(map[string]string{"filename": original, "subfolder": "", "type": "input"})
	data := buf.Bytes()
	mask := provider.Input{MimeType: "image/png", Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }}
	return p.upload(ctx, b, name, mask, "/upload/mask", map[string]string{"original_ref": string(ref)})
}

func extOf(mime string) string {
	switch mime {
	case "image/jpeg":
		return ".jpg"
	case "image/webp":
		return ".webp"
	case "image/gif":
		return ".gif"
	}
	return ".png"
}

// upload streams one input to route (POST /upload/image or /upload/mask;
// type input, overwrite, and fields).
func (p *Provider) upload(ctx context.Context, b *backend, name string, in provider.Input, route string, fields map[string]string) (string, error) {
	if in.Open == nil {
		return "", &provider.PermanentError{Message: "an input file cannot be read"}
	}
	rc, err := in.Open(ctx)
	if err != nil {
		return "", fmt.Errorf("comfyui: read input: %w", err)
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			fw, err := mw.CreateFormFile("image", name)
			if err != nil {
				return err
			}
			if _, err := io.Copy(fw, rc); err != nil {
				return err
			}
			all := map[string]string{"overwrite": "true", "type": "input"}
			maps.Copy(all, fields)
			for k, v := range all {
				if err := mw.WriteField(k, v); err != nil {
					return err
				}
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	stream, r, err := p.http.Open(ctx, httpx.Other, http.MethodPost, b.origin+route, pr, mw.FormDataContentType(), nil)
	pr.Close()
	if err != nil {
		return "", err
	}
	if stream == nil {
		return "", p.http.Err(r)
	}
	defer stream.Body.Close()
	var u struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(io.LimitReader(stream.Body, 1<<20)).Decode(&u); err != nil || u.Name == "" {
		return "", &provider.RetryableError{Err: fmt.Errorf("comfyui: %s answered the upload without a file name", b.host)}
	}
	return u.Name, nil
}

// --- find, status ---

// view is what a backend says of one prompt.
type view struct {
	id       string // its prompt id there
	state    provider.State
	outputs  []provider.Output
	err      string
	position int // 1-based, pending only (0: unknown)
}

// Find implements provider.Provider: the generation's prompt id looked up
// on every backend (on one without the jobs API, which may be too old to
// keep our id, also its marker). A backend that cannot be asked makes the
// answer unknown (an error), never "none": a second submit could run it
// twice.
func (p *Provider) Find(ctx context.Context, key string) (provider.Job, bool, error) {
	id := PromptID(key)
	var errs []string
	for _, b := range p.backends {
		b.mu.Lock()
		mark := key
		if b.keeps {
			mark = "" // seen to keep our ids: the id is enough
		}
		b.mu.Unlock()
		v, found, err := p.lookup(ctx, b, id, mark, nil)
		if err != nil {
			if ctx.Err() != nil {
				return provider.Job{}, false, ctx.Err()
			}
			errs = append(errs, b.host+": "+err.Error())
			continue
		}
		if found {
			p.start()
			return p.jobOf(b, "", v.id, id), true, nil
		}
	}
	if len(errs) > 0 {
		return provider.Job{}, false, &provider.RetryableError{Err: fmt.Errorf("comfyui: cannot tell whether prompt %s was queued: %s", id, strings.Join(errs, "; ")), After: 5 * time.Second}
	}
	return provider.Job{}, false, nil
}

// lookup asks one backend about a prompt: the jobs API, or on a ComfyUI
// without it the history and the queue, and there (key set) the prompt
// marked with generation key.
func (p *Provider) lookup(ctx context.Context, b *backend, id, key string, w *Workflow) (view, bool, error) {
	b.mu.Lock()
	noJobs := b.noJobs
	b.mu.Unlock()
	if !noJobs {
		resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, b.origin+"/api/jobs/"+url.PathEscape(id), nil, nil)
		if err != nil {
			return view{}, false, err
		}
		if resp.Status == http.StatusNotFound {
			var nf struct {
				Error string `json:"error"`
			}
			if json.Unmarshal(resp.Body, &nf) == nil && nf.Error != "" {
				b.answered()
				return view{}, false, nil // the jobs API does not know it
			}
			b.mu.Lock()
			b.noJobs = true // an older ComfyUI
			b.mu.Unlock()
			return p.lookupOld(ctx, b, id, key, w)
		}
		if err := p.http.Err(resp); err != nil {
			return view{}, false, err
		}
		var j job
		if err := json.Unmarshal(resp.Body, &j); err != nil {
			return view{}, false, &provider.RetryableError{Err: fmt.Errorf("comfyui: unreadable job: %w", err)}
		}
		b.answered()
		v := p.viewOfJob(b, j, w)
		v.id = id
		if v.state == provider.StateQueued {
			v.position = p.position(ctx, b, id)
		}
		return v, true, nil
	}
	return p.lookupOld(ctx, b, id, key, w)
}

// job is /api/jobs/{id}'s answer (jobs.py normalize_*_item).
type job struct {
	ID             string                    `json:"id"`
	Status         string                    `json:"status"`
	Outputs        map[string]map[string]any `json:"outputs"`
	ExecutionError map[string]any            `json:"execution_error"`
}

func (p *Provider) viewOfJob(b *backend, j job, w *Workflow) view {
	switch j.Status {
	case "pending":
		return view{state: provider.StateQueued}
	case "in_progress":
		return view{state: provider.StateRunning}
	case "completed":
		return view{state: provider.StateCompleted, outputs: p.outputsOf(b, j.Outputs, w)}
	case "cancelled":
		return view{state: provider.StateCancelled}
	case "failed":
		return view{state: provider.StateFailed, err: runError(j.ExecutionError)}
	}
	return view{state: provider.StateQueued}
}

func runError(e map[string]any) string {
	if e == nil {
		return "the ComfyUI run failed"
	}
	node, _ := e["node_id"].(string)
	class, _ := e["node_type"].(string)
	msg, _ := e["exception_message"].(string)
	typ, _ := e["exception_type"].(string)
	s := "the ComfyUI run failed"
	if node != "" {
		s += fmt.Sprintf(" at node %s (%s)", node, class)
	}
	if msg = strings.TrimSpace(msg); msg != "" {
		s += ": " + msg
	} else if typ != "" {
		s += ": " + typ
	}
	return clip.Message(s)
}

// lookupOld is lookup on a ComfyUI without the jobs API.
func (p *Provider) lookupOld(ctx context.Context, b *backend, id, key string, w *Workflow) (view, bool, error) {
	v, found, err := p.lookupOldID(ctx, b, id, w)
	if err != nil || found || key == "" {
		return v, found, err
	}
	marked, err := p.findMarked(ctx, b, key)
	if err != nil || marked == "" {
		return view{}, false, err
	}
	return p.lookupOldID(ctx, b, marked, w)
}

// lookupOldID is lookupOld by prompt id.
func (p *Provider) lookupOldID(ctx context.Context, b *backend, id string, w *Workflow) (view, bool, error) {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, b.origin+"/history/"+url.PathEscape(id), nil, nil)
	if err == nil {
		err = p.http.Err(resp)
	}
	if err != nil {
		return view{}, false, err
	}
	var h map[string]struct {
		Outputs map[string]map[string]any `json:"outputs"`
		Status  *struct {
			StatusStr string  `json:"status_str"`
			Messages  [][]any `json:"messages"`
		} `json:"status"`
	}
	if err := json.Unmarshal(resp.Body, &h); err != nil {
		return view{}, false, &provider.RetryableError{Err: fmt.Errorf("comfyui: unreadable history: %w", err)}
	}
	if item, ok := h[id]; ok {
		b.answered()
		if item.Status == nil || item.Status.StatusStr != "error" {
			return view{id: id, state: provider.StateCompleted, outputs: p.outputsOf(b, item.Outputs, w)}, true, nil
		}
		var errData map[string]any
		for _, m := range item.Status.Messages {
			if len(m) < 2 {
				continue
			}
			switch m[0] {
			case "execution_interrupted":
				return view{id: id, state: provider.StateCancelled}, true, nil
			case "execution_error":
				errData, _ = m[1].(map[string]any)
			}
		}
		return view{id: id, state: provider.StateFailed, err: runError(errData)}, true, nil
	}
	q, err := p.queue(ctx, b)
	if err != nil {
		return view{}, false, err
	}
	if slices.Contains(q.running, id) {
		return view{id: id, state: provider.StateRunning}, true, nil
	}
	if i := slices.Index(q.pending, id); i >= 0 {
		return view{id: id, state: provider.StateQueued, position: i + 1}, true, nil
	}
	return view{}, false, nil
}

// findMarked is the id of the prompt queued with generation key as its
// marker on b ("" none): its queue, then its whole history, streamed
// (each entry read on its own, so a long history costs time, not
// memory).
func (p *Provider) findMarked(ctx context.Context, b *backend, key string) (string, error) {
	q, err := p.queue(ctx, b)
	if err != nil {
		return "", err
	}
	if id := q.marked[key]; id != "" {
		return id, nil
	}
	found := ""
	err = p.eachEntry(ctx, b, "/history", func(id string, dec *json.Decoder) (bool, error) {
		var item struct {
			Prompt []json.RawMessage `json:"prompt"`
		}
		if err := dec.Decode(&item); err != nil {
			return false, err
		}
		if markerOf(item.Prompt) == key {
			found = id
		}
		return found != "", nil
	})
	return found, err
}

// markerOf is the marker of a queue item (number, prompt_id, prompt,
// extra_data, outputs_to_execute): extra_data's markerKey.
func markerOf(item []json.RawMessage) string {
	if len(item) < 4 {
		return ""
	}
	var extra map[string]any
	_ = json.Unmarshal(item[3], &extra)
	s, _ := extra[markerKey].(string)
	return s
}

// queueView is a backend's queue: the ids running and pending, in queue
// order, and the id of each marked prompt by its marker.
type queueView struct {
	running, pending []string
	marked           map[string]string
}

// queue is GET /queue: the ids running and pending, in queue order.
func (p *Provider) queue(ctx context.Context, b *backend) (queueView, error) {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, b.origin+"/queue", nil, nil)
	if err == nil {
		err = p.http.Err(resp)
	}
	if err != nil {
		return queueView{}, err
	}
	var q struct {
		Running [][]json.RawMessage `json:"queue_running"`
		Pending [][]json.RawMessage `json:"queue_pending"`
	}
	if err := json.Unmarshal(resp.Body, &q); err != nil {
		return queueView{}, &provider.RetryableError{Err: fmt.Errorf("comfyui: unreadable queue: %w", err)}
	}
	b.answered()
	type item struct {
		n  float64
		id string
	}
	marked := map[string]string{}
	ids := func(items [][]json.RawMessage) []string {
		var its []item
		for _, it := range items {
			if len(it) >= 2 {
				var n float64
				var id string
				_ = json.Unmarshal(it[0], &n)
				_ = json.Unmarshal(it[1], &id)
				its = append(its, item{n, id})
				if m := markerOf(it); m != "" {
					marked[m] = id
				}
			}
		}
		slices.SortStableFunc(its, func(a, b item) int { return cmp.Compare(a.n, b.n) })
		var out []string
		for _, it := range its {
			out = append(out, it.id)
		}
		return out
	}
	return queueView{running: ids(q.Running), pending: ids(q.Pending), marked: marked}, nil
}

// position is a pending prompt's place in its backend's queue (the jobs
// API's pending jobs, oldest first); 0 when it cannot be had.
func (p *Provider) position(ctx context.Context, b *backend, id string) int {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, b.origin+"/api/jobs?status=pending&sort_by=created_at&sort_order=asc", nil, nil)
	if err != nil || !resp.OK() {
		return 0
	}
	var r struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	if json.Unmarshal(resp.Body, &r) != nil {
		return 0
	}
	for i, j := range r.Jobs {
		if j.ID == id {
			return i + 1
		}
	}
	return 0
}

// outputKeys are the lists of files an output node's ui output holds
// (SaveImage and SaveVideo: images; VideoHelperSuite: gifs).
var outputKeys = []string{"images", "gifs", "videos", "video", "animated_images"}

// outputsOf reads the result files of the workflow's save nodes (any
// node's, for a job found without its model), in node order.
func (p *Provider) outputsOf(b *backend, outputs map[string]map[string]any, w *Workflow) []provider.Output {
	m := map[string]Node{}
	for k := range outputs {
		m[k] = Node{}
	}
	nodes := ids(m)
	var out []provider.Output
	for _, node := range nodes {
		if w != nil && !slices.Contains(w.Map.Outputs, node) {
			continue
		}
		for _, key := range outputKeys {
			items, _ := outputs[node][key].([]any)
			for _, it := range items {
				f, _ := it.(map[string]any)
				name, _ := f["filename"].(string)
				sub, _ := f["subfolder"].(string)
				typ, _ := f["type"].(string)
				if name == "" || cmp.Or(typ, "output") != "output" {
					continue
				}
				q := url.Values{"filename": {name}, "subfolder": {sub}, "type": {"output"}}
				format, _ := f["format"].(string)
				out = append(out, provider.Output{URL: b.origin + "/view?" + q.Encode(), MimeType: mimeOf(name, format)})
			}
		}
	}
	return out
}

func mimeOf(name, format string) string {
	if strings.HasPrefix(format, "video/") {
		return "video/mp4"
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".webp":
		return "image/webp"
	case ".gif":
		return "image/gif"
	case ".mp4", ".mov":
		return "video/mp4"
	case ".webm":
		return "video/webm"
	}
	return "application/octet-stream"
}

// Status implements provider.Provider.
func (p *Provider) Status(ctx context.Context, j provider.Job) (provider.Status, error) {
	b, d, err := p.backendOf(j)
	if err != nil {
		return provider.Status{}, err
	}
	p.start()
	p.live.trackAs(j.ID, d.Ours)
	w := p.models[d.Model]
	v, found, err := p.lookup(ctx, b, j.ID, "", w)
	if err != nil {
		if !unreachable(ctx, err) {
			return provider.Status{}, err
		}
		down := b.failed(p.cfg.Now())
		if down >= p.cfg.GiveUp {
			p.live.forget(j.ID)
			return provider.Status{State: provider.StateFailed, NotBilled: true,
				Error: fmt.Sprintf("the ComfyUI at %s has not answered for %s while running this prompt; given up", b.host, down.Round(time.Second))}, nil
		}
		return provider.Status{}, err
	}
	if !found {
		p.live.forget(j.ID)
		if p.askedToCancel(j.ID) {
			return provider.Status{State: provider.StateCancelled, Message: "cancelled at ComfyUI (" + b.host + ")"}, nil
		}
		return provider.Status{State: provider.StateFailed, NotBilled: true,
			Error: fmt.Sprintf("the ComfyUI at %s no longer knows this prompt: it restarted and lost its queue, or its history was cleared", b.host)}, nil
	}
	st := provider.Status{State: v.state}
	switch v.state {
	case provider.StateQueued:
		st.Message = "in the queue of the ComfyUI at " + b.host
		if v.position > 0 {
			st.Message += fmt.Sprintf(", position %d", v.position)
		}
	case provider.StateRunning:
		st, _ = p.running(b, j.ID)
	case provider.StateCompleted:
		st.Progress, st.Message, st.Outputs = 1, "completed on the ComfyUI at "+b.host, v.outputs
		if len(v.outputs) == 0 {
			st = provider.Status{State: provider.StateFailed, NotBilled: true, Error: "the ComfyUI run completed without an output file from the workflow's save nodes"}
		}
	case provider.StateFailed:
		st.Error, st.NotBilled = v.err, true
	case provider.StateCancelled:
		st.Message = "cancelled at ComfyUI (" + b.host + ")"
	}
	if st.State.Terminal() {
		p.live.forget(j.ID)
	}
	return st, nil
}

// running is a running prompt's status as the websocket last told it
// (ok false: it told nothing of its steps yet).
func (p *Provider) running(b *backend, id string) (provider.Status, bool) {
	st := provider.Status{State: provider.StateRunning, Message: "running on the ComfyUI at " + b.host}
	l, ok := p.live.get(id)
	if !ok || l.max <= 0 {
		return st, false
	}
	st.Progress = min(float64(l.value)/float64(l.max), 0.99)
	st.Message += fmt.Sprintf(": node %s, step %d/%d (%.0f%%)", l.node, l.value, l.max, st.Progress*100)
	if l.frames > 0 {
		st.Message += fmt.Sprintf(", %d preview frames", l.frames)
	}
	return st, true
}

func (p *Provider) askedToCancel(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	for k, at := range p.cancelled {
		if now.Sub(at) > 24*time.Hour {
			delete(p.cancelled, k)
		}
	}
	_, ok := p.cancelled[id]
	return ok
}

// Cancel implements provider.Provider: POST /api/jobs/{id}/cancel, or on
// an older ComfyUI /interrupt with the prompt id and /queue delete; then
// the state the backend shows.
func (p *Provider) Cancel(ctx context.Context, j provider.Job) (provider.Status, error) {
	b, _, err := p.backendOf(j)
	if err != nil {
		return provider.Status{}, err
	}
	p.mu.Lock()
	p.cancelled[j.ID] = p.cfg.Now()
	p.mu.Unlock()
	b.mu.Lock()
	noJobs := b.noJobs
	b.mu.Unlock()
	if !noJobs {
		resp, err := p.http.Do(ctx, httpx.Other, http.MethodPost, b.origin+"/api/jobs/"+url.PathEscape(j.ID)+"/cancel", map[string]any{}, nil)
		if err != nil {
			return provider.Status{}, err
		}
		var nf struct {
			Error string `json:"error"`
		}
		if resp.Status == http.StatusNotFound && json.Unmarshal(resp.Body, &nf) != nil {
			b.mu.Lock()
			b.noJobs = true
			b.mu.Unlock()
			noJobs = true
		} else if err := p.http.Err(resp); err != nil {
			return provider.Status{}, err
		}
	}
	if noJobs {
		// A ComfyUI before 464ba1d6 (2025-09-02) interrupts whatever runs,
		// whatever prompt_id it is given: interrupt only our own.
		q, err := p.queue(ctx, b)
		if err != nil {
			return provider.Status{}, err
		}
		call := struct {
			path string
			body any
		}{"/queue", map[string]any{"delete": []string{j.ID}}}
		if slices.Contains(q.running, j.ID) {
			call.path, call.body = "/interrupt", map[string]any{"prompt_id": j.ID}
		}
		resp, err := p.http.Do(ctx, httpx.Other, http.MethodPost, b.origin+call.path, call.body, nil)
		if err == nil {
			err = p.http.Err(resp)
		}
		if err != nil {
			return provider.Status{}, err
		}
	}
	st, err := p.Status(ctx, j)
	if err != nil {
		return provider.Status{State: provider.StateRunning, Message: "cancellation requested at ComfyUI (" + b.host + ")"}, nil
	}
	if !st.State.Terminal() {
		st.Message = "cancellation requested; " + st.Message
	}
	return st, nil
}

// OpenOutput implements provider.Provider: the file from /view on the
// backend that made it (never another host).
func (p *Provider) OpenOutput(ctx context.Context, j provider.Job, out provider.Output) (io.ReadCloser, error) {
	b, _, err := p.backendOf(j)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(out.URL, b.origin+"/view?") {
		return nil, &provider.PermanentError{Message: "a ComfyUI output not on its backend's /view"}
	}
	stream, r, err := p.files.Open(ctx, httpx.Other, http.MethodGet, out.URL, nil, "", nil)
	if err != nil {
		return nil, err
	}
	if stream == nil {
		return nil, p.http.Err(r)
	}
	return stream.Body, nil
}

// LivePreview implements generation.LivePreviewer: the latest preview
// frame of the prompt of generation id (its prompt id is derived from it).
func (p *Provider) LivePreview(generationID string) ([]byte, int, bool) {
	return p.Preview(PromptID(generationID))
}

// Preview is the latest preview frame of a running prompt (made small by
// package preview: a JPEG of at most 512 px and 64 KB), and how many
// frames came; ok is false when none came.
func (p *Provider) Preview(jobID string) (jpeg []byte, frames int, ok bool) {
	l, ok := p.live.get(jobID)
	if !ok || l.preview == nil {
		return nil, 0, false
	}
	return bytes.Clone(l.preview), l.frames, true
}
