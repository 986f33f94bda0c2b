package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// vendorEnv is a darkroom process's environment with only vendor's key,
// pointed at rig.
func vendorEnv(t *testing.T, rig *emuRig, vendor string) []string {
	env := []string{"DARKROOM_UNSAFE_OUTPUT_FETCH=true", "DARKROOM_OUTPUT_HOSTS=" + rig.filesHost(), "DARKROOM_MODELS_FILE=" + vendorCatalog(t),
		"DARKROOM_REPLICATE_API_TOKEN=", "REPLICATE_API_TOKEN=", "DARKROOM_FAL_KEY=", "FAL_KEY=",
		"DARKROOM_GEMINI_API_KEY=", "GEMINI_API_KEY=", "DARKROOM_OPENAI_API_KEY=", "OPENAI_API_KEY="}
	if vendor == "google" {
		return append(env, "DARKROOM_GEMINI_API_KEY=gemini_test", "DARKROOM_GEMINI_BASE_URL="+rig.Google.URL)
	}
	return append(env, "DARKROOM_OPENAI_API_KEY=sk-test", "DARKROOM_OPENAI_BASE_URL="+rig.OpenAI.URL)
}

func kill9(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// TestVendorKillNineVideo kills darkroom while two Gemini Omni
// interactions run, one started by a legacy client and one by a Tasks
// client, and restarts it on the same data: both end with the video in
// darkroom's store, and Google saw exactly one interaction each.
func TestVendorKillNineVideo(t *testing.T) {
	tm := defaultTiming
	tm.slowRun = [2]time.Duration{0, 4 * time.Second} // Omni 1.2 runs past the kill
	rig := startEmulator(t, tm)
	data := t.TempDir()
	env := vendorEnv(t, rig, "google")
	p := startProcess(t, data, env...)
	cs := connect(t, p.url, "2026-07-28")
	var g genView
	if res := call(t, cs, "generate", map[string]any{"modelId": "google-omni-1.2-flash", "prompt": "a train crossing a bridge"}, &g); res.IsError {
		t.Fatalf("generate: %s", text(res))
	}
	tc := &rpcClient{t: t, url: p.url, caps: withTasks()}
	r := tc.tool("generate", map[string]any{"modelId": "google-omni-1.2-flash", "prompt": "a ferry leaving port"})
	if r.Error != nil || r.Result["resultType"] != "task" {
		t.Fatalf("generate (tasks): %+v %v", r.Error, r.Result)
	}
	taskID := r.Result["taskId"].(string)
	// Mid-interaction: both interactions made and recorded (a kill between
	// Google's reply and darkroom's record is the announced resubmit's
	// case, TestVendorKillNineMidCall's).
	eventually(t, 20*time.Second, func() bool {
		var l struct {
			Generations []genView `json:"generations"`
		}
		call(t, cs, "list_generations", map[string]any{}, &l)
		running := 0
		for _, g := range l.Generations {
			if g.Status == "running" {
				running++
			}
		}
		return running == 2
	}, "two interactions running")
	kill9(t, p)

	p2 := startProcess(t, data, env...)
	cs2 := connect(t, p2.url, "2026-07-28")
	var w genView
	call(t, cs2, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 60}, &w)
	if w.Status != "completed" || len(w.Outputs) != 1 || w.Outputs[0].MimeType != "video/mp4" {
		t.Fatalf("legacy client after restart: %+v", w)
	}
	checkFile(t, w.Outputs[0].URL, emulator.MP4())
	done := (&rpcClient{t: t, url: p2.url, caps: withTasks()}).waitTask(taskID)
	_, sc := structuredOf(t, done)
	outs := asList(sc["outputs"])
	if sc["status"] != "completed" || len(outs) != 1 {
		t.Fatalf("Tasks client after restart: %v", done)
	}
	checkFile(t, outs[0].(map[string]any)["url"].(string), emulator.MP4())
	if n, c := rig.Jobs("google"), rig.Count("google", emulator.OpCreate); n != 2 || c != 2 {
		t.Fatalf("%d interactions from %d creates, want exactly one each", n, c)
	}
}

// TestVendorKillNineMidCall kills darkroom while a synchronous OpenAI
// call is held open: after the restart darkroom calls once more, says so,
// and the image completes.
func TestVendorKillNineMidCall(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	rig.Inject(emulator.Rule{Provider: "openai", Op: emulator.OpCreate, Fault: emulator.FaultSlow, Times: 1})
	data := t.TempDir()
	env := vendorEnv(t, rig, "openai")
	p := startProcess(t, data, env...)
	cs := connect(t, p.url, "2026-07-28")
	var g genView
	if res := call(t, cs, "generate", map[string]any{"modelId": "openai-gpt-image-1", "prompt": "a lighthouse"}, &g); res.IsError {
		t.Fatalf("generate: %s", text(res))
	}
	select {
	case <-rig.SlowHits():
	case <-time.After(20 * time.Second):
		t.Fatal("the call never reached OpenAI")
	}
	kill9(t, p)

	p2 := startProcess(t, data, env...)
	cs2 := connect(t, p2.url, "2026-07-28")
	var w genView
	call(t, cs2, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 60}, &w)
	if w.Status != "completed" || len(w.Outputs) != 1 || !strings.Contains(w.StatusMessage, "resubmitted once") {
		t.Fatalf("after restart: %+v", w)
	}
	checkFile(t, w.Outputs[0].URL, emulator.PNG())
	if c := rig.Count("openai", emulator.OpCreate); c != 2 {
		t.Fatalf("%d calls, want the cut-off one and one resubmit", c)
	}
}
