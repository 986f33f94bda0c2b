package main

// End-to-end tests of the ComfyUI provider: darkroom (in-process, or a
// process killed with SIGKILL) over two emulated ComfyUI backends whose
// clock follows the wall clock, with the shipped workflows.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/provider/comfyui"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// comfyWorkflows is a folder of the shipped workflows whose mappings
// expect a run of a few seconds (so the runner looks often).
func comfyWorkflows(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "provider", "comfyui", "workflows")
	for _, name := range []string{"text-to-image", "masked-inpainting", "image-to-video"} {
		b, err := os.ReadFile(filepath.Join(src, name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := os.ReadFile(filepath.Join(src, name+".mapping.json"))
		if err != nil {
			t.Fatal(err)
		}
		var mapping map[string]any
		if err := json.Unmarshal(m, &mapping); err != nil {
			t.Fatal(err)
		}
		mapping["expectedSeconds"] = 2
		m, _ = json.Marshal(mapping)
		if err := os.WriteFile(filepath.Join(dir, name+".mapping.json"), m, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// comfyRig is the emulator with two ComfyUI backends.
func comfyRig(t *testing.T, o emulator.ComfyOptions) (*emuRig, []*emulator.ComfyUI) {
	rig := startEmulator(t, defaultTiming)
	return rig, []*emulator.ComfyUI{rig.ComfyUI(o), rig.ComfyUI(o)}
}

func comfyServer(t *testing.T, backends []*emulator.ComfyUI, dir string, opts ...func(*config)) *testServer {
	base := func(c *config) {
		for _, b := range backends {
			c.ComfyURLs = append(c.ComfyURLs, b.URL)
		}
		c.ComfyWorkflows = dir
		c.PollRate, c.PollBurst = 1000, 1000
		c.CreateRate, c.CreateBurst = 1000, 1000
		c.MaxInFlight = 0
	}
	return startServer(t, 0, append([]func(*config){base}, opts...)...)
}

// submitsOf is how many times prompt id was queued on any backend, and
// how many POST /prompt the backends saw in all.
func submitsOf(backends []*emulator.ComfyUI, id string) (queued, posts int) {
	for _, b := range backends {
		queued += b.Submits(id)
		posts += b.Count("POST /prompt")
	}
	return queued, posts
}

// queuedInput is a node input of the graph prompt id was queued with, on
// whichever backend holds it.
func queuedInput(t *testing.T, backends []*emulator.ComfyUI, id, node, input string) any {
	t.Helper()
	for _, b := range backends {
		if v, ok := b.Input(id, node, input); ok {
			return v
		}
	}
	t.Fatalf("prompt %s was never queued with %s.%s", id, node, input)
	return nil
}

// TestComfyJourney: an assistant on the legacy tools and a Tasks client
// each make three variations, a masked edit of one and a clip from it, on
// two backends, both seeing percent progress and preview frames.
func TestComfyJourney(t *testing.T) {
	_, backends := comfyRig(t, emulator.ComfyOptions{Steps: 6, RunTime: 3 * time.Second})
	s := comfyServer(t, backends, comfyWorkflows(t))
	cs := connect(t, s.url, "2025-06-18")

	var d struct {
		ModelID string `json:"modelId"`
		Mapping struct {
			Prompt string `json:"prompt"`
			Count  string `json:"count"`
		} `json:"mapping"`
		Input []struct {
			Name string `json:"name"`
		} `json:"input"`
	}
	if res := call(t, cs, "describe_model", map[string]any{"modelId": "comfyui:text-to-image"}, &d); res.IsError || d.Mapping.Prompt != "6.text" || d.Mapping.Count != "5.batch_size" || len(d.Input) == 0 {
		t.Fatalf("describe_model: %s", text(res))
	}
	if res := call(t, cs, "generate", map[string]any{"modelId": "comfyui:text-to-image", "prompt": "x", "input": map[string]any{"3.seed": 1}}, nil); !res.IsError || !strings.Contains(text(res), "set by generate's seed") {
		t.Fatalf("an owned node input: %s", text(res))
	}

	// Legacy: three variations, watched while they run.
	var three genView
	if res := call(t, cs, "generate", map[string]any{"modelId": "comfyui:text-to-image", "prompt": "dunes at dawn", "count": 3, "aspectRatio": "16:9",
		"input": map[string]any{"3.steps": 30}}, &three); res.IsError {
		t.Fatalf("generate: %s", text(res))
	}
	var seen genView
	var frame []byte // the running generation's preview, an image block of get_generation
	eventually(t, 20*time.Second, func() bool {
		res := call(t, cs, "get_generation", map[string]any{"generationId": three.GenerationID}, &seen)
		frame = nil
		for _, c := range res.Content {
			if img, ok := c.(*mcp.ImageContent); ok {
				frame = img.Data
			}
		}
		return seen.Status == "running" && strings.Contains(seen.StatusMessage, "%") && strings.Contains(seen.StatusMessage, "preview frames") && frame != nil ||
			seen.Status == "completed"
	}, "percent progress and a preview frame")
	if seen.Status != "running" {
		t.Fatalf("never seen running with progress and a preview: %+v", seen)
	}
	if _, err := jpeg.Decode(bytes.NewReader(frame)); err != nil {
		t.Fatalf("the preview frame: %v", err)
	}
	t.Logf("seen running: %s", seen.StatusMessage)
	var w genView
	call(t, cs, "wait_generation", map[string]any{"generationId": three.GenerationID, "timeoutSeconds": 30}, &w)
	if w.Status != "completed" || len(w.Outputs) != 3 || w.Outputs[0].MimeType != "image/png" || w.Outputs[0].Width <= w.Outputs[0].Height {
		t.Fatalf("three variations: %+v", w)
	}
	var edit genView
	res := call(t, cs, "generate", map[string]any{"modelId": "comfyui:masked-inpainting", "prompt": "a lake", "wait": true, "waitSeconds": 30, "inputs": []any{
		map[string]any{"role": "image", "uri": gentools.OutputURI(three.GenerationID, 1)},
		map[string]any{"role": "mask", "image": map[string]any{"data": journeyMask(t, w.Outputs[1].Width, w.Outputs[1].Height), "mimeType": "image/png"}},
	}}, &edit)
	if edit.Status != "completed" || len(edit.Outputs) != 1 {
		t.Fatalf("masked edit: %s", text(res))
	}
	var clip genView
	clipArgs := map[string]any{"modelId": "comfyui:image-to-video", "prompt": "the tide comes in", "wait": true, "waitSeconds": 30, "durationSeconds": 5, "inputs": []any{
		map[string]any{"role": "first_frame", "uri": gentools.OutputURI(edit.GenerationID, 0)},
	}}
	if res := call(t, cs, "generate", clipArgs, nil); !res.IsError || !strings.Contains(text(res), "choose 2, 1 or 3") {
		t.Fatalf("a clip longer than the workflow's 25 frames: %s", text(res))
	}
	clipArgs["durationSeconds"] = 3
	res = call(t, cs, "generate", clipArgs, &clip)
	if clip.Status != "completed" || len(clip.Outputs) != 1 || clip.Outputs[0].MimeType != "video/mp4" {
		t.Fatalf("clip: %s", text(res))
	}
	checkFile(t, clip.Outputs[0].URL, emulator.MP4())
	if frames := queuedInput(t, backends, comfyui.PromptID(clip.GenerationID), "12", "video_frames"); frames != 21.0 {
		t.Fatalf("3 s at 7 fps queued %v frames, want 21", frames)
	}

	// A Tasks client: the same three steps.
	tc := &rpcClient{t: t, url: s.url, caps: withTasks()}
	taskOf := func(args map[string]any) map[string]any {
		t.Helper()
		r := tc.tool("generate", args)
		if r.Error != nil || r.Result["resultType"] != "task" {
			t.Fatalf("generate (tasks): %+v %v", r.Error, r.Result)
		}
		done := tc.waitTask(r.Result["taskId"].(string))
		_, sc := structuredOf(t, done)
		if sc["status"] != "completed" {
			t.Fatalf("task: %v", done)
		}
		return sc
	}
	// The Tasks client watches its three variations' percent in the task's
	// status message, which names the preview frame it reads.
	r := tc.tool("generate", map[string]any{"modelId": "comfyui:text-to-image", "prompt": "a harbour", "count": 3})
	if r.Error != nil || r.Result["resultType"] != "task" {
		t.Fatalf("generate (tasks): %+v %v", r.Error, r.Result)
	}
	taskID := r.Result["taskId"].(string)
	var msg string
	eventually(t, 20*time.Second, func() bool {
		g := tc.call("tasks/get", map[string]any{"taskId": taskID})
		msg, _ = g.Result["statusMessage"].(string)
		return strings.Contains(msg, "%") && previewURIRe.MatchString(msg) || g.Result["status"] != "working"
	}, "the task's percent and preview")
	if !strings.Contains(msg, "step") || !previewURIRe.MatchString(msg) {
		t.Fatalf("the task's status message: %q", msg)
	}
	uri := previewURIRe.FindString(msg)
	read := tc.call("resources/read", map[string]any{"uri": uri}, "Mcp-Name", uri)
	if read.Error != nil {
		t.Fatalf("resources/read %s: %+v", uri, read.Error)
	}
	blob, _ := base64.StdEncoding.DecodeString(read.Result["contents"].([]any)[0].(map[string]any)["blob"].(string))
	if _, err := jpeg.Decode(bytes.NewReader(blob)); err != nil {
		t.Fatalf("the task's preview frame: %v", err)
	}
	_, sc := structuredOf(t, tc.waitTask(taskID))
	if sc["status"] != "completed" || len(asList(sc["outputs"])) != 3 {
		t.Fatalf("three variations (tasks): %v", sc)
	}
	id := sc["generationId"].(string)
	first := asList(sc["outputs"])[0].(map[string]any)
	fw, _ := first["width"].(float64)
	fh, _ := first["height"].(float64)
	sc = taskOf(map[string]any{"modelId": "comfyui:masked-inpainting", "prompt": "a boat", "inputs": []any{
		map[string]any{"role": "image", "uri": gentools.OutputURI(id, 0)},
		map[string]any{"role": "mask", "image": map[string]any{"data": journeyMask(t, int(fw), int(fh)), "mimeType": "image/png"}},
	}})
	sc = taskOf(map[string]any{"modelId": "comfyui:image-to-video", "prompt": "sails", "inputs": []any{
		map[string]any{"role": "first_frame", "uri": gentools.OutputURI(sc["generationId"].(string), 0)},
	}})
	if outs := asList(sc["outputs"]); len(outs) != 1 || outs[0].(map[string]any)["mimeType"] != "video/mp4" {
		t.Fatalf("clip (tasks): %v", sc)
	}
	a, b := backends[0].Count("POST /prompt"), backends[1].Count("POST /prompt")
	if a == 0 || b == 0 || a+b != 6 {
		t.Fatalf("prompts %d and %d: want 6 shared by the two backends", a, b)
	}
	t.Logf("prompts per backend: %d, %d", a, b)
}

// TestComfyCancelMidRun: a cancel while the prompt runs (cancel_generation
// of a legacy client, tasks/cancel of a Tasks client) stops it at the
// backend, and the generation ends cancelled, refunded.
func TestComfyCancelMidRun(t *testing.T) {
	_, backends := comfyRig(t, emulator.ComfyOptions{RunTime: 3 * time.Second})
	s := comfyServer(t, backends, comfyWorkflows(t))
	cs := connect(t, s.url, "2025-06-18")

	tc := &rpcClient{t: t, url: s.url, caps: withTasks()}
	r := tc.tool("generate", map[string]any{"modelId": "comfyui:text-to-image", "prompt": "a dog [hang]"})
	if r.Error != nil || r.Result["resultType"] != "task" {
		t.Fatalf("generate (tasks): %+v %v", r.Error, r.Result)
	}
	taskID := r.Result["taskId"].(string)
	var taskGen string
	eventually(t, 20*time.Second, func() bool {
		var l struct {
			Generations []genView `json:"generations"`
		}
		call(t, cs, "list_generations", map[string]any{}, &l)
		for _, g := range l.Generations {
			if g.Status == "running" {
				taskGen = g.GenerationID
			}
		}
		return taskGen != ""
	}, "the task's prompt running")
	if ack := tc.call("tasks/cancel", map[string]any{"taskId": taskID}); ack.Error != nil {
		t.Fatalf("tasks/cancel: %+v", ack.Error)
	}
	if done := tc.waitTask(taskID); done["status"] != "cancelled" {
		t.Fatalf("the task after tasks/cancel: %v", done)
	}
	for _, b := range backends {
		if b.Running() == comfyui.PromptID(taskGen) {
			t.Fatal("the backend still runs the task's prompt")
		}
	}

	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "comfyui:text-to-image", "prompt": "a cat [hang]"}, &g)
	id := comfyui.PromptID(g.GenerationID)
	eventually(t, 20*time.Second, func() bool {
		var v genView
		call(t, cs, "get_generation", map[string]any{"generationId": g.GenerationID}, &v)
		return v.Status == "running" && (backends[0].Running() == id || backends[1].Running() == id)
	}, "the prompt running")
	var c genView
	call(t, cs, "cancel_generation", map[string]any{"generationId": g.GenerationID}, &c)
	var w genView
	call(t, cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 30}, &w)
	if w.Status != "cancelled" {
		t.Fatalf("after cancel: %+v", w)
	}
	if backends[0].Running() == id || backends[1].Running() == id {
		t.Fatal("the backend still runs the prompt")
	}
	if n := backends[0].Count("POST /api/jobs/{id}/cancel") + backends[1].Count("POST /api/jobs/{id}/cancel"); n < 2 {
		t.Fatal("not cancelled through the jobs API")
	}
}

// TestComfyBackendDies: a backend that stops answering past the give-up
// ends its generation failed with the reason and a refund; one that comes
// back in time completes it.
func TestComfyBackendDies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		back     bool
		status   string
		contains string
	}{
		{"gone", false, "failed", "has not answered"},
		{"back in time", true, "completed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, backends := comfyRig(t, emulator.ComfyOptions{RunTime: 3 * time.Second})
			s := comfyServer(t, backends, comfyWorkflows(t), func(c *config) { c.ComfyGiveUp = 4 * time.Second })
			cs := connect(t, s.url, "2025-06-18")
			var g genView
			call(t, cs, "generate", map[string]any{"modelId": "comfyui:text-to-image", "prompt": "a ferry"}, &g)
			id := comfyui.PromptID(g.GenerationID)
			var holder *emulator.ComfyUI
			eventually(t, 20*time.Second, func() bool {
				for _, b := range backends {
					if b.Running() == id {
						holder = b
					}
				}
				return holder != nil
			}, "the prompt running")
			holder.SetDown(true)
			if tc.back {
				eventually(t, 20*time.Second, func() bool { return holder.Count("dropped") > 0 }, "darkroom asking the backend that is down")
				holder.SetDown(false)
			}
			var w genView
			call(t, cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 30}, &w)
			if w.Status != tc.status || (tc.contains != "" && (w.Error == nil || !strings.Contains(w.Error.Message, tc.contains) || !strings.Contains(w.StatusMessage, "refunded"))) {
				t.Fatalf("%+v %+v", w, w.Error)
			}
			if q, _ := submitsOf(backends, id); q != 1 {
				t.Fatalf("queued %d times", q)
			}
		})
	}
}

// TestComfyKillNine kills darkroom with SIGKILL mid-job, once with the
// prompt queued and recorded and once with ComfyUI's reply to the submit
// never read, for a legacy assistant and for a Tasks client (which polls
// tasks/get across the restart), and on ComfyUIs too old to keep
// darkroom's prompt id (before 260a5ca5, 2025-07-14: the prompt is found
// by its extra_data marker), and restarts it on the same data: the
// generation completes and exactly one prompt was ever queued.
func TestComfyKillNine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replyCut bool
		tasks    bool
		old      bool
	}{
		{"legacy recorded", false, false, false},
		{"legacy reply never read", true, false, false},
		{"tasks recorded", false, true, false},
		{"tasks reply never read", true, true, false},
		{"old ComfyUI, legacy reply never read", true, false, true},
		{"old ComfyUI, tasks reply never read", true, true, true},
		{"old ComfyUI, tasks recorded", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, backends := comfyRig(t, emulator.ComfyOptions{RunTime: 4 * time.Second, MintsPromptID: tc.old})
			comfyKillNine(t, backends, tc.replyCut, tc.tasks)
		})
	}
}

// comfyKillNine is one TestComfyKillNine case on backends: a generation
// started by a legacy client (or a Tasks client), darkroom killed with
// the prompt recorded (or with the submit's reply held), restarted; the
// generation completes with one PNG and the backends saw one prompt.
func comfyKillNine(t *testing.T, backends []*emulator.ComfyUI, replyCut, tasks bool) {
	t.Helper()
	if replyCut {
		for _, b := range backends {
			b.HoldPrompts(1)
		}
	}
	dir := comfyWorkflows(t)
	env := []string{"DARKROOM_COMFYUI_URL=" + backends[0].URL + "," + backends[1].URL, "DARKROOM_COMFYUI_WORKFLOWS=" + dir,
		"DARKROOM_POLL_RATE=1000", "DARKROOM_POLL_BURST=1000", // a Tasks client polls through a lease takeover
		"DARKROOM_REPLICATE_API_TOKEN=", "REPLICATE_API_TOKEN=", "DARKROOM_FAL_KEY=", "FAL_KEY=",
		"DARKROOM_GEMINI_API_KEY=", "GEMINI_API_KEY=", "DARKROOM_OPENAI_API_KEY=", "OPENAI_API_KEY="}
	data := t.TempDir()
	p := startProcess(t, data, env...)
	cs := connect(t, p.url, "2026-07-28")
	args := map[string]any{"modelId": "comfyui:text-to-image", "prompt": "a train crossing a bridge"}
	var genID, taskID string
	if tasks {
		r := (&rpcClient{t: t, url: p.url, caps: withTasks()}).tool("generate", args)
		if r.Error != nil || r.Result["resultType"] != "task" {
			t.Fatalf("generate (tasks): %+v %v", r.Error, r.Result)
		}
		taskID = r.Result["taskId"].(string)
	} else {
		var g genView
		if res := call(t, cs, "generate", args, &g); res.IsError {
			t.Fatalf("generate: %s", text(res))
		}
		genID = g.GenerationID
	}
	// The prompt queued: its reply held, or the generation recorded running
	// (the Tasks client's is found in list_generations).
	if replyCut {
		select {
		case <-backends[0].Held():
		case <-backends[1].Held():
		case <-time.After(20 * time.Second):
			t.Fatal("the prompt never reached ComfyUI")
		}
	} else {
		eventually(t, 20*time.Second, func() bool {
			var l struct {
				Generations []genView `json:"generations"`
			}
			call(t, cs, "list_generations", map[string]any{}, &l)
			for _, g := range l.Generations {
				if g.Status == "running" && (genID == "" || g.GenerationID == genID) {
					genID = g.GenerationID
					return true
				}
			}
			return false
		}, "the prompt recorded and running")
	}
	if jobs := backends[0].Jobs() + backends[1].Jobs(); jobs != 1 || backends[0].Queued()+backends[1].Queued() != 1 {
		t.Fatalf("before the kill: %d prompts queued, %d in the queues", jobs, backends[0].Queued()+backends[1].Queued())
	}
	kill9(t, p)

	p2 := startProcess(t, data, env...)
	var outs []any
	if tasks {
		done := (&rpcClient{t: t, url: p2.url, caps: withTasks()}).waitTask(taskID)
		_, sc := structuredOf(t, done)
		if sc["status"] != "completed" {
			t.Fatalf("the task after restart: %v", done)
		}
		outs = asList(sc["outputs"])
	} else {
		var w genView
		call(t, connect(t, p2.url, "2026-07-28"), "wait_generation", map[string]any{"generationId": genID, "timeoutSeconds": 60}, &w)
		if w.Status != "completed" {
			t.Fatalf("after restart: %+v", w)
		}
		for _, o := range w.Outputs {
			outs = append(outs, map[string]any{"mimeType": o.MimeType})
		}
	}
	if len(outs) != 1 || outs[0].(map[string]any)["mimeType"] != "image/png" {
		t.Fatalf("outputs after restart: %v", outs)
	}
	jobs, posts := 0, 0
	for _, b := range backends {
		jobs += b.Jobs()
		posts += b.Count("POST /prompt")
	}
	if jobs != 1 || posts != 1 {
		t.Fatalf("%d prompts queued from %d POST /prompt, want exactly one", jobs, posts)
	}
}

// TestComfyModelsListed: `darkroom models check` and the models watch
// cover the workflows: one whose node no backend has is "not listed"
// with the node named (exit 1), withdrawn from generate and list_models
// with that reason, and offered again once a backend has it.
func TestComfyModelsListed(t *testing.T) {
	_, backends := comfyRig(t, emulator.ComfyOptions{})
	dir := comfyWorkflows(t)
	check := func() (int, map[string]modelCheck) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"models", "check", "--json", "--comfyui-url", backends[0].URL + "," + backends[1].URL, "--comfyui-workflows", dir,
			"--replicate-api-token", "", "--fal-key", "", "--gemini-api-key", "", "--openai-api-key", "", "--google-project", ""}, &out, &errOut)
		var r checkReport
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("exit %d, not a report: %v\n%s\n%s", code, err, out.String(), errOut.String())
		}
		ms := map[string]modelCheck{}
		for _, p := range r.Providers {
			if p.Name == "comfyui" && p.State != "ok" {
				t.Fatalf("comfyui: %s %s", p.State, p.Error)
			}
			for _, m := range p.Models {
				ms[m.ID] = m
			}
		}
		return code, ms
	}
	code, ms := check()
	for _, id := range []string{"comfyui:text-to-image", "comfyui:masked-inpainting", "comfyui:image-to-video"} {
		if ms[id].State != "listed" {
			t.Errorf("%s: %+v", id, ms[id])
		}
	}
	if code != 0 {
		t.Fatalf("all listed: exit %d", code)
	}
	backends[0].Uninstall("SaveVideo")
	if code, ms = check(); code != 0 || ms["comfyui:image-to-video"].State != "listed" {
		t.Fatalf("on one backend: exit %d, %+v", code, ms["comfyui:image-to-video"])
	}
	backends[1].Uninstall("SaveVideo")
	code, ms = check()
	if m := ms["comfyui:image-to-video"]; code != 1 || m.State != "not listed" || m.Reason != "SaveVideo is not installed on any backend" || ms["comfyui:text-to-image"].State != "listed" {
		t.Fatalf("on none: exit %d, %+v", code, ms)
	}

	s := comfyServer(t, backends, dir)
	cs := connect(t, s.url, "2026-07-28")
	s.app.refreshModels(context.Background())
	res := call(t, cs, "generate", map[string]any{"modelId": "comfyui:image-to-video", "prompt": "x"}, nil)
	if !res.IsError || !strings.Contains(text(res), "ComfyUI cannot run comfyui:image-to-video: SaveVideo is not installed on any backend") {
		t.Fatalf("generate of a workflow no backend can run: %s", text(res))
	}
	offered := func() map[string]bool { return offeredModels(t, cs) }
	if l := offered(); l["comfyui:image-to-video"] || !l["comfyui:text-to-image"] {
		t.Fatalf("list_models: %v", l)
	}
	if n := backends[0].Count("POST /prompt") + backends[1].Count("POST /prompt"); n != 0 {
		t.Fatalf("%d prompts queued for a withdrawn workflow", n)
	}
	backends[1].Install("SaveVideo")
	s.app.refreshModels(context.Background())
	if l := offered(); !l["comfyui:image-to-video"] {
		t.Fatalf("list_models once a backend has the node again: %v", l)
	}
}
