package emulator

// A ComfyUI backend, with the wire shapes of Comfy-Org/ComfyUI's
// server.py, execution.py, main.py and comfy_execution/jobs.py (index
// commit 002c3fb9, checked 2026-12-07; the git snapshot a125cd84 of
// 2025-10-12 has the same queue, history, upload, view, object_info and
// websocket shapes, and takes a client's prompt_id unchecked, but has no
// jobs API; see MintsPromptID for a ComfyUI older still):
//
//   - POST /prompt {prompt, client_id?, prompt_id?, extra_data?} →
//     {prompt_id, number, node_errors}; a prompt_id not in canonical
//     lowercase UUID form → 400 invalid_prompt_id; a failed validation →
//     400 {error:{type,message,details,extra_info}, node_errors}. ComfyUI
//     does not refuse a prompt_id it already holds: it queues it again.
//   - GET /prompt → {exec_info:{queue_remaining}} (pending + running).
//   - GET /queue → {queue_running, queue_pending}, items
//     [number, prompt_id, prompt, extra_data, outputs_to_execute];
//     POST /queue {delete:[ids]} | {clear:true}.
//   - POST /interrupt {prompt_id?}: only the running prompt, if it is
//     that one; without an id, whatever runs.
//   - GET /history/{id} → {id: {prompt, outputs, status:{status_str,
//     completed, messages}, meta}} or {}; GET /history?max_items=N → the
//     last N entries (all without it), oldest first, the same shape.
//   - GET /api/jobs/{id} → the job (status pending, in_progress,
//     completed, failed, cancelled) or 404 {"error":"Job not found"};
//     POST /api/jobs/{id}/cancel → {cancelled: bool}, idempotent.
//   - POST /upload/image, /upload/mask (multipart image, overwrite, type,
//     subfolder; the mask's original_ref) → {name, subfolder, type}.
//   - GET /view?filename&type&subfolder → the file.
//   - GET /system_stats → {system:{...}, devices:[...]}.
//   - GET /object_info → {class_type: node_info} of every node class
//     loaded (node_info: input {required, optional}, input_order, output,
//     output_is_list, output_name, name, display_name, description,
//     python_module, category, output_node).
//   - /ws?clientId=: text frames {type, data}; binary frames a 4-byte
//     big-endian event type, then (1, PREVIEW_IMAGE) a 4-byte image type
//     (1 JPEG, 2 PNG) and the image, or (4, PREVIEW_IMAGE_WITH_METADATA,
//     for a client that sent feature flag supports_preview_metadata) a
//     4-byte length, that much JSON metadata (prompt_id, node_id, ...) and
//     the image. Execution events go to the socket of the prompt's
//     client_id; execution_interrupted and status go to every socket.
//
// Every route is also served under /api, as ComfyUI's add_routes does.
// The emulated backend runs one prompt at a time on the emulator's clock.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// ComfyOptions configures one emulated ComfyUI backend.
type ComfyOptions struct {
	// Header, when set ("Name: value"), is required on every request (a
	// ComfyUI behind an authenticating proxy); others get 401.
	Header string
	// NoJobsAPI makes /api/jobs* answer 404, as a ComfyUI older than the
	// jobs API does.
	NoJobsAPI bool
	// MintsPromptID is a ComfyUI older than commit 260a5ca5 (2025-07-14,
	// #8189): POST /prompt ignores a client's prompt_id and answers the
	// str(uuid.uuid4()) it made; older than 464ba1d6 (2025-09-02, #9607)
	// too, POST /interrupt ignores its body and interrupts whatever runs;
	// and without the jobs API.
	MintsPromptID bool
	// Steps is how many sampler steps a prompt reports (default 4), each
	// with a progress event and a preview frame.
	Steps int
	// RunTime is how long a prompt runs (default 2 s; a workflow that saves
	// a video 6 s).
	RunTime time.Duration
	// VRAMFree is what /system_stats says of its GPU's free memory
	// (default 20 GB; see SetVRAMFree).
	VRAMFree int64
	// Missing are node classes this backend has not installed: absent from
	// /object_info, refused as missing_node_type (see also Uninstall).
	Missing []string
}

// ComfyUI is one emulated ComfyUI backend.
type ComfyUI struct {
	Server *httptest.Server
	URL    string

	e    *Emulator
	opts ComfyOptions

	mu       sync.Mutex
	number   int
	pending  []*comfyPrompt
	running  *comfyPrompt
	history  map[string]*comfyPrompt
	horder   []string
	files    map[string][]byte // type/subfolder/name
	sockets  map[string]*comfySocket
	down     bool
	counts   map[string]int
	submits  map[string]int // prompt_id → POSTs that queued it
	boots    int
	lastDone time.Time
	hold     int         // POST /prompt replies still to hold
	held     chan string // the ids of those held
	faults   map[string][]Fault
	large    map[string]int64 // file key → its size: a PNG padded with zeros, streamed
	missing  map[string]bool  // node classes not installed
	vramFree int64
}

type comfyPrompt struct {
	id       string
	number   int
	graph    map[string]comfyNode
	extra    map[string]any
	outputs  []string // output node ids
	client   string
	start    time.Time
	steps    int
	sent     int // steps reported
	fail     bool
	hang     bool
	video    bool
	status   string // "" running/pending, success, error, interrupted
	messages [][2]any
	out      map[string]any
	sentHead bool
}

type comfyNode struct {
	ClassType string         `json:"class_type"`
	Inputs    map[string]any `json:"inputs"`
	Meta      map[string]any `json:"_meta,omitempty"`
}

type comfySocket struct {
	id       string
	out      chan comfyFrame
	metadata bool // supports_preview_metadata
	done     chan struct{}
}

type comfyFrame struct {
	text bool
	data []byte
}

// ComfyUI starts an emulated ComfyUI backend on the emulator's clock; the
// emulator's Advance and AdvanceTo run it, and Close stops it.
func (e *Emulator) ComfyUI(o ComfyOptions) *ComfyUI {
	if o.Steps <= 0 {
		o.Steps = 4
	}
	c := &ComfyUI{e: e, opts: o, history: map[string]*comfyPrompt{}, files: map[string][]byte{},
		sockets: map[string]*comfySocket{}, counts: map[string]int{}, submits: map[string]int{}, held: make(chan string, 16),
		faults: map[string][]Fault{}, large: map[string]int64{}, missing: map[string]bool{}}
	for _, cls := range o.Missing {
		c.missing[cls] = true
	}
	c.vramFree = o.VRAMFree
	if c.vramFree == 0 {
		c.vramFree = 20000000000
	}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	c.URL = c.Server.URL
	e.mu.Lock()
	e.comfy = append(e.comfy, c)
	e.mu.Unlock()
	return c
}

// stepComfy runs every ComfyUI backend up to the clock's time.
func (e *Emulator) stepComfy() {
	e.mu.Lock()
	cs := slices.Clone(e.comfy)
	e.mu.Unlock()
	for _, c := range cs {
		c.step(e.clock.Now())
	}
}

func (e *Emulator) closeComfy() {
	e.mu.Lock()
	cs := slices.Clone(e.comfy)
	e.mu.Unlock()
	for _, c := range cs {
		c.Server.CloseClientConnections()
		c.dropSockets()
		c.Server.Close()
	}
}

// SetDown makes the backend stop answering (every connection dropped, its
// websockets closed) or answer again. Its prompts go on meanwhile, as
// behind a broken network.
func (c *ComfyUI) SetDown(down bool) {
	c.mu.Lock()
	c.down = down
	c.mu.Unlock()
	if down {
		c.dropSockets()
		c.Server.CloseClientConnections()
	}
}

// Restart is ComfyUI restarted: its queue, the running prompt and its
// history are gone (all held in memory); its files stay.
func (c *ComfyUI) Restart() {
	c.dropSockets()
	c.mu.Lock()
	c.pending, c.running, c.history, c.horder = nil, nil, map[string]*comfyPrompt{}, nil
	c.boots++
	c.mu.Unlock()
	c.Server.CloseClientConnections()
}

func (c *ComfyUI) dropSockets() {
	c.mu.Lock()
	socks := slices.Collect(maps.Values(c.sockets))
	c.sockets = map[string]*comfySocket{}
	c.mu.Unlock()
	for _, s := range socks {
		s.close()
	}
}

// Count is how many requests reached route (e.g. "POST /prompt",
// "GET /api/jobs/{id}", "POST /upload/image", "GET /ws"; "dropped": those
// dropped while down).
func (c *ComfyUI) Count(route string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[route]
}

// Submits is how many times prompt id was queued.
func (c *ComfyUI) Submits(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.submits[id]
}

// Input is a node input of the graph prompt id was queued with (ok false:
// no such prompt or input).
func (c *ComfyUI) Input(id, node, input string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.history[id]
	if c.running != nil && c.running.id == id {
		p = c.running
	}
	for _, q := range c.pending {
		if q.id == id {
			p = q
		}
	}
	if p == nil {
		return nil, false
	}
	v, ok := p.graph[node].Inputs[input]
	return v, ok
}

// Queued is the number of prompts pending or running.
func (c *ComfyUI) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.remaining()
}

// Running is the id of the prompt running ("" none).
func (c *ComfyUI) Running() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == nil {
		return ""
	}
	return c.running.id
}

// Sockets is the number of websockets open.
func (c *ComfyUI) Sockets() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sockets)
}

// File is a stored file (type "input" or "output").
func (c *ComfyUI) File(typ, subfolder, name string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.files[typ+"/"+subfolder+"/"+name]
	return b, ok
}

// Files lists the names of the stored files of a type.
func (c *ComfyUI) Files(typ string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k := range c.files {
		if strings.HasPrefix(k, typ+"/") {
			out = append(out, strings.TrimPrefix(k, typ+"/"))
		}
	}
	sort.Strings(out)
	return out
}

func (c *ComfyUI) remaining() int {
	n := len(c.pending)
	if c.running != nil {
		n++
	}
	return n
}

var comfyRoute = regexp.MustCompile(`^/(history|api/jobs)/([^/]+)(/cancel)?$`)

func (c *ComfyUI) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	down := c.down
	if down {
		c.counts["dropped"]++
	}
	c.mu.Unlock()
	if down {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		http.Error(w, "down", http.StatusBadGateway)
		return
	}
	if h := c.opts.Header; h != "" {
		name, value, _ := strings.Cut(h, ":")
		if r.Header.Get(strings.TrimSpace(name)) != strings.TrimSpace(value) {
			http.Error(w, "401: Unauthorized", http.StatusUnauthorized)
			return
		}
	}
	path := r.URL.Path
	if strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/api/jobs") {
		path = strings.TrimPrefix(path, "/api") // every route is also under /api
	}
	route := r.Method + " " + path
	if m := comfyRoute.FindStringSubmatch(path); m != nil {
		route = r.Method + " /" + m[1] + "/{id}" + m[3]
	}
	c.mu.Lock()
	c.counts[route]++
	var fault Fault
	if fs := c.faults[route]; len(fs) > 0 {
		fault, c.faults[route] = fs[0], fs[1:]
	}
	c.mu.Unlock()
	switch fault {
	case Fault500:
		http.Error(w, "500 Internal Server Error\n\nServer got itself in trouble", http.StatusInternalServerError)
		return
	case FaultDrop:
		hangUp(w)
		return
	case FaultLoseReply:
		r = r.WithContext(context.WithValue(r.Context(), loseReplyKey{}, true))
	}
	if strings.HasPrefix(path, "/api/jobs") && (c.opts.NoJobsAPI || c.opts.MintsPromptID) {
		http.Error(w, "404: Not Found", http.StatusNotFound)
		return
	}
	switch {
	case route == "GET /ws":
		c.websocket(w, r)
	case route == "POST /prompt":
		c.postPrompt(w, r)
	case route == "GET /prompt":
		c.mu.Lock()
		n := c.remaining()
		c.mu.Unlock()
		comfyJSON(w, 200, map[string]any{"exec_info": map[string]any{"queue_remaining": n}})
	case route == "GET /queue":
		c.mu.Lock()
		q := map[string]any{"queue_running": c.items(c.running), "queue_pending": c.items(c.pending...)}
		c.mu.Unlock()
		comfyJSON(w, 200, q)
	case route == "POST /queue":
		var body struct {
			Clear  bool     `json:"clear"`
			Delete []string `json:"delete"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		c.mu.Lock()
		if body.Clear {
			c.pending = nil
		}
		for _, id := range body.Delete {
			c.dequeue(id)
		}
		c.mu.Unlock()
		w.WriteHeader(200)
	case route == "POST /interrupt":
		var body struct {
			PromptID string `json:"prompt_id"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		c.mu.Lock()
		if c.running != nil && (body.PromptID == "" || body.PromptID == c.running.id || c.opts.MintsPromptID) {
			c.interrupt(c.e.clock.Now())
		}
		c.mu.Unlock()
		w.WriteHeader(200)
	case route == "GET /history":
		c.mu.Lock()
		ids := c.horder
		if n, err := strconv.Atoi(r.URL.Query().Get("max_items")); err == nil && n >= 0 && n < len(ids) {
			ids = ids[len(ids)-n:]
		}
		out := map[string]any{}
		for _, id := range ids {
			out[id] = c.history[id].historyItem()
		}
		c.mu.Unlock()
		comfyJSON(w, 200, out) // encoding/json sorts the keys; ComfyUI's order is not relied on
	case route == "GET /history/{id}":
		id := comfyRoute.FindStringSubmatch(path)[2]
		c.mu.Lock()
		out := map[string]any{}
		if p, ok := c.history[id]; ok {
			out[id] = p.historyItem()
		}
		c.mu.Unlock()
		comfyJSON(w, 200, out)
	case route == "GET /api/jobs/{id}":
		id := comfyRoute.FindStringSubmatch(path)[2]
		c.mu.Lock()
		job := c.job(id)
		c.mu.Unlock()
		if job == nil {
			comfyJSON(w, 404, map[string]any{"error": "Job not found"})
			return
		}
		comfyJSON(w, 200, job)
	case route == "POST /api/jobs/{id}/cancel":
		id := comfyRoute.FindStringSubmatch(path)[2]
		c.mu.Lock()
		cancelled := false
		if c.running != nil && c.running.id == id {
			c.interrupt(c.e.clock.Now())
			cancelled = true
		} else if c.dequeue(id) {
			cancelled = true
		}
		c.mu.Unlock()
		comfyJSON(w, 200, map[string]any{"cancelled": cancelled})
	case route == "GET /api/jobs":
		c.mu.Lock()
		var jobs []map[string]any
		status := r.URL.Query().Get("status")
		if status == "" || strings.Contains(status, "in_progress") {
			if c.running != nil {
				jobs = append(jobs, c.queueJob(c.running, "in_progress", false))
			}
		}
		if status == "" || strings.Contains(status, "pending") {
			for _, p := range c.pending {
				jobs = append(jobs, c.queueJob(p, "pending", false))
			}
		}
		c.mu.Unlock()
		if jobs == nil {
			jobs = []map[string]any{}
		}
		comfyJSON(w, 200, map[string]any{"jobs": jobs, "pagination": map[string]any{"offset": 0, "limit": nil, "total": len(jobs), "has_more": false}})
	case route == "POST /upload/image", route == "POST /upload/mask":
		c.upload(w, r, route == "POST /upload/mask")
	case route == "GET /view":
		q := r.URL.Query()
		typ := q.Get("type")
		if typ == "" {
			typ = "output"
		}
		name := q.Get("filename")
		if name == "" || name[0] == '/' || strings.Contains(name, "..") {
			w.WriteHeader(400)
			return
		}
		c.mu.Lock()
		n, large := c.large[typ+"/"+q.Get("subfolder")+"/"+name]
		c.mu.Unlock()
		if large {
			w.Header().Set("Content-Type", "image/png")
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			writePadded(w, hostility{large: n})
			return
		}
		b, ok := c.File(typ, q.Get("subfolder"), name)
		if !ok {
			w.WriteHeader(404)
			return
		}
		ct := "image/png"
		if strings.HasSuffix(name, ".mp4") {
			ct = "video/mp4"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Disposition", fmt.Sprintf("filename=%q", name))
		w.Write(b)
	case route == "GET /object_info":
		c.mu.Lock()
		out := map[string]any{}
		for cls, inputs := range comfyClasses {
			if !c.missing[cls] {
				out[cls] = nodeInfo(cls, inputs)
			}
		}
		c.mu.Unlock()
		comfyJSON(w, 200, out)
	case route == "GET /redirect":
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	case route == "GET /system_stats":
		c.mu.Lock()
		free := c.vramFree
		c.mu.Unlock()
		comfyJSON(w, 200, map[string]any{
			"system": map[string]any{"os": "linux", "ram_total": 68719476736, "ram_free": 34359738368, "comfyui_version": "0.5.0",
				"python_version": "3.12.3", "pytorch_version": "2.9.0+cu128", "embedded_python": false, "argv": []string{"main.py"}},
			"devices": []map[string]any{{"name": "cuda:0 NVIDIA GeForce RTX 4090 : cudaMallocAsync", "type": "cuda", "index": 0,
				"vram_total": 25757220864, "vram_free": free, "torch_vram_total": 0, "torch_vram_free": 0}},
		})
	default:
		http.Error(w, "404: Not Found", http.StatusNotFound)
	}
}

func comfyJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// items are queue items as /queue shows them (sensitive data left out).
func (c *ComfyUI) items(ps ...*comfyPrompt) []any {
	out := []any{}
	for _, p := range ps {
		if p != nil {
			out = append(out, p.item())
		}
	}
	return out
}

func (p *comfyPrompt) item() []any {
	return []any{p.number, p.id, p.graph, p.extra, p.outputs}
}

func (c *ComfyUI) dequeue(id string) bool {
	for i, p := range c.pending {
		if p.id == id {
			c.pending = slices.Delete(c.pending, i, i+1)
			c.broadcastStatus()
			return true
		}
	}
	return false
}

// job is /api/jobs/{id}'s answer (jobs.py get_job), nil when unknown.
func (c *ComfyUI) job(id string) map[string]any {
	if p, ok := c.history[id]; ok {
		return p.historyJob()
	}
	if c.running != nil && c.running.id == id {
		return c.queueJob(c.running, "in_progress", true)
	}
	for _, p := range c.pending {
		if p.id == id {
			return c.queueJob(p, "pending", true)
		}
	}
	return nil
}

func (c *ComfyUI) queueJob(p *comfyPrompt, status string, workflow bool) map[string]any {
	j := map[string]any{"id": p.id, "status": status, "priority": p.number, "create_time": p.extra["create_time"],
		"outputs_count": 0, "previewable_outputs_count": 0}
	if workflow {
		j["workflow"] = map[string]any{"prompt": p.graph, "extra_data": p.extra}
	}
	return j
}

func (p *comfyPrompt) historyItem() map[string]any {
	st := map[string]any{"status_str": "success", "completed": p.status == "success", "messages": p.messages}
	if p.status != "success" {
		st["status_str"] = "error"
	}
	out := p.out
	if out == nil {
		out = map[string]any{}
	}
	return map[string]any{"prompt": p.item(), "outputs": out, "status": st, "meta": map[string]any{}}
}

func (p *comfyPrompt) historyJob() map[string]any {
	status := map[string]string{"success": "completed", "error": "failed", "interrupted": "cancelled"}[p.status]
	j := map[string]any{"id": p.id, "status": status, "priority": p.number, "create_time": p.extra["create_time"],
		"outputs": p.out, "execution_status": p.historyItem()["status"],
		"workflow": map[string]any{"prompt": p.graph, "extra_data": p.extra}}
	n := 0
	for _, o := range p.out {
		for _, items := range o.(map[string]any) {
			if l, ok := items.([]any); ok {
				n += len(l)
			}
		}
	}
	j["outputs_count"], j["previewable_outputs_count"] = n, n
	for _, m := range p.messages {
		d, _ := m[1].(map[string]any)
		switch m[0] {
		case "execution_start":
			j["execution_start_time"] = d["timestamp"]
		case "execution_success", "execution_interrupted":
			j["execution_end_time"] = d["timestamp"]
		case "execution_error":
			j["execution_end_time"] = d["timestamp"]
			j["execution_error"] = d
		}
	}
	return j
}

// canonicalUUID is validate_job_id: str(uuid.UUID(v)) == v.
var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func (c *ComfyUI) postPrompt(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Prompt    map[string]comfyNode `json:"prompt"`
		ClientID  string               `json:"client_id"`
		PromptID  *string              `json:"prompt_id"`
		ExtraData map[string]any       `json:"extra_data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "bad json", 400)
		return
	}
	if body.Prompt == nil {
		comfyJSON(w, 400, map[string]any{"error": comfyErr("no_prompt", "No prompt provided", "No prompt provided", map[string]any{}), "node_errors": map[string]any{}})
		return
	}
	id := ""
	if body.PromptID != nil && !c.opts.MintsPromptID {
		if !canonicalUUID.MatchString(*body.PromptID) {
			comfyJSON(w, 400, map[string]any{"error": comfyErr("invalid_prompt_id", "prompt_id must be a valid UUID",
				"prompt_id must be a UUID string in canonical lowercase hyphenated form; omit it to let the server generate one", map[string]any{}), "node_errors": map[string]any{}})
			return
		}
		id = *body.PromptID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		id = uuid4()
	}
	outputs, errBody := c.validate(body.Prompt)
	if errBody != nil {
		comfyJSON(w, 400, errBody)
		return
	}
	extra := body.ExtraData
	if extra == nil {
		extra = map[string]any{}
	}
	if body.ClientID != "" {
		extra["client_id"] = body.ClientID
	}
	extra["create_time"] = c.e.clock.Now().UnixMilli()
	p := &comfyPrompt{id: id, number: c.number, graph: body.Prompt, extra: extra, outputs: outputs, client: body.ClientID, steps: c.opts.Steps}
	c.number++
	for _, n := range body.Prompt {
		for _, v := range n.Inputs {
			if s, ok := v.(string); ok {
				p.fail = p.fail || strings.Contains(s, "[fail]")
				p.hang = p.hang || strings.Contains(s, "[hang]")
			}
		}
		p.video = p.video || n.ClassType == "SaveVideo" || n.ClassType == "VHS_VideoCombine"
	}
	c.pending = append(c.pending, p)
	c.submits[id]++
	c.broadcastStatus()
	c.startNext(c.e.clock.Now())
	if lose, _ := r.Context().Value(loseReplyKey{}).(bool); lose {
		c.mu.Unlock()
		hangUp(w)
		c.mu.Lock()
		return
	}
	if c.hold > 0 {
		// Queued, and the reply held until the client goes (a reply lost
		// to a crash).
		c.hold--
		select {
		case c.held <- id:
		default:
		}
		c.mu.Unlock()
		<-r.Context().Done()
		c.mu.Lock()
		return
	}
	comfyJSON(w, 200, map[string]any{"prompt_id": id, "number": p.number, "node_errors": map[string]any{}})
}

// Uninstall removes node classes from the backend (a custom node pack
// taken out): /object_info stops listing them and prompts using them are
// refused.
func (c *ComfyUI) Uninstall(classes ...string) {
	c.mu.Lock()
	for _, cls := range classes {
		c.missing[cls] = true
	}
	c.mu.Unlock()
}

// SetVRAMFree sets what /system_stats says of the GPU's free memory.
func (c *ComfyUI) SetVRAMFree(n int64) {
	c.mu.Lock()
	c.vramFree = n
	c.mu.Unlock()
}

// Install puts node classes back (a custom node pack installed).
func (c *ComfyUI) Install(classes ...string) {
	c.mu.Lock()
	for _, cls := range classes {
		delete(c.missing, cls)
	}
	c.mu.Unlock()
}

// nodeInfo is server.py node_info of a class the emulator knows: its
// inputs as INPUT_TYPES declares them ([type, options], a COMBO's choices
// as a list), the rest filled in.
func nodeInfo(cls string, inputs map[string]comfyInput) map[string]any {
	required := map[string]any{}
	for name, in := range inputs {
		switch {
		case in.link:
			required[name] = []any{strings.ToUpper(name)}
		case in.kind == "COMBO":
			required[name] = []any{slices.Clone(in.choices), map[string]any{}}
		case in.kind == "INT" || in.kind == "FLOAT":
			required[name] = []any{in.kind, map[string]any{"min": in.min, "max": in.max}}
		default:
			required[name] = []any{in.kind, map[string]any{}}
		}
	}
	return map[string]any{"input": map[string]any{"required": required}, "input_order": map[string]any{"required": slices.Sorted(maps.Keys(required))},
		"output": []string{}, "output_is_list": []bool{}, "output_name": []string{}, "name": cls, "display_name": cls, "description": "",
		"python_module": "nodes", "category": "emulated", "output_node": comfyOutputClasses[cls]}
}

// Inject makes the next request of route ("POST /prompt", "GET
// /api/jobs/{id}", ...) answer f: Fault500 (500, nothing done), FaultDrop
// (the connection closed, nothing done), FaultLoseReply (POST /prompt
// only: the prompt queued, then the connection closed).
func (c *ComfyUI) Inject(route string, f Fault) {
	c.mu.Lock()
	c.faults[route] = append(c.faults[route], f)
	c.mu.Unlock()
}

// Down closes the backend for good: connections are refused.
func (c *ComfyUI) Down() {
	c.dropSockets()
	c.Server.CloseClientConnections()
	c.Server.Close()
}

// Jobs is how many prompts were queued in all.
func (c *ComfyUI) Jobs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.submits {
		n += k
	}
	return n
}

// HoldPrompts makes the next n POST /prompt queue their prompt and never
// answer (until the client goes away); Held receives each one's id.
func (c *ComfyUI) HoldPrompts(n int) {
	c.mu.Lock()
	c.hold += n
	c.mu.Unlock()
}

// Held receives the prompt id of each POST /prompt held by HoldPrompts.
func (c *ComfyUI) Held() <-chan string { return c.held }

// uuid4 is str(uuid.uuid4()): what ComfyUI names a prompt it is not
// given an id for.
func uuid4() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func comfyErr(typ, msg, details string, extra map[string]any) map[string]any {
	return map[string]any{"type": typ, "message": msg, "details": details, "extra_info": extra}
}

// comfyInput is one input a node class declares: link (a connection) or
// a widget value, with its bounds or choices.
type comfyInput struct {
	link     bool
	kind     string // INT, FLOAT, STRING, COMBO
	min, max float64
	choices  []string
	file     bool // an input file name (LoadImage)
}

var (
	cLink              = comfyInput{link: true}
	cStr               = comfyInput{kind: "STRING"}
	intIn              = func(lo, hi float64) comfyInput { return comfyInput{kind: "INT", min: lo, max: hi} }
	floatIn            = func(lo, hi float64) comfyInput { return comfyInput{kind: "FLOAT", min: lo, max: hi} }
	combo              = func(c ...string) comfyInput { return comfyInput{kind: "COMBO", choices: c} }
	imageFile          = comfyInput{kind: "COMBO", file: true}
	ComfyCheckpoints   = []string{"sd_xl_base_1.0.safetensors", "v1-5-pruned-emaonly.safetensors", "512-inpainting-ema.safetensors"}
	ComfyVideoModels   = []string{"svd_xt.safetensors"}
	comfySamplers      = []string{"euler", "euler_ancestral", "dpmpp_2m", "dpmpp_sde", "uni_pc"}
	comfySchedulers    = []string{"normal", "karras", "exponential", "simple", "sgm_uniform"}
	comfyOutputClasses = map[string]bool{"SaveImage": true, "PreviewImage": true, "SaveVideo": true, "VHS_VideoCombine": true}
)

// comfyClasses are the node classes the emulator knows, with their
// required inputs (a subset of ComfyUI's core nodes, and
// VideoHelperSuite's VHS_VideoCombine).
var comfyClasses = map[string]map[string]comfyInput{
	"CheckpointLoaderSimple": {"ckpt_name": combo(ComfyCheckpoints...)},
	"CLIPTextEncode":         {"text": cStr, "clip": cLink},
	"EmptyLatentImage":       {"width": intIn(16, 16384), "height": intIn(16, 16384), "batch_size": intIn(1, 4096)},
	"KSampler": {"model": cLink, "seed": intIn(0, 0xffffffffffffffff), "steps": intIn(1, 10000), "cfg": floatIn(0, 100),
		"sampler_name": combo(comfySamplers...), "scheduler": combo(comfySchedulers...), "positive": cLink, "negative": cLink,
		"latent_image": cLink, "denoise": floatIn(0, 1)},
	"VAEDecode":                 {"samples": cLink, "vae": cLink},
	"VAEEncode":                 {"pixels": cLink, "vae": cLink},
	"VAEEncodeForInpaint":       {"pixels": cLink, "vae": cLink, "mask": cLink, "grow_mask_by": intIn(0, 64)},
	"SaveImage":                 {"images": cLink, "filename_prefix": cStr},
	"PreviewImage":              {"images": cLink},
	"LoadImage":                 {"image": imageFile},
	"LoadImageMask":             {"image": imageFile, "channel": combo("alpha", "red", "green", "blue")},
	"ImageOnlyCheckpointLoader": {"ckpt_name": combo(ComfyVideoModels...)},
	"SVD_img2vid_Conditioning": {"clip_vision": cLink, "init_image": cLink, "vae": cLink, "width": intIn(16, 16384), "height": intIn(16, 16384),
		"video_frames": intIn(1, 4096), "motion_bucket_id": intIn(1, 1023), "fps": intIn(1, 1024), "augmentation_level": floatIn(0, 10)},
	"VideoLinearCFGGuidance": {"model": cLink, "min_cfg": floatIn(0, 100)},
	"CreateVideo":            {"images": cLink, "fps": floatIn(1, 120)},
	"SaveVideo":              {"video": cLink, "filename_prefix": cStr, "format": combo("auto", "mp4"), "codec": combo("auto", "h264")},
	"VHS_VideoCombine": {"images": cLink, "frame_rate": floatIn(1, 120), "loop_count": intIn(0, 100), "filename_prefix": cStr,
		"format": combo("video/h264-mp4", "image/gif"), "pingpong": comfyInput{kind: "BOOLEAN"}, "save_output": comfyInput{kind: "BOOLEAN"}},
}

// validate is execution.validate_prompt, for the classes above: the
// output nodes to run, or the 400 body.
func (c *ComfyUI) validate(graph map[string]comfyNode) ([]string, map[string]any) {
	ids := slices.Sorted(maps.Keys(graph))
	var outputs []string
	for _, id := range ids {
		n := graph[id]
		title, _ := n.Meta["title"].(string)
		if n.ClassType == "" {
			return nil, map[string]any{"error": comfyErr("missing_node_type", fmt.Sprintf("Node '%s' has no class_type. The workflow may be corrupted or a custom node is missing.", cmpStr(title, "ID #"+id)),
				fmt.Sprintf("Node ID '#%s'", id), map[string]any{"node_id": id, "class_type": nil, "node_title": title}), "node_errors": map[string]any{}}
		}
		if _, ok := comfyClasses[n.ClassType]; !ok || c.missing[n.ClassType] {
			return nil, map[string]any{"error": comfyErr("missing_node_type", fmt.Sprintf("Node '%s' not found. The custom node may not be installed.", cmpStr(title, n.ClassType)),
				fmt.Sprintf("Node ID '#%s'", id), map[string]any{"node_id": id, "class_type": n.ClassType, "node_title": cmpStr(title, n.ClassType)}), "node_errors": map[string]any{}}
		}
		if comfyOutputClasses[n.ClassType] {
			outputs = append(outputs, id)
		}
	}
	if len(outputs) == 0 {
		return nil, map[string]any{"error": comfyErr("prompt_no_outputs", "Prompt has no outputs", "", map[string]any{}), "node_errors": map[string]any{}}
	}
	nodeErrors := map[string]any{}
	var lines []string
	for _, id := range ids {
		n := graph[id]
		var errs []map[string]any
		for _, name := range slices.Sorted(maps.Keys(comfyClasses[n.ClassType])) {
			spec := comfyClasses[n.ClassType][name]
			v, ok := n.Inputs[name]
			if !ok {
				errs = append(errs, comfyErr("required_input_missing", "Required input is missing", name, map[string]any{"input_name": name}))
				continue
			}
			if l, isLink := v.([]any); isLink {
				if len(l) != 2 {
					errs = append(errs, comfyErr("bad_linked_input", "Bad linked input, must be a length-2 list of [node_id, slot_index]", name, map[string]any{"input_name": name, "received_value": v}))
				} else if from, _ := l[0].(string); graph[from].ClassType == "" {
					errs = append(errs, comfyErr("bad_linked_input", "Bad linked input", name, map[string]any{"input_name": name, "received_value": v}))
				}
				continue
			}
			if spec.link {
				errs = append(errs, comfyErr("bad_linked_input", "Bad linked input, must be a length-2 list of [node_id, slot_index]", name, map[string]any{"input_name": name, "received_value": v}))
				continue
			}
			if e := c.checkValue(name, spec, v); e != nil {
				errs = append(errs, e)
			}
		}
		if errs != nil {
			nodeErrors[id] = map[string]any{"errors": errs, "dependent_outputs": outputs, "class_type": n.ClassType}
			for _, e := range errs {
				lines = append(lines, fmt.Sprintf("%s: %s", e["message"], e["details"]))
			}
		}
	}
	if len(nodeErrors) > 0 {
		return nil, map[string]any{"error": comfyErr("prompt_outputs_failed_validation", "Prompt outputs failed validation", strings.Join(lines, "\n"), map[string]any{}),
			"node_errors": nodeErrors}
	}
	return outputs, nil
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (c *ComfyUI) checkValue(name string, spec comfyInput, v any) map[string]any {
	bad := func() map[string]any {
		return comfyErr("invalid_input_type", fmt.Sprintf("Failed to convert an input value to a %s value", spec.kind), fmt.Sprintf("%s, %v", name, v),
			map[string]any{"input_name": name, "received_value": v})
	}
	switch spec.kind {
	case "INT", "FLOAT":
		f, ok := v.(float64)
		if !ok {
			return bad()
		}
		if f < spec.min {
			return comfyErr("value_smaller_than_min", fmt.Sprintf("Value %v smaller than min of %v", f, spec.min), name, map[string]any{"input_name": name, "received_value": v})
		}
		if f > spec.max {
			return comfyErr("value_bigger_than_max", fmt.Sprintf("Value %v bigger than max of %v", f, spec.max), name, map[string]any{"input_name": name, "received_value": v})
		}
	case "STRING":
		if _, ok := v.(string); !ok {
			return bad()
		}
	case "BOOLEAN":
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case "COMBO":
		s, _ := v.(string)
		if spec.file {
			if _, ok := c.files["input//"+s]; !ok {
				return comfyErr("custom_validation_failed", "Custom validation failed for node", fmt.Sprintf("%s - Invalid image file: %s", name, s), map[string]any{"input_name": name, "received_value": v})
			}
			return nil
		}
		if !slices.Contains(spec.choices, s) {
			return comfyErr("value_not_in_list", "Value not in list", fmt.Sprintf("%s: '%v' not in %v", name, v, spec.choices),
				map[string]any{"input_name": name, "received_value": v})
		}
	}
	return nil
}

// upload is /upload/image and /upload/mask (server.py image_upload):
// without overwrite a name taken by other bytes becomes "name (1).ext";
// the same bytes are a duplicate, kept once.
func (c *ComfyUI) upload(w http.ResponseWriter, r *http.Request, mask bool) {
	if err := r.ParseMultipartForm(64 << 20); err != nil {
		w.WriteHeader(400)
		return
	}
	f, hdr, err := r.FormFile("image")
	if err != nil || hdr.Filename == "" {
		w.WriteHeader(400)
		return
	}
	b, _ := io.ReadAll(f)
	typ := cmpStr(r.FormValue("type"), "input")
	sub := r.FormValue("subfolder")
	name := hdr.Filename
	if strings.Contains(name, "..") || strings.Contains(sub, "..") || strings.HasPrefix(name, "/") {
		w.WriteHeader(400)
		return
	}
	if mask {
		var ref struct {
			Filename  string `json:"filename"`
			Subfolder string `json:"subfolder"`
			Type      string `json:"type"`
		}
		if json.Unmarshal([]byte(r.FormValue("original_ref")), &ref) != nil || ref.Filename == "" {
			w.WriteHeader(400)
			return
		}
		orig, ok := c.File(cmpStr(ref.Type, "output"), ref.Subfolder, ref.Filename)
		if ok {
			b = withAlpha(orig, b) // the original's pixels, the mask's alpha
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ow := r.FormValue("overwrite")
	if ow != "true" && ow != "1" {
		ext := ""
		if i := strings.LastIndex(name, "."); i > 0 {
			ext = name[i:]
		}
		base := strings.TrimSuffix(name, ext)
		for i := 1; ; i++ {
			have, ok := c.files[typ+"/"+sub+"/"+name]
			if !ok || bytes.Equal(have, b) {
				break
			}
			name = fmt.Sprintf("%s (%d)%s", base, i, ext)
		}
	}
	c.files[typ+"/"+sub+"/"+name] = b
	comfyJSON(w, 200, map[string]any{"name": name, "subfolder": sub, "type": typ})
}

// withAlpha is /upload/mask's save: the original image in RGBA with the
// mask's alpha channel; undecodable input leaves the mask as it came.
func withAlpha(orig, mask []byte) []byte {
	o, err1 := png.Decode(bytes.NewReader(orig))
	m, err2 := png.Decode(bytes.NewReader(mask))
	if err1 != nil || err2 != nil {
		return mask
	}
	out := image.NewNRGBA(o.Bounds())
	for y := o.Bounds().Min.Y; y < o.Bounds().Max.Y; y++ {
		for x := o.Bounds().Min.X; x < o.Bounds().Max.X; x++ {
			r, g, b, _ := o.At(x, y).RGBA()
			_, _, _, a := m.At(x, y).RGBA()
			out.SetNRGBA(x, y, color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)})
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, out)
	return buf.Bytes()
}

// --- running prompts, on the clock ---

func (c *ComfyUI) runTime(p *comfyPrompt) time.Duration {
	switch {
	case c.opts.RunTime > 0:
		return c.opts.RunTime
	case p.video:
		return 6 * time.Second
	}
	return 2 * time.Second
}

// startNext starts the first pending prompt if nothing runs.
func (c *ComfyUI) startNext(now time.Time) {
	if c.running != nil || len(c.pending) == 0 {
		return
	}
	p := c.pending[0]
	c.pending = c.pending[1:]
	if now.Before(c.lastDone) {
		now = c.lastDone
	}
	p.start = now
	c.running = p
	c.message(p, "execution_start", map[string]any{"prompt_id": p.id}, false, now)
	c.message(p, "execution_cached", map[string]any{"nodes": []string{}, "prompt_id": p.id}, false, now)
	c.broadcastStatus()
}

// step reports what the running prompt did up to now, finishes it when
// its time is up, and starts the next.
func (c *ComfyUI) step(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return // a partition: it runs on, reported when it answers again
	}
	for c.running != nil {
		p := c.running
		rt := c.runTime(p)
		sampler := p.nodeOf("KSampler")
		if !p.sentHead {
			p.sentHead = true
			for _, id := range p.order() {
				if id == sampler {
					break
				}
				c.send(p.client, "executing", map[string]any{"node": id, "display_node": id, "prompt_id": p.id})
			}
			c.send(p.client, "executing", map[string]any{"node": sampler, "display_node": sampler, "prompt_id": p.id})
		}
		for p.sent < p.steps {
			at := p.start.Add(rt * time.Duration(p.sent+1) / time.Duration(p.steps+1))
			if at.After(now) {
				return
			}
			if p.hang && p.sent >= 1 {
				return // stuck until interrupted
			}
			p.sent++
			c.send(p.client, "progress", map[string]any{"value": p.sent, "max": p.steps, "prompt_id": p.id, "node": sampler})
			c.sendPreview(p, sampler)
			if p.fail && p.sent == max(1, p.steps/2) {
				c.finish(p, at, "error", sampler)
				break
			}
		}
		if c.running != p {
			continue
		}
		end := p.start.Add(rt)
		if end.After(now) {
			return
		}
		c.finish(p, end, "success", "")
	}
}

// finish ends the running prompt: its outputs, its last events, its
// history entry; then the next starts.
func (c *ComfyUI) finish(p *comfyPrompt, at time.Time, how, node string) {
	switch how {
	case "success":
		p.out = map[string]any{}
		for _, id := range p.order() {
			if slices.Contains(p.outputs, id) {
				continue
			}
			if id != p.nodeOf("KSampler") {
				c.send(p.client, "executing", map[string]any{"node": id, "display_node": id, "prompt_id": p.id})
			}
		}
		for _, id := range p.outputs {
			c.send(p.client, "executing", map[string]any{"node": id, "display_node": id, "prompt_id": p.id})
			ui := c.render(p, id)
			p.out[id] = ui
			c.send(p.client, "executed", map[string]any{"node": id, "display_node": id, "output": ui, "prompt_id": p.id})
		}
		c.message(p, "execution_success", map[string]any{"prompt_id": p.id}, false, at)
	case "error":
		c.message(p, "execution_error", map[string]any{"prompt_id": p.id, "node_id": node, "node_type": p.graph[node].ClassType,
			"executed": []string{}, "exception_message": "failure requested by the [fail] token", "exception_type": "RuntimeError",
			"traceback": []string{}, "current_inputs": map[string]any{}, "current_outputs": []string{}}, false, at)
	case "interrupted":
		c.message(p, "execution_interrupted", map[string]any{"prompt_id": p.id, "node_id": node, "node_type": p.graph[node].ClassType,
			"executed": []string{}}, true, at)
	}
	p.status = how
	c.history[p.id] = p
	c.horder = append(c.horder, p.id)
	c.running = nil
	c.lastDone = at
	c.send(p.client, "executing", map[string]any{"node": nil, "prompt_id": p.id})
	c.broadcastStatus()
	c.startNext(at)
}

// interrupt stops the running prompt (an InterruptProcessingException at
// its next step).
func (c *ComfyUI) interrupt(now time.Time) {
	p := c.running
	if now.Before(p.start) {
		now = p.start
	}
	c.finish(p, now, "interrupted", p.nodeOf("KSampler"))
}

// message is PromptExecutor.add_message: kept in the history's status
// messages with a timestamp, sent to the prompt's client (or everyone).
func (c *ComfyUI) message(p *comfyPrompt, event string, data map[string]any, broadcast bool, at time.Time) {
	data["timestamp"] = at.UnixMilli()
	p.messages = append(p.messages, [2]any{event, data})
	if broadcast {
		c.send("", event, data)
	} else {
		c.send(p.client, event, data)
	}
}

func (p *comfyPrompt) order() []string {
	return slices.SortedFunc(maps.Keys(p.graph), func(a, b string) int {
		ai, _ := strconv.Atoi(a)
		bi, _ := strconv.Atoi(b)
		if ai != bi {
			return ai - bi
		}
		return strings.Compare(a, b)
	})
}

func (p *comfyPrompt) nodeOf(class string) string {
	for _, id := range p.order() {
		if p.graph[id].ClassType == class {
			return id
		}
	}
	if len(p.outputs) > 0 {
		return p.outputs[0]
	}
	return ""
}

// render writes an output node's files and answers its ui output: a
// SaveImage's batch of PNGs (the empty latent's size and batch, else the
// loaded image's size), a video's MP4.
func (c *ComfyUI) render(p *comfyPrompt, id string) map[string]any {
	n := p.graph[id]
	prefix, _ := n.Inputs["filename_prefix"].(string)
	prefix = cmpStr(prefix, "ComfyUI")
	sub, base := "", prefix
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		sub, base = prefix[:i], prefix[i+1:]
	}
	typ := "output"
	if n.ClassType == "PreviewImage" {
		typ, sub, base = "temp", "", "ComfyUI_temp_"+p.id[:8]
	}
	if save, ok := n.Inputs["save_output"].(bool); ok && !save && n.ClassType == "VHS_VideoCombine" {
		// VideoHelperSuite nodes.py (001a508, read 2026-12-07): "type":
		// "output" if save_output else "temp".
		typ = "temp"
	}
	file := func(ext string, i int) string {
		return fmt.Sprintf("%s_%05d_%s", base, len(c.files)+i+1, ext)
	}
	switch n.ClassType {
	case "SaveVideo":
		name := file(".mp4", 0)
		c.files[typ+"/"+sub+"/"+name] = MP4()
		return map[string]any{"images": []any{map[string]any{"filename": name, "subfolder": sub, "type": typ}}, "animated": []any{true}}
	case "VHS_VideoCombine":
		name := file(".mp4", 0)
		c.files[typ+"/"+sub+"/"+name] = MP4()
		return map[string]any{"gifs": []any{map[string]any{"filename": name, "subfolder": sub, "type": typ, "format": "video/h264-mp4", "frame_rate": 8.0}}}
	}
	w, h, batch := 64, 64, 1
	for _, m := range p.graph {
		switch m.ClassType {
		case "EmptyLatentImage":
			w, h = intOf(m.Inputs["width"], 64), intOf(m.Inputs["height"], 64)
			batch = intOf(m.Inputs["batch_size"], 1)
		case "LoadImage":
			name, _ := m.Inputs["image"].(string)
			if cfg, err := png.DecodeConfig(bytes.NewReader(c.files["input//"+name])); err == nil {
				w, h = cfg.Width, cfg.Height
			}
		}
	}
	if n := p.largeOutput(); n > 0 {
		name := file(".png", 0)
		c.large[typ+"/"+sub+"/"+name] = n
		return map[string]any{"images": []any{map[string]any{"filename": name, "subfolder": sub, "type": typ}}}
	}
	seed := 0
	if s := p.nodeOf("KSampler"); s != "" {
		seed = intOf(p.graph[s].Inputs["seed"], 0)
	}
	sw, sh := w, h // at most 256 px a side, in the same proportions
	if m := max(w, h); m > 256 {
		sw, sh = max(w*256/m, 1), max(h*256/m, 1)
	}
	var items []any
	for i := range batch {
		name := file(".png", i)
		c.files[typ+"/"+sub+"/"+name] = comfyPNG(sw, sh, seed+i)
		items = append(items, map[string]any{"filename": name, "subfolder": sub, "type": typ})
	}
	return map[string]any{"images": items}
}

func intOf(v any, def int) int {
	if f, ok := v.(float64); ok {
		return int(f)
	}
	return def
}

// comfyPNG is a real PNG of w×h (a gradient coloured by seed).
func comfyPNG(w, h, seed int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, max(w, 1), max(h, 1)))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(seed*37 + x), uint8(seed*91 + y), uint8(seed * 13), 255})
		}
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

// --- the websocket ---

func (c *ComfyUI) websocket(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	sid := r.URL.Query().Get("clientId")
	s := &comfySocket{out: make(chan comfyFrame, 1024), done: make(chan struct{})}
	c.mu.Lock()
	if sid == "" {
		sid = fmt.Sprintf("%032x", c.number+len(c.sockets)+1)
	}
	s.id = sid
	if old, ok := c.sockets[sid]; ok {
		old.close()
	}
	c.sockets[sid] = s
	c.sendTo(s, "status", map[string]any{"status": map[string]any{"exec_info": map[string]any{"queue_remaining": c.remaining()}}, "sid": sid})
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() { // reader: the feature flags of a first message
		defer cancel()
		first := true
		for {
			typ, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if typ != websocket.MessageText || !first {
				continue
			}
			first = false
			var m struct {
				Type string `json:"type"`
				Data struct {
					Preview bool `json:"supports_preview_metadata"`
				} `json:"data"`
			}
			if json.Unmarshal(b, &m) == nil && m.Type == "feature_flags" {
				c.mu.Lock()
				s.metadata = m.Data.Preview
				c.sendTo(s, "feature_flags", map[string]any{"supports_preview_metadata": true, "max_upload_size": 104857600})
				c.mu.Unlock()
			}
		}
	}()
	defer func() {
		c.mu.Lock()
		if c.sockets[sid] == s {
			delete(c.sockets, sid)
		}
		c.mu.Unlock()
		conn.Close(websocket.StatusGoingAway, "")
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			conn.CloseNow()
			return
		case f := <-s.out:
			typ := websocket.MessageBinary
			if f.text {
				typ = websocket.MessageText
			}
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Write(wctx, typ, f.data)
			wcancel()
			if err != nil {
				return
			}
		}
	}
}

func (s *comfySocket) close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
}

// send is send_json to one client ("" every client). Called with c.mu.
func (c *ComfyUI) send(client, event string, data map[string]any) {
	if client == "" {
		for _, s := range c.sockets {
			c.sendTo(s, event, data)
		}
		return
	}
	if s, ok := c.sockets[client]; ok {
		c.sendTo(s, event, data)
	}
}

func (c *ComfyUI) sendTo(s *comfySocket, event string, data any) {
	b, _ := json.Marshal(map[string]any{"type": event, "data": data})
	c.push(s, comfyFrame{text: true, data: b})
}

func (c *ComfyUI) push(s *comfySocket, f comfyFrame) {
	select {
	case s.out <- f:
	default: // a client that does not read is dropped, as a broken socket is
		s.close()
	}
}

func (c *ComfyUI) broadcastStatus() {
	c.send("", "status", map[string]any{"status": map[string]any{"exec_info": map[string]any{"queue_remaining": c.remaining()}}})
}

// sendPreview sends one preview frame of the running prompt to its
// client: PREVIEW_IMAGE_WITH_METADATA (4) when it asked for metadata, else
// PREVIEW_IMAGE (1) with the image type 2 (PNG).
func (c *ComfyUI) sendPreview(p *comfyPrompt, node string) {
	s, ok := c.sockets[p.client]
	if !ok {
		return
	}
	img := comfyPNG(16, 16, p.sent)
	var b bytes.Buffer
	if s.metadata {
		binary.Write(&b, binary.BigEndian, uint32(4))
		meta, _ := json.Marshal(map[string]any{"node_id": node, "prompt_id": p.id, "display_node_id": node, "parent_node_id": nil, "real_node_id": node, "image_type": "image/png"})
		binary.Write(&b, binary.BigEndian, uint32(len(meta)))
		b.Write(meta)
	} else {
		binary.Write(&b, binary.BigEndian, uint32(1))
		binary.Write(&b, binary.BigEndian, uint32(2))
	}
	b.Write(img)
	c.push(s, comfyFrame{data: b.Bytes()})
}

type loseReplyKey struct{}

// hangUp closes a request's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// largeOutput is the N of a [large:N] token in the prompt's text inputs:
// its one output a PNG padded with zeros to N bytes (0: none).
func (p *comfyPrompt) largeOutput() int64 {
	for _, n := range p.graph {
		for _, v := range n.Inputs {
			if s, ok := v.(string); ok {
				if h, ok := hostileOf(s); ok && h.large > 0 {
					return h.large
				}
			}
		}
	}
	return 0
}
