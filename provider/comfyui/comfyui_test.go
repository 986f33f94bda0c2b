package comfyui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// rig is an emulator with ComfyUI backends and a provider over them,
// on the emulator's clock.
type rig struct {
	t      *testing.T
	em     *emulator.Emulator
	clock  *emulator.Clock
	comfy  []*emulator.ComfyUI
	p      *Provider
	frames chan struct{}
}

func newRig(t *testing.T, n int, o emulator.ComfyOptions, cfg Config) *rig {
	t.Helper()
	clock := emulator.NewClock(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	em := emulator.New(emulator.Options{Clock: clock})
	t.Cleanup(em.Close)
	r := &rig{t: t, em: em, clock: clock, frames: make(chan struct{}, 4096)}
	for range n {
		c := em.ComfyUI(o)
		r.comfy = append(r.comfy, c)
		cfg.URLs = append(cfg.URLs, c.URL)
	}
	ws, err := LoadWorkflows("workflows")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workflows, cfg.Now = ws, clock.Now
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.onFrame = func() {
		select {
		case r.frames <- struct{}{}:
		default:
		}
	}
	t.Cleanup(p.Close)
	r.p = p
	return r
}

// connected waits until every backend holds the provider's websocket.
func (r *rig) connected() {
	r.t.Helper()
	r.p.start()
	deadline := time.After(10 * time.Second)
	for !r.p.Connected() || !r.socketsOpen() {
		select {
		case <-r.frames: // the first frame of each socket is its status
		case <-deadline:
			r.t.Fatal("the websockets did not connect")
		}
	}
}

func (r *rig) socketsOpen() bool {
	for _, c := range r.comfy {
		if c.Sockets() == 0 {
			return false
		}
	}
	return true
}

// until advances nothing: it waits for websocket frames until ok holds.
func (r *rig) until(what string, ok func() bool) {
	r.t.Helper()
	deadline := time.After(10 * time.Second)
	for !ok() {
		select {
		case <-r.frames:
		case <-deadline:
			r.t.Fatalf("never: %s", what)
		}
	}
}

func (r *rig) advance(d time.Duration) { r.em.Advance(d) }

func (r *rig) model(name string) provider.Model {
	r.t.Helper()
	w, ok := r.p.Workflow("comfyui:" + name)
	if !ok {
		r.t.Fatalf("no workflow %s", name)
	}
	return w.Model
}

func (r *rig) submit(key, model, prompt string, mod func(*provider.Request)) provider.Job {
	r.t.Helper()
	req := provider.Request{IdempotencyKey: key, Model: r.model(model), Prompt: prompt}
	if mod != nil {
		mod(&req)
	}
	job, err := r.p.Submit(context.Background(), req)
	if err != nil {
		r.t.Fatalf("submit %s: %v", key, err)
	}
	return job
}

func (r *rig) status(job provider.Job) provider.Status {
	r.t.Helper()
	st, err := r.p.Status(context.Background(), job)
	if err != nil {
		r.t.Fatalf("status: %v", err)
	}
	return st
}

func pngInput(w, h int, seed byte) *provider.Input {
	var b bytes.Buffer
	img := emuImage(w, h, seed)
	png.Encode(&b, img)
	data := b.Bytes()
	return &provider.Input{MimeType: "image/png", Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}}
}

func TestComfyPromptID(t *testing.T) {
	a, b := PromptID("0190aaaa"), PromptID("0190aaab")
	if a == b || a != PromptID("0190aaaa") || len(a) != 36 || strings.ToLower(a) != a || a[14] != '8' {
		t.Fatalf("prompt ids %s %s", a, b)
	}
}

func TestComfyWorkflows(t *testing.T) {
	ws, err := LoadWorkflows("workflows")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Workflow{}
	for _, w := range ws {
		byName[w.Name] = w
	}
	for _, tc := range []struct {
		name     string
		kind     provider.Kind
		m        Mapping
		maxCount int
		roles    map[string]int
		needs    bool
		ratios   bool
	}{
		{"text-to-image", provider.KindImage, Mapping{Prompt: "6.text", NegativePrompt: "7.text", Seed: "3.seed", Width: "5.width", Height: "5.height", Count: "5.batch_size", Outputs: []string{"9"}}, 4, nil, false, true},
		{"masked-inpainting", provider.KindImage, Mapping{Prompt: "6.text", NegativePrompt: "7.text", Seed: "3.seed", Image: "10.image", Mask: "11.image", Outputs: []string{"9"}}, 1, map[string]int{"mask": 1}, true, false},
		{"image-to-video", provider.KindVideo, Mapping{Seed: "3.seed", Width: "12.width", Height: "12.height", Image: "23.image", Outputs: []string{"27"}}, 1, nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := byName[tc.name]
			if w == nil {
				t.Fatal("not loaded")
			}
			m := w.Model
			if m.ID != "comfyui:"+tc.name || m.Provider != Name || m.Kind != tc.kind || m.MaxCount != tc.maxCount || m.NeedsInputImage != tc.needs || (len(m.AspectRatios) > 0) != tc.ratios {
				t.Fatalf("model %+v", m)
			}
			if len(m.Roles) != len(tc.roles) || (tc.roles != nil && m.Roles["mask"] != tc.roles["mask"]) {
				t.Fatalf("roles %v", m.Roles)
			}
			got, want := w.Map, tc.m
			if strings.Join(got.Outputs, ",") != strings.Join(want.Outputs, ",") || got.Prompt != want.Prompt || got.NegativePrompt != want.NegativePrompt ||
				got.Seed != want.Seed || got.Width != want.Width || got.Height != want.Height || got.Count != want.Count || got.Image != want.Image || got.Mask != want.Mask {
				t.Fatalf("mapping %+v, want %+v", got, want)
			}
			if m.Credits < 1 || m.ExpectedDuration <= 0 || m.Title == "" {
				t.Fatalf("model %+v", m)
			}
		})
	}
}

func TestComfyWorkflowRefused(t *testing.T) {
	for _, tc := range []struct {
		name, graph string
		mf          mappingFile
		want        string
	}{
		{"UI format", `{"nodes":[],"links":[]}`, mappingFile{}, "API-format"},
		{"no output", `{"1":{"class_type":"CLIPTextEncode","inputs":{"text":"x"}}}`, mappingFile{}, "no output node"},
		{"mapped to a missing node", `{"1":{"class_type":"SaveImage","inputs":{"images":["2",0]}}}`, mappingFile{Mapping: Mapping{Prompt: "7.text"}}, "names node 7"},
		{"mapped to a link", `{"1":{"class_type":"SaveImage","inputs":{"images":["2",0]}}}`, mappingFile{Mapping: Mapping{Prompt: "1.images"}}, "linked input"},
		{"bad ref", `{"1":{"class_type":"SaveImage","inputs":{"images":["2",0]}}}`, mappingFile{Mapping: Mapping{Seed: "seed"}}, `"node.input"`},
		{"bad kind", `{"1":{"class_type":"SaveImage","inputs":{"images":["2",0]}}}`, mappingFile{Kind: "audio"}, "image or video"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewWorkflow("x", []byte(tc.graph), tc.mf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestComfyCheckInput(t *testing.T) {
	ws, err := LoadWorkflows("workflows")
	if err != nil {
		t.Fatal(err)
	}
	var w *Workflow
	for _, x := range ws {
		if x.Name == "text-to-image" {
			w = x
		}
	}
	for _, tc := range []struct {
		name  string
		input map[string]any
		want  string // "" accepted
	}{
		{"steps and sampler", map[string]any{"3.steps": 30.0, "3.sampler_name": "dpmpp_2m", "4.ckpt_name": "v1-5-pruned-emaonly.safetensors"}, ""},
		{"owned seed", map[string]any{"3.seed": 5.0}, "set by generate's seed"},
		{"owned prompt", map[string]any{"6.text": "x"}, "set by generate's prompt"},
		{"linked", map[string]any{"3.model": "x"}, "linked to another node"},
		{"no node", map[string]any{"99.steps": 1.0}, "has no node 99"},
		{"no input", map[string]any{"3.nope": 1.0}, "has no input nope"},
		{"type", map[string]any{"3.steps": "many"}, "is a number, not a string"},
		{"not node.input", map[string]any{"steps": 1.0}, `"node.input"`},
		{"structured", map[string]any{"3.cfg": []any{1.0}}, "not a structured value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := w.CheckInput(tc.input)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	if len(w.Fields()) == 0 {
		t.Fatal("no fields")
	}
	for _, f := range w.Fields() {
		if f.Name == "3.seed" || f.Name == "6.text" || f.Name == "3.model" {
			t.Fatalf("field %s is owned or linked", f.Name)
		}
	}
}

// TestComfyRun: three prompts over two backends by queue length, with
// progress and previews from the websocket, outputs streamed from /view.
func TestComfyRun(t *testing.T) {
	r := newRig(t, 2, emulator.ComfyOptions{Steps: 4, RunTime: 4 * time.Second}, Config{})
	r.connected()
	jobs := []provider.Job{
		r.submit("gen-1", "text-to-image", "a lighthouse", func(q *provider.Request) { q.Count, q.AspectRatio = 2, "16:9" }),
		r.submit("gen-2", "text-to-image", "a ferry", nil),
		r.submit("gen-3", "text-to-image", "a harbour", nil),
	}
	if a, b := r.comfy[0].Queued(), r.comfy[1].Queued(); a+b != 3 || a == 0 || b == 0 {
		t.Fatalf("queued %d and %d: not shared by queue length", a, b)
	}
	third := r.status(jobs[2])
	if third.State != provider.StateQueued || !strings.Contains(third.Message, "position 1") {
		t.Fatalf("third: %+v", third)
	}
	r.advance(2 * time.Second)
	r.until("progress of the first", func() bool {
		l, ok := r.p.live.get(jobs[0].ID)
		return ok && l.value >= 2 && l.frames >= 2
	})
	st := r.status(jobs[0])
	if st.State != provider.StateRunning || st.Progress < 0.3 || !strings.Contains(st.Message, "step 2/4") {
		t.Fatalf("running: %+v", st)
	}
	if img, frames, ok := r.p.Preview(jobs[0].ID); !ok || frames < 2 || len(img) == 0 {
		t.Fatalf("preview: %v %d", ok, frames)
	}
	r.advance(2 * time.Second)
	st = r.status(jobs[0])
	if st.State != provider.StateCompleted || len(st.Outputs) != 2 {
		t.Fatalf("completed: %+v", st)
	}
	for _, o := range st.Outputs {
		rc, err := r.p.OpenOutput(context.Background(), jobs[0], o)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(rc)
		rc.Close()
		if err != nil || o.MimeType != "image/png" {
			t.Fatalf("output %s: %v", o.MimeType, err)
		}
		if b := img.Bounds(); b.Dx() <= b.Dy() {
			t.Fatalf("16:9 output is %v", b)
		}
	}
	if _, _, ok := r.p.Preview(jobs[0].ID); ok {
		t.Fatal("a finished prompt keeps its live preview")
	}
	if _, err := r.p.OpenOutput(context.Background(), jobs[0], provider.Output{URL: "http://elsewhere/view?filename=x"}); err == nil {
		t.Fatal("an output off the backend opened")
	}
	r.advance(8 * time.Second)
	for _, j := range jobs[1:] {
		if st := r.status(j); st.State != provider.StateCompleted || len(st.Outputs) != 1 {
			t.Fatalf("%s: %+v", j.ID, st)
		}
	}
}

// TestComfyExactlyOnce: a prompt is queued once whatever is retried; a
// backend that cannot be asked makes Find unsure, not "none".
func TestComfyExactlyOnce(t *testing.T) {
	r := newRig(t, 2, emulator.ComfyOptions{RunTime: time.Hour}, Config{NoWebsocket: true})
	job := r.submit("gen-once", "text-to-image", "a lighthouse", nil)
	again := r.submit("gen-once", "text-to-image", "a lighthouse", nil)
	if again.ID != job.ID || r.comfy[0].Submits(job.ID)+r.comfy[1].Submits(job.ID) != 1 {
		t.Fatalf("resubmitted: %s %s", job.ID, again.ID)
	}
	found, ok, err := r.p.Find(context.Background(), "gen-once")
	if err != nil || !ok || found.ID != job.ID {
		t.Fatalf("find: %v %v %v", found, ok, err)
	}
	if _, ok, err := r.p.Find(context.Background(), "gen-never"); err != nil || ok {
		t.Fatalf("find of a prompt never queued: %v %v", ok, err)
	}
	holder := r.comfy[0]
	if holder.Submits(job.ID) == 0 {
		holder = r.comfy[1]
	}
	holder.SetDown(true)
	if _, _, err := r.p.Find(context.Background(), "gen-once"); err == nil {
		t.Fatal("find with the holder down answered")
	}
	if _, _, err := r.p.Find(context.Background(), "gen-never"); err == nil {
		t.Fatal("find with a backend down said none")
	}
	// A new prompt goes to the backend that answers.
	other := r.submit("gen-other", "text-to-image", "a ferry", nil)
	if holder.Submits(other.ID) != 0 {
		t.Fatal("a prompt went to the backend that is down")
	}
	holder.SetDown(false)
	holder.Restart() // and lost its queue
	if _, ok, err := r.p.Find(context.Background(), "gen-once"); err != nil || ok {
		t.Fatalf("find after the queue was lost: %v %v", ok, err)
	}
}

// TestComfyMintedPromptID: on a ComfyUI too old to keep darkroom's prompt
// id (before 260a5ca5, 2025-07-14) the job is the backend's own id, and a
// submit whose reply was lost (a crash before the record) is found again
// by its extra_data marker in the queue and in the history: one prompt.
func TestComfyMintedPromptID(t *testing.T) {
	for _, tc := range []struct {
		name string
		// after runs between the lost reply and Find: the prompt pending,
		// running, or done and in the history behind others.
		after func(r *rig)
		state provider.State
	}{
		{"pending", func(r *rig) {}, provider.StateQueued},
		{"running", func(r *rig) { r.advance(3 * time.Second) }, provider.StateRunning},
		{"in the history", func(r *rig) {
			r.advance(5 * time.Second)
			for i := range 3 {
				r.submit(fmt.Sprintf("gen-later-%d", i), "text-to-image", "a ferry", nil)
			}
			r.advance(10 * time.Second)
		}, provider.StateCompleted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 2, emulator.ComfyOptions{MintsPromptID: true}, Config{NoWebsocket: true})
			for i := range 2 { // one running on each backend
				key := fmt.Sprintf("gen-first-%d", i)
				first := r.submit(key, "text-to-image", "a lighthouse", nil)
				if first.ID == PromptID(key) || r.comfy[0].Submits(first.ID)+r.comfy[1].Submits(first.ID) != 1 {
					t.Fatalf("the job %s is not the backend's own id", first.ID)
				}
			}
			// The lost reply: on the first backend (the other one down meanwhile).
			r.comfy[1].SetDown(true)
			r.comfy[0].Inject("POST /prompt", emulator.FaultLoseReply)
			if _, err := r.p.Submit(context.Background(), provider.Request{IdempotencyKey: "gen-lost", Model: r.model("text-to-image"), Prompt: "a harbour"}); err == nil {
				t.Fatal("a lost reply answered")
			}
			r.comfy[1].SetDown(false)
			tc.after(r)
			job, ok, err := r.p.Find(context.Background(), "gen-lost")
			if err != nil || !ok {
				t.Fatalf("find: %v %v", ok, err)
			}
			if q := r.comfy[0].Submits(job.ID) + r.comfy[1].Submits(job.ID); q != 1 {
				t.Fatalf("found %s, queued %d times", job.ID, q)
			}
			if st := r.status(job); st.State != tc.state {
				t.Fatalf("%+v, want %s", st, tc.state)
			}
			// The runner's resubmit after the Find finds it again: no second prompt.
			again := r.submit("gen-lost", "text-to-image", "a harbour", nil)
			if again.ID != job.ID || r.comfy[0].Jobs()+r.comfy[1].Jobs() != 3+strings.Count(tc.name, "history")*3 {
				t.Fatalf("resubmitted: %s, %d prompts", again.ID, r.comfy[0].Jobs()+r.comfy[1].Jobs())
			}
			r.advance(30 * time.Second)
			if st := r.status(job); st.State != provider.StateCompleted || len(st.Outputs) != 1 {
				t.Fatalf("%+v", st)
			}
		})
	}
}

// TestComfyMarkerScanOnlyWhereNeeded: Find scans a backend without the
// jobs API for the marker (its whole history) only until it has seen the
// backend keep darkroom's prompt id.
func TestComfyMarkerScanOnlyWhereNeeded(t *testing.T) {
	r := newRig(t, 1, emulator.ComfyOptions{NoJobsAPI: true}, Config{NoWebsocket: true})
	find := func() int {
		if _, ok, err := r.p.Find(context.Background(), "gen-never"); err != nil || ok {
			t.Fatalf("find: %v %v", ok, err)
		}
		return r.comfy[0].Count("GET /history")
	}
	if n := find(); n != 1 {
		t.Fatalf("a backend not yet seen: %d history scans, want 1", n)
	}
	job := r.submit("gen-kept", "text-to-image", "a lighthouse", nil)
	if job.ID != PromptID("gen-kept") {
		t.Fatalf("job %s", job.ID)
	}
	if n := find(); n != 1 {
		t.Fatalf("a backend seen to keep our ids: %d history scans, want still 1", n)
	}
}

// TestComfyRefusals: a graph ComfyUI refuses is a clear permanent error
// naming the node and input; nothing is queued.
func TestComfyRefusals(t *testing.T) {
	r := newRig(t, 1, emulator.ComfyOptions{}, Config{NoWebsocket: true})
	for _, tc := range []struct {
		name  string
		input map[string]any
		want  string
	}{
		{"value not in list", map[string]any{"3.sampler_name": "nope"}, "node 3 (KSampler) input sampler_name: Value not in list"},
		{"too large", map[string]any{"3.steps": 20000.0}, "node 3 (KSampler) input steps: Value 20000 bigger than max"},
		{"not in the workflow", map[string]any{"3.nope": 1.0}, "has no input nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.p.Submit(context.Background(), provider.Request{IdempotencyKey: "gen-" + tc.name, Model: r.model("text-to-image"), Prompt: "x", Input: tc.input})
			var perm *provider.PermanentError
			if !errors.As(err, &perm) || !strings.Contains(perm.Message, tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	if r.comfy[0].Queued() != 0 {
		t.Fatal("a refused graph was queued")
	}
}

// TestComfyEnds: a run that fails, a backend that restarts (the queue
// lost), one that stops answering past GiveUp, one that comes back in
// time, and cancels through the jobs API and on an older ComfyUI.
func TestComfyEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   emulator.ComfyOptions
		prompt string
		do     func(r *rig, job provider.Job)
		state  provider.State
		want   string
	}{
		{"fails mid-run", emulator.ComfyOptions{}, "a cat [fail]", func(r *rig, _ provider.Job) { r.advance(3 * time.Second) },
			provider.StateFailed, "node 3 (KSampler): failure requested by the [fail] token"},
		{"restart loses it", emulator.ComfyOptions{}, "a cat", func(r *rig, _ provider.Job) { r.comfy[0].Restart() },
			provider.StateFailed, "no longer knows this prompt"},
		{"down past give-up", emulator.ComfyOptions{}, "a cat", func(r *rig, job provider.Job) {
			r.comfy[0].SetDown(true)
			if _, err := r.p.Status(context.Background(), job); err == nil {
				r.t.Fatal("a backend down answered")
			}
			r.advance(2 * time.Minute)
		}, provider.StateFailed, "has not answered for 2m0s"},
		{"back in time", emulator.ComfyOptions{}, "a cat", func(r *rig, job provider.Job) {
			r.comfy[0].SetDown(true)
			if _, err := r.p.Status(context.Background(), job); err == nil {
				r.t.Fatal("a backend down answered")
			}
			r.advance(time.Minute)
			r.comfy[0].SetDown(false)
			r.advance(5 * time.Second)
		}, provider.StateCompleted, ""},
		{"cancel running", emulator.ComfyOptions{}, "a cat [hang]", func(r *rig, job provider.Job) {
			r.advance(time.Second)
			if st, err := r.p.Cancel(context.Background(), job); err != nil || st.State != provider.StateCancelled {
				r.t.Fatalf("cancel: %+v %v", st, err)
			}
		}, provider.StateCancelled, ""},
		{"cancel running, no jobs API", emulator.ComfyOptions{NoJobsAPI: true}, "a cat [hang]", func(r *rig, job provider.Job) {
			r.advance(time.Second)
			if st, err := r.p.Cancel(context.Background(), job); err != nil || st.State != provider.StateCancelled {
				r.t.Fatalf("cancel: %+v %v", st, err)
			}
			if r.comfy[0].Count("POST /interrupt") != 1 {
				r.t.Fatal("not cancelled by /interrupt")
			}
		}, provider.StateCancelled, ""},
		{"cancel pending, interrupt ignores its prompt_id", emulator.ComfyOptions{MintsPromptID: true}, "a cat", func(r *rig, job provider.Job) {
			other := r.submit("gen-other", "text-to-image", "a dog [hang]", nil) // behind the first
			r.advance(time.Second)
			if st, err := r.p.Cancel(context.Background(), other); err != nil || st.State != provider.StateCancelled {
				r.t.Fatalf("cancel: %+v %v", st, err)
			}
			if r.comfy[0].Count("POST /interrupt") != 0 || r.comfy[0].Count("POST /queue") != 1 {
				r.t.Fatal("a pending prompt's cancel sent /interrupt (which stops whatever runs on a ComfyUI before 2025-09-02)")
			}
			r.advance(5 * time.Second)
		}, provider.StateCompleted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1, tc.opts, Config{NoWebsocket: true, GiveUp: 2 * time.Minute})
			job := r.submit("gen-"+tc.name, "text-to-image", tc.prompt, nil)
			tc.do(r, job)
			st := r.status(job)
			if st.State != tc.state || !strings.Contains(st.Error, tc.want) {
				t.Fatalf("%+v, want %s %q", st, tc.state, tc.want)
			}
			if st.State == provider.StateFailed && !st.NotBilled {
				t.Fatal("a failure is billed")
			}
		})
	}
}

// TestComfyInputs: inputs are uploaded under names derived from the
// prompt id and overwritten: a resubmit after the queue was lost adds no
// "name (1).png".
func TestComfyInputs(t *testing.T) {
	r := newRig(t, 1, emulator.ComfyOptions{}, Config{NoWebsocket: true})
	mod := func(q *provider.Request) {
		q.InputImage = pngInput(32, 32, 1)
		mask := pngInput(32, 32, 2)
		mask.Role = provider.RoleMask
		q.Extra = []provider.Input{*mask}
	}
	job := r.submit("gen-edit", "masked-inpainting", "a red door", mod)
	r.comfy[0].Restart()
	if again := r.submit("gen-edit", "masked-inpainting", "a red door", mod); again.ID != job.ID {
		t.Fatal("another prompt id")
	}
	want := []string{"/darkroom-" + job.ID + "-image.png", "/darkroom-" + job.ID + "-mask.png"}
	if got := r.comfy[0].Files("input"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("input files %v, want %v", got, want)
	}
	r.advance(3 * time.Second)
	st := r.status(job)
	if st.State != provider.StateCompleted || len(st.Outputs) != 1 {
		t.Fatalf("%+v", st)
	}
	clip := r.submit("gen-clip", "image-to-video", "a clip", func(q *provider.Request) { q.InputImage = pngInput(64, 36, 3) })
	r.advance(10 * time.Second)
	st = r.status(clip)
	if st.State != provider.StateCompleted || len(st.Outputs) != 1 || st.Outputs[0].MimeType != "video/mp4" {
		t.Fatalf("clip %+v", st)
	}
	rc, err := r.p.OpenOutput(context.Background(), clip, st.Outputs[0])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(b, emulator.MP4()) {
		t.Fatal("not the video")
	}
}

// TestComfyHeader: a ComfyUI behind a proxy gets the header on every call,
// the websocket's included.
func TestComfyHeader(t *testing.T) {
	r := newRig(t, 1, emulator.ComfyOptions{Header: "X-Proxy-Key: k1"}, Config{Header: "X-Proxy-Key: k1"})
	r.connected()
	job := r.submit("gen-h", "text-to-image", "x", nil)
	r.advance(3 * time.Second)
	if st := r.status(job); st.State != provider.StateCompleted {
		t.Fatalf("%+v", st)
	}
	if err := r.p.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{URLs: []string{"http://x"}, Header: "nocolon"}); err == nil {
		t.Fatal("a header without a value")
	}
	if _, err := New(Config{URLs: []string{"http://x/path"}}); err == nil {
		t.Fatal("a URL with a path")
	}
}

func emuImage(w, h int, seed byte) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = seed + byte(i)
	}
	return img
}

// TestComfyWatch: the websocket is a status stream (provider.Watcher):
// progress handed on as it comes, the end read once it is announced, a
// prompt queued by another process seen through the backend's queue
// broadcasts, and a socket that closes ends the watch.
func TestComfyWatch(t *testing.T) {
	type result struct {
		st  provider.Status
		err error
	}
	watch := func(p *Provider, job provider.Job) (<-chan result, chan float64) {
		seen := make(chan float64, 1024)
		ch := make(chan result, 1)
		go func() {
			st, err := p.Watch(context.Background(), job, func(st provider.Status) { seen <- st.Progress })
			ch <- result{st, err}
		}()
		return ch, seen
	}
	for _, tc := range []struct {
		name  string
		other bool // watched by a second adapter (another process)
		down  bool
	}{
		{"own prompt", false, false},
		{"another process's prompt", true, false},
		{"socket closes", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1, emulator.ComfyOptions{Steps: 4, RunTime: 4 * time.Second}, Config{})
			if got := r.p.Signal(r.model("text-to-image"), false); got != provider.SignalStream {
				t.Fatalf("signal %s", got)
			}
			r.connected()
			job := r.submit("gen-watch", "text-to-image", "a lighthouse", nil)
			p := r.p
			if tc.other {
				ws, _ := LoadWorkflows("workflows")
				var err error
				if p, err = New(Config{URLs: []string{r.comfy[0].URL}, Workflows: ws, Now: r.clock.Now}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(p.Close)
				p.onFrame = r.p.onFrame
				p.start()
				r.until("the second adapter's socket", func() bool { return p.Connected() && r.comfy[0].Sockets() == 2 })
			}
			done, seen := watch(p, job)
			if tc.down {
				r.comfy[0].SetDown(true)
				if res := <-done; res.err == nil || res.st.State.Terminal() {
					t.Fatalf("%+v %v", res.st, res.err)
				}
				return
			}
			r.advance(2 * time.Second)
			if !tc.other {
				deadline := time.After(10 * time.Second)
				for got := 0.0; got < 0.25; {
					select {
					case got = <-seen:
					case <-deadline:
						t.Fatal("no progress while it runs")
					}
				}
			}
			r.advance(3 * time.Second)
			res := <-done
			if res.err != nil || res.st.State != provider.StateCompleted || len(res.st.Outputs) != 1 {
				t.Fatalf("%+v %v", res.st, res.err)
			}
			close(seen)
			last := 0.0
			for v := range seen {
				if v < last {
					t.Fatalf("progress went back: %v after %v", v, last)
				}
				last = v
			}
		})
	}
}

// TestComfyAlphaMask: a mask mapped to the input image's own LoadImage
// node goes through /upload/mask as that image's alpha (clear where the
// image changes), and the node loads the combined file.
func TestComfyAlphaMask(t *testing.T) {
	r := newRig(t, 1, emulator.ComfyOptions{}, Config{NoWebsocket: true})
	graph := `{
	  "3": {"class_type": "KSampler", "inputs": {"seed": 0, "steps": 20, "cfg": 7, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
	        "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["12", 0]}},
	  "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "512-inpainting-ema.safetensors"}},
	  "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "x", "clip": ["4", 1]}},
	  "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["4", 1]}},
	  "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
	  "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "alpha", "images": ["8", 0]}},
	  "10": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
	  "12": {"class_type": "VAEEncodeForInpaint", "inputs": {"pixels": ["10", 0], "vae": ["4", 2], "mask": ["10", 1], "grow_mask_by": 6}}
	}`
	w, err := NewWorkflow("alpha-inpainting", []byte(graph), mappingFile{Mapping: Mapping{Mask: "10.image"}})
	if err != nil {
		t.Fatal(err)
	}
	if w.Map.Image != "10.image" || w.Model.Roles["mask"] != 1 {
		t.Fatalf("mapping %+v, roles %v", w.Map, w.Model.Roles)
	}
	r.p.models[w.Model.ID] = w
	// The mask: white (change) in the left half.
	var mb bytes.Buffer
	m := image.NewGray(image.Rect(0, 0, 8, 8))
	for y := range 8 {
		for x := range 4 {
			m.Pix[y*8+x] = 255
		}
	}
	png.Encode(&mb, m)
	mask := provider.Input{Role: provider.RoleMask, MimeType: "image/png", Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(mb.Bytes())), nil
	}}
	job := r.submit("gen-alpha", "alpha-inpainting", "a door", func(q *provider.Request) {
		q.InputImage, q.Extra = pngInput(8, 8, 9), []provider.Input{mask}
	})
	b, ok := r.comfy[0].File("input", "", "darkroom-"+job.ID+"-mask.png")
	if !ok || r.comfy[0].Count("POST /upload/mask") != 1 {
		t.Fatalf("no mask upload: %v", r.comfy[0].Files("input"))
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, left := img.At(1, 1).RGBA()
	rr, _, _, right := img.At(6, 1).RGBA()
	if left != 0 || right != 0xffff || rr == 0 {
		t.Fatalf("alpha left %d right %d (red %d): want clear where the mask is white, the image's pixels kept", left, right, rr)
	}
	r.advance(3 * time.Second)
	if st := r.status(job); st.State != provider.StateCompleted {
		t.Fatalf("%+v", st)
	}
}

// TestComfyVideoCombine: a video from VideoHelperSuite's VHS_VideoCombine
// (its files under "gifs", with a format) is the model's video output,
// saved even where the workflow's node says save_output false (its file
// would be "temp", no result).
func TestComfyVideoCombine(t *testing.T) {
	r := newRig(t, 1, emulator.ComfyOptions{}, Config{NoWebsocket: true})
	graph := `{
	  "3": {"class_type": "KSampler", "inputs": {"seed": 0, "steps": 20, "cfg": 2.5, "sampler_name": "euler", "scheduler": "karras", "denoise": 1,
	        "model": ["15", 0], "positive": ["12", 0], "negative": ["12", 1], "latent_image": ["12", 2]}},
	  "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["15", 2]}},
	  "12": {"class_type": "SVD_img2vid_Conditioning", "inputs": {"clip_vision": ["15", 1], "init_image": ["23", 0], "vae": ["15", 2], "width": 512, "height": 512,
	         "video_frames": 14, "motion_bucket_id": 127, "fps": 6, "augmentation_level": 0}},
	  "15": {"class_type": "ImageOnlyCheckpointLoader", "inputs": {"ckpt_name": "svd_xt.safetensors"}},
	  "23": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
	  "30": {"class_type": "VHS_VideoCombine", "inputs": {"images": ["8", 0], "frame_rate": 8, "loop_count": 0, "filename_prefix": "clips/vhs",
	         "format": "video/h264-mp4", "pingpong": false, "save_output": false}}
	}`
	w, err := NewWorkflow("vhs", []byte(graph), mappingFile{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Model.Kind != provider.KindVideo || strings.Join(w.Map.Outputs, ",") != "30" || w.Map.Image != "23.image" {
		t.Fatalf("model %+v, mapping %+v", w.Model, w.Map)
	}
	r.p.models[w.Model.ID] = w
	job := r.submit("gen-vhs", "vhs", "waves", func(q *provider.Request) { q.InputImage = pngInput(16, 16, 4) })
	r.advance(10 * time.Second)
	st := r.status(job)
	if st.State != provider.StateCompleted || len(st.Outputs) != 1 || st.Outputs[0].MimeType != "video/mp4" || !strings.Contains(st.Outputs[0].URL, "subfolder=clips") {
		t.Fatalf("%+v", st)
	}
}

// TestComfyChooseVRAM: among backends of equal queue length the one with
// the most free VRAM (/system_stats) takes the prompt; a shorter queue
// still wins over more VRAM.
func TestComfyChooseVRAM(t *testing.T) {
	for _, tc := range []struct {
		name string
		free [3]int64 // each backend's free VRAM
		busy int      // the index of a backend given a prompt first (-1 none)
		want int
	}{
		{"the most free", [3]int64{8e9, 22e9, 12e9}, -1, 1},
		{"the most free, listed last", [3]int64{8e9, 12e9, 22e9}, -1, 2},
		{"a shorter queue first", [3]int64{8e9, 22e9, 12e9}, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 3, emulator.ComfyOptions{RunTime: time.Hour}, Config{NoWebsocket: true})
			for i, c := range r.comfy {
				c.SetVRAMFree(tc.free[i])
			}
			if tc.busy >= 0 {
				// The backend that would win by VRAM gets a prompt of
				// another client first.
				for i, c := range r.comfy {
					if i != tc.busy {
						c.SetDown(true)
					}
				}
				r.submit("gen-busy", "text-to-image", "a ferry", nil)
				for _, c := range r.comfy {
					c.SetDown(false)
				}
			}
			job := r.submit("gen-vram", "text-to-image", "a lighthouse", nil)
			for i, c := range r.comfy {
				if got := c.Submits(job.ID) == 1; got != (i == tc.want) {
					t.Fatalf("backend %d queued it: %v, want backend %d", i, got, tc.want)
				}
			}
		})
	}
}

// TestComfyMintedPreview: on a ComfyUI too old to keep darkroom's prompt
// id, the live preview is still asked for by the generation (the runner
// knows no other id), from the submit on and, after the process forgot
// the prompt, again from the job's own record.
func TestComfyMintedPreview(t *testing.T) {
	r := newRig(t, 1, emulator.ComfyOptions{Steps: 4, RunTime: 4 * time.Second, MintsPromptID: true}, Config{})
	r.connected()
	job := r.submit("gen-1", "text-to-image", "a lighthouse", nil)
	if job.ID == PromptID("gen-1") {
		t.Fatal("the emulator kept darkroom's prompt id")
	}
	r.advance(2 * time.Second)
	r.until("preview frames", func() bool {
		_, frames, ok := r.p.LivePreview("gen-1")
		return ok && frames >= 1
	})
	r.p.live.forget(job.ID)
	if _, _, ok := r.p.LivePreview("gen-1"); ok {
		t.Fatal("a forgotten prompt's preview is still found")
	}
	r.status(job) // follows the prompt again, as after a restart
	r.advance(time.Second)
	r.until("preview frames after the job's record", func() bool {
		_, frames, ok := r.p.LivePreview("gen-1")
		return ok && frames >= 1
	})
	r.advance(4 * time.Second)
	if st := r.status(job); st.State != provider.StateCompleted {
		t.Fatalf("completed: %+v", st)
	}
	r.p.live.mu.Lock()
	left := len(r.p.live.ours)
	r.p.live.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d aliases outlive their prompts", left)
	}
}
