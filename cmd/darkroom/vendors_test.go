package main

// End-to-end tests of the google (Gemini API) and openai (image API)
// providers: darkroom in-process, or as a process killed with SIGKILL,
// against the emulator's Gemini and OpenAI servers, each with only its
// own key set.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// vendorCatalog writes the google and openai entries with short expected
// durations, so the runner's first look comes within the emulator's run
// times (the embedded ones expect real Gemini and OpenAI latencies).
func vendorCatalog(t *testing.T) string {
	t.Helper()
	return writeCatalog(t, func(e *catalog.Entry) bool {
		e.ExpectedSeconds = 0.5
		return e.Provider == "google" || e.Provider == "openai"
	})
}

// writeCatalog writes a models file of the embedded catalog's entries
// keep keeps, as keep edited them, in the catalog's order.
func writeCatalog(t testing.TB, keep func(e *catalog.Entry) bool) string {
	t.Helper()
	var es []catalog.Entry
	for _, e := range catalog.Default() {
		if keep(&e) {
			es = append(es, e)
		}
	}
	b, _ := json.Marshal(map[string]any{"models": es})
	p := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// vendorServer starts darkroom with only vendor's key ("google",
// "vertex": a Google Cloud project and its service account key file, or
// "openai"), pointed at rig.
func vendorServer(t *testing.T, rig *emuRig, vendor string, opts ...func(*config)) *testServer {
	t.Helper()
	models := vendorCatalog(t)
	base := func(c *config) {
		c.ReplicateToken, c.FalKey, c.GeminiKey, c.OpenAIKey = "", "", "", ""
		switch vendor {
		case "google":
			c.GeminiKey, c.GeminiBaseURL = "gemini_test", rig.Google.URL
		case "vertex":
			c.GoogleProject, c.GoogleLocation, c.VertexBaseURL = emulator.DefaultVertexProject, emulator.DefaultVertexLocation, rig.Vertex.URL
			c.GoogleCreds = filepath.Join(t.TempDir(), "service-account.json")
			if err := os.WriteFile(c.GoogleCreds, rig.ServiceAccountJSON(), 0o600); err != nil {
				t.Fatal(err)
			}
		case "openai":
			c.OpenAIKey, c.OpenAIBaseURL = "sk-test", rig.OpenAI.URL
		}
		c.UnsafeOutputFetch = true
		c.OutputHosts = []string{rig.filesHost()}
		c.ModelsFile = models
		c.PollRate, c.PollBurst = 1000, 1000
		c.CreateRate, c.CreateBurst = 1000, 1000
		c.MaxInFlight = 0
		c.Webhooks = false
	}
	return startServer(t, 0, append([]func(*config){base}, opts...)...)
}

// checkFile fetches an output link and compares it with the emulator's
// bytes.
func checkFile(t *testing.T, link string, want []byte) {
	t.Helper()
	code, body := httpGet(t, link)
	if code != 200 || !bytes.Equal(body, want) {
		t.Fatalf("output link %s: %d, %d bytes (want %d)", link, code, len(body), len(want))
	}
}

func TestVendorListModels(t *testing.T) {
	cases := []struct {
		vendor string
		want   []string
	}{
		{"google", []string{"google-omni-1.2-flash", "google-omni-1.1-flash", "google-veo-3", "google-veo-3-fast", "google-gemini-3.1-flash-image",
			"google-gemini-3-pro-image", "google-gemini-3.1-flash-lite-image", "google-gemini-2.5-flash-image", "google-imagen-4", "google-imagen-4-fast"}},
		{"openai", []string{"openai-gpt-image-2", "openai-gpt-image-2-2k", "openai-gpt-image-2-4k", "openai-gpt-image-1", "openai-gpt-image-1-mini"}},
		{"none", nil},
	}
	rig := startEmulator(t, defaultTiming)
	for _, c := range cases {
		t.Run(c.vendor, func(t *testing.T) {
			s := vendorServer(t, rig, c.vendor, func(cfg *config) { cfg.ModelsFile = "" })
			cs := connect(t, s.url, "2026-07-28")
			var l struct {
				Models []struct {
					ID       string `json:"modelId"`
					Provider string `json:"provider"`
					Credits  int64  `json:"credits"`
				} `json:"models"`
			}
			call(t, cs, "list_models", map[string]any{}, &l)
			var got []string
			for _, m := range l.Models {
				if m.Provider == "google" || m.Provider == "openai" {
					got = append(got, m.ID)
					if m.Credits <= 0 {
						t.Errorf("%s costs %d credits", m.ID, m.Credits)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("listed %v, want %v", got, c.want)
			}
		})
	}
}

// vendorCase is one generation through a vendor, start to end.
type vendorCase struct {
	name, vendor, model, prompt string
	tasks                       bool // the Tasks flow, else the generationId tools
	image                       bool // with an input image (an edit, a first frame)
	mask                        bool // an edit with a mask, both given as inputs
	refs                        int  // reference images given
	count                       int  // outputs asked for (0: one)
	cancel                      bool // cancel once it runs at the vendor
	want                        string
	wantMsg                     string // in the failure's message
}

var vendorCases = []vendorCase{
	{name: "omni/tools", vendor: "google", model: "google-omni-1.1-flash", prompt: "a lighthouse at dusk", want: "completed"},
	{name: "omni/tasks", vendor: "google", model: "google-omni-1.1-flash", prompt: "a heron in fog", tasks: true, want: "completed"},
	{name: "omni first frame", vendor: "google", model: "google-omni-1.1-flash", prompt: "the photo comes alive", image: true, want: "completed"},
	{name: "omni references", vendor: "google", model: "google-omni-1.1-flash", prompt: "this cat, running", refs: 2, tasks: true, want: "completed"},
	{name: "omni former veo id", vendor: "google", model: "google-veo-3-fast", prompt: "a heron, as before", want: "completed"},
	{name: "omni late failure", vendor: "google", model: "google-omni-1.1-flash", prompt: "a storm [fail]", want: "failed", wantMsg: "Gemini failed"},
	{name: "omni refusal", vendor: "google", model: "google-omni-1.1-flash", prompt: "a storm [nsfw]", tasks: true, want: "failed", wantMsg: "answered with text and no video"},
	{name: "omni cancel", vendor: "google", model: "google-omni-1.2-flash", prompt: "a long take", cancel: true, want: "cancelled"},
	{name: "gemini/tools", vendor: "google", model: "google-gemini-3.1-flash-image", prompt: "a fox", want: "completed"},
	{name: "gemini/tasks", vendor: "google", model: "google-gemini-3.1-flash-lite-image", prompt: "a hare", tasks: true, want: "completed"},
	{name: "gemini edit", vendor: "google", model: "google-gemini-3.1-flash-image", prompt: "make it night", image: true, want: "completed"},
	{name: "gemini edit of the edit", vendor: "google", model: "google-gemini-3-pro-image", prompt: "now add snow", image: true, refs: 2, tasks: true, want: "completed"},
	{name: "gemini former imagen id", vendor: "google", model: "google-imagen-4", prompt: "a fox, as before", want: "completed"},
	{name: "gemini refusal", vendor: "google", model: "google-gemini-3.1-flash-image", prompt: "x [nsfw]", want: "failed", wantMsg: "IMAGE_SAFETY"},
	{name: "gpt-image/tools", vendor: "openai", model: "openai-gpt-image-2", prompt: "a kite", want: "completed"},
	{name: "gpt-image/tasks", vendor: "openai", model: "openai-gpt-image-1-mini", prompt: "a boat", tasks: true, want: "completed"},
	{name: "gpt-image former id", vendor: "openai", model: "openai-gpt-image-1", prompt: "a kite, as before", want: "completed"}, // now gpt-image-2
	{name: "gpt-image edit", vendor: "openai", model: "openai-gpt-image-2", prompt: "add a moon", image: true, want: "completed"},
	{name: "gpt-image masked edit", vendor: "openai", model: "openai-gpt-image-2", prompt: "a moon in the mask", mask: true, want: "completed"},
	{name: "gpt-image three", vendor: "openai", model: "openai-gpt-image-2", prompt: "three kites", count: 3, tasks: true, want: "completed"},
	{name: "gpt-image 4K", vendor: "openai", model: "openai-gpt-image-2-4k", prompt: "a wide valley", want: "completed"},
	{name: "gpt-image moderation", vendor: "openai", model: "openai-gpt-image-2", prompt: "x [nsfw]", want: "failed", wantMsg: "safety system refused"},
	{name: "gpt-image quota", vendor: "openai", model: "openai-gpt-image-1", prompt: "x [quota]", tasks: true, want: "failed", wantMsg: "insufficient_quota"},
}

// TestVendorLifecycle runs each case on a server holding only its
// vendor's key: the file lands in darkroom's store, a refusal ends
// failed with the vendor's reason and refunds, a cancel reaches the vendor.
func TestVendorLifecycle(t *testing.T) {
	for _, vendor := range []string{"google", "openai"} {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			rig := startEmulator(t, defaultTiming)
			s := vendorServer(t, rig, vendor)
			cs := connect(t, s.url, "2026-07-28")
			tc := &rpcClient{t: t, url: s.url, caps: withTasks()}
			for _, c := range vendorCases {
				if c.vendor != vendor {
					continue
				}
				t.Run(c.name, func(t *testing.T) { runVendorCase(t, rig, s, cs, tc, c) })
			}
		})
	}
}

// startVendorCase starts c over the tools or the Tasks flow and returns
// the generation (and task) id.
func startVendorCase(t *testing.T, s *testServer, cs *mcp.ClientSession, tc *rpcClient, c vendorCase) (id, taskID string) {
	t.Helper()
	args := map[string]any{"modelId": c.model, "prompt": c.prompt}
	img := map[string]any{"data": base64.StdEncoding.EncodeToString(emulator.PNG()), "mimeType": "image/png"}
	if c.image {
		args["inputImage"] = img
	}
	if c.mask {
		args["inputs"] = []any{map[string]any{"role": "image", "image": img}, map[string]any{"role": "mask", "image": img}}
	}
	if c.refs > 0 {
		var inputs []any
		if c.image {
			delete(args, "inputImage")
			inputs = append(inputs, map[string]any{"role": "image", "image": img})
		}
		for range c.refs {
			inputs = append(inputs, map[string]any{"role": "reference", "image": img})
		}
		args["inputs"] = inputs
	}
	if c.count > 0 {
		args["count"] = c.count
	}
	if c.tasks {
		r := tc.tool("generate", args)
		if r.Error != nil || r.Result["resultType"] != "task" {
			t.Fatalf("generate (tasks): %+v %v", r.Error, r.Result)
		}
		taskID = r.Result["taskId"].(string)
		return taskGeneration(t, s, taskID), taskID
	}
	var g genView
	if res := call(t, cs, "generate", args, &g); res.IsError || g.GenerationID == "" {
		t.Fatalf("generate: %s", text(res))
	}
	return g.GenerationID, ""
}

func runVendorCase(t *testing.T, rig *emuRig, s *testServer, cs *mcp.ClientSession, tc *rpcClient, c vendorCase) {
	cancels := rig.Count(c.vendor, emulator.OpCancel)
	id, taskID := startVendorCase(t, s, cs, tc, c)
	if c.cancel {
		waitBetweenLooks(t, s, rig, c.vendor, c.prompt, id, "running")
		var cg genView
		call(t, cs, "cancel_generation", map[string]any{"generationId": id}, &cg)
	}
	var status, msg string
	var outs []map[string]any
	if c.tasks {
		done := tc.waitTask(taskID)
		_, sc := structuredOf(t, done)
		status, _ = sc["status"].(string)
		if e, ok := sc["error"].(map[string]any); ok {
			msg = fmt.Sprint(e["message"])
		}
		for _, o := range asList(sc["outputs"]) {
			outs = append(outs, o.(map[string]any))
		}
	} else {
		var w genView
		res := call(t, cs, "wait_generation", map[string]any{"generationId": id, "timeoutSeconds": 30}, &w)
		status = w.Status
		if w.Error != nil {
			msg = w.Error.Message
		}
		if w.Status == "failed" && !res.IsError {
			t.Errorf("a failure is not an isError result: %s", text(res))
		}
		for _, o := range w.Outputs {
			outs = append(outs, map[string]any{"url": o.URL, "mimeType": o.MimeType})
		}
	}
	if status != c.want || !strings.Contains(msg, c.wantMsg) {
		t.Fatalf("ended %s (%q), want %s (%q)", status, msg, c.want, c.wantMsg)
	}
	row := generationRow(t, s, id)
	switch c.want {
	case "completed":
		want, mime := emulator.PNG(), "image/png"
		if strings.Contains(c.model, "veo") || strings.Contains(c.model, "omni") {
			want, mime = emulator.MP4(), "video/mp4"
		}
		if len(outs) != max(c.count, 1) {
			t.Fatalf("%d outputs, want %d: %v", len(outs), max(c.count, 1), outs)
		}
		for _, o := range outs {
			if o["mimeType"] != mime {
				t.Fatalf("outputs %v", outs)
			}
			checkFile(t, o["url"].(string), want)
		}
		if c.mask {
			if in := rig.Inputs(c.vendor); len(in) == 0 || in[len(in)-1]["mask"] != true {
				t.Errorf("the vendor's edit came without its mask: %v", in)
			}
		}
		if c.refs > 0 && c.vendor == "google" {
			want := c.refs
			if c.image {
				want++
			}
			if in := rig.Inputs(c.vendor); len(in) == 0 || in[len(in)-1]["images"] != want {
				t.Errorf("the vendor's call came without its %d images: %v", want, in)
			}
		}
		for _, k := range []string{"journal.json", "out-1-0"} {
			// The spool keeps nothing once the output is copied.
			if _, err := s.app.blobs.Stat(context.Background(), "spool/"+c.vendor+"/"+id+"/"+k); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("spool %s after completion: %v", k, err)
			}
		}
		if row.Charged != row.Credits || row.Credits == 0 {
			t.Errorf("charged %d of %d credits", row.Charged, row.Credits)
		}
	default:
		if row.Charged != 0 {
			t.Errorf("%s generation charged %d credits, want a refund", c.want, row.Charged)
		}
	}
	if c.cancel && rig.Count(c.vendor, emulator.OpCancel)-cancels != 1 {
		t.Errorf("%d cancel calls, want 1", rig.Count(c.vendor, emulator.OpCancel)-cancels)
	}
	if n := rig.JobsByPrompt(c.vendor)[c.prompt]; n != 1 && !strings.Contains(c.prompt, "[quota]") {
		t.Errorf("%d vendor jobs for %q, want 1", n, c.prompt)
	}
	if n := rig.Count("files", "credential"); n != 0 {
		t.Errorf("the file host saw a vendor key %d times", n)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// TestVendorGoogleEditOfItsImage: with only a Gemini key, a legacy client
// makes an image, then a Tasks client of the same caller edits that very
// output by instruction (its darkroom:// URI as the image): the edit
// reaches Gemini with the first image inline and completes.
func TestVendorGoogleEditOfItsImage(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := vendorServer(t, rig, "google")
	cs := connect(t, s.url, "2026-07-28")
	var g genView
	if res := call(t, cs, "generate", map[string]any{"modelId": "google-gemini-3.1-flash-image", "prompt": "a fox in snow", "wait": true, "waitSeconds": 30}, &g); res.IsError || g.Status != "completed" {
		t.Fatalf("image: %s", text(res))
	}
	tc := &rpcClient{t: t, url: s.url, caps: withTasks()}
	r := tc.tool("generate", map[string]any{"modelId": "google-gemini-3.1-flash-image", "prompt": "make it night",
		"inputs": []any{map[string]any{"role": "image", "uri": "darkroom://generations/" + g.GenerationID + "/outputs/0"}}})
	if r.Error != nil || r.Result["resultType"] != "task" {
		t.Fatalf("edit (tasks): %+v %v", r.Error, r.Result)
	}
	_, sc := structuredOf(t, tc.waitTask(r.Result["taskId"].(string)))
	if outs := asList(sc["outputs"]); sc["status"] != "completed" || len(outs) != 1 {
		t.Fatalf("edit: %v", sc)
	}
	in := rig.Inputs("google")
	if len(in) != 2 || in[1]["prompt"] != "make it night" || in[1]["image"] != "image/png" || in[1]["images"] != 1 {
		t.Fatalf("the edit reached Gemini as %v", in)
	}
}

// TestVendorVertexVeo: with only a Google Cloud project and a service
// account key file (no Gemini key), Veo 3.1 on Vertex AI completes for a
// legacy assistant and for a Tasks client, the video carried inline in
// the finished operation; with only a Gemini key, Veo 3.1 names the
// setting it needs.
func TestVendorVertexVeo(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := vendorServer(t, rig, "vertex")
	cs := connect(t, s.url, "2026-07-28")
	var g genView
	if res := call(t, cs, "generate", map[string]any{"modelId": "google-veo-3.1-fast", "prompt": "a lighthouse at dusk", "wait": true, "waitSeconds": 30}, &g); res.IsError || g.Status != "completed" || len(g.Outputs) != 1 {
		t.Fatalf("legacy: %s", text(res))
	}
	checkFile(t, g.Outputs[0].URL, emulator.MP4())
	tc := &rpcClient{t: t, url: s.url, caps: withTasks()}
	r := tc.tool("generate", map[string]any{"modelId": "google-veo-3.1", "prompt": "a heron in fog", "durationSeconds": 4})
	if r.Error != nil || r.Result["resultType"] != "task" {
		t.Fatalf("generate (tasks): %+v %v", r.Error, r.Result)
	}
	_, sc := structuredOf(t, tc.waitTask(r.Result["taskId"].(string)))
	outs := asList(sc["outputs"])
	if sc["status"] != "completed" || len(outs) != 1 {
		t.Fatalf("Tasks: %v", sc)
	}
	checkFile(t, outs[0].(map[string]any)["url"].(string), emulator.MP4())
	if n, tokens := rig.Jobs("vertex"), rig.Count("vertex", emulator.OpToken); n != 2 || tokens != 1 {
		t.Fatalf("%d Vertex operations and %d token exchanges, want 2 and 1", n, tokens)
	}
	// A Gemini key alone does not reach Vertex AI: the model says so.
	gs := vendorServer(t, rig, "google")
	res := call(t, connect(t, gs.url, "2026-07-28"), "generate", map[string]any{"modelId": "google-veo-3.1", "prompt": "x"}, nil)
	if !res.IsError || !strings.Contains(text(res), "DARKROOM_GOOGLE_PROJECT") {
		t.Fatalf("Veo 3.1 with a Gemini key only: %s", text(res))
	}
}
