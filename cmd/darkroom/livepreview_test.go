package main

import (
	"bytes"
	"encoding/base64"
	"image/jpeg"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

var previewURIRe = regexp.MustCompile(`darkroom://generations/[0-9a-f]+/preview`)

// TestLivePreviewAcrossReplicas: two replicas on one PostgreSQL over two
// emulated ComfyUI backends. A Tasks client's generate runs on whichever
// replica claims it, whose websocket alone receives the frames; on both
// replicas the working task's statusMessage names the preview, which
// resources/read returns as a JPEG, get_generation (legacy) and
// view_generation (the viewer) carry it as an image block; another owner's
// read looks exactly like an unknown id's; once the generation completes
// the preview is not found and its row is gone.
func TestLivePreviewAcrossReplicas(t *testing.T) {
	keys, err := auth.ParseKeyList("alice=secret-alice-1234,bob=secret-bob-5678", "test")
	if err != nil {
		t.Fatal(err)
	}
	shared := sharedDatabase(t)
	withKeys := func(c *config) { c.Auth = auth.Config{Keys: keys} }
	_, backends := comfyRig(t, emulator.ComfyOptions{Steps: 8, RunTime: 8 * time.Second})
	dir := comfyWorkflows(t)
	replicas := []*testServer{comfyServer(t, backends, dir, shared, withKeys), comfyServer(t, backends, dir, shared, withKeys)}

	tc := &rpcClient{t: t, url: replicas[0].url, token: "secret-alice-1234", caps: withTasks()}
	r := tc.tool("generate", map[string]any{"modelId": "comfyui:text-to-image", "prompt": "a harbour at night", "input": map[string]any{"3.steps": 30}})
	taskID, _ := r.Result["taskId"].(string)
	if taskID == "" {
		t.Fatalf("generate: %+v %v", r.Error, r.Result)
	}
	var uri string
	for i, s := range replicas {
		alice := &rpcClient{t: t, url: s.url, token: "secret-alice-1234", caps: withTasks()}
		legacy := &rpcClient{t: t, url: s.url, token: "secret-alice-1234", caps: map[string]any{}}
		viewer := &rpcClient{t: t, url: s.url, token: "secret-alice-1234", caps: withUI()}
		var msg string
		eventually(t, 20*time.Second, func() bool {
			g := alice.call("tasks/get", map[string]any{"taskId": taskID})
			msg, _ = g.Result["statusMessage"].(string)
			return previewURIRe.MatchString(msg) || g.Result["status"] != "working"
		}, "a working task's statusMessage naming the preview")
		uri = previewURIRe.FindString(msg)
		if uri == "" {
			t.Fatalf("replica %d: the task ended (%q) before its statusMessage named a preview", i, msg)
		}
		t.Logf("replica %d: %s", i, msg)
		read := alice.call("resources/read", map[string]any{"uri": uri}, "Mcp-Name", uri)
		if read.Error != nil {
			t.Fatalf("replica %d: resources/read %s: %+v", i, uri, read.Error)
		}
		c := read.Result["contents"].([]any)[0].(map[string]any)
		b, _ := base64.StdEncoding.DecodeString(c["blob"].(string))
		if _, err := jpeg.Decode(bytes.NewReader(b)); err != nil || c["mimeType"] != "image/jpeg" || len(b) > 64<<10 {
			t.Fatalf("replica %d: the preview (%v, %d bytes): %v", i, c["mimeType"], len(b), err)
		}
		id := strings.TrimSuffix(strings.TrimPrefix(uri, "darkroom://generations/"), "/preview")
		for tool, cl := range map[string]*rpcClient{"get_generation": legacy, "view_generation": viewer} {
			res := cl.tool(tool, map[string]any{"generationId": id})
			if !hasImage(res.Result) {
				t.Errorf("replica %d: %s of the running generation carries no image: %v", i, tool, res.Result)
			}
		}
	}

	// Another owner's preview reads exactly as an unknown generation's.
	unknown := gentools.PreviewURI(generation.NewID())
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		fc, foreign := rawRead(t, replicas[1].url, "secret-bob-5678", v, uri)
		uc, unk := rawRead(t, replicas[1].url, "secret-bob-5678", v, unknown)
		if fc != uc || len(foreign) == 0 || !bytes.Equal(foreign, bytes.ReplaceAll(unk, []byte(unknown), []byte(uri))) {
			t.Fatalf("%s: foreign %d %s\nunknown %d %s", v, fc, foreign, uc, unk)
		}
	}

	if done := tc.waitTask(taskID); done["status"] != "completed" {
		t.Fatalf("task: %v", done)
	}
	for i, s := range replicas {
		alice := &rpcClient{t: t, url: s.url, token: "secret-alice-1234", caps: withTasks()}
		if read := alice.call("resources/read", map[string]any{"uri": uri}, "Mcp-Name", uri); read.Error == nil {
			t.Errorf("replica %d: the preview of a completed generation read %v", i, read.Result)
		}
	}
	if n := queryInt(t, replicas[0], "SELECT count(*) FROM live_previews"); n != 0 {
		t.Errorf("%d live_previews rows after the generation ended", n)
	}
}

// hasImage reports whether a tool result's content has an image block.
func hasImage(res map[string]any) bool {
	content, _ := res["content"].([]any)
	for _, c := range content {
		if m, _ := c.(map[string]any); m["type"] == "image" && m["data"] != "" {
			return true
		}
	}
	return false
}

// TestOpenAIPartialImagesPreview: an OpenAI call held for 4 s streams
// partial images; get_generation of the running generation shows the
// latest as an image block and a Tasks client reads it as the preview
// resource; the finished generation has exactly the one output it asked
// for (a partial image is never one) and no preview.
func TestOpenAIPartialImagesPreview(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := startServer(t, 0, func(c *config) {
		c.OpenAIKey, c.OpenAIBaseURL = "sk-test", rig.OpenAI.URL
		c.PollRate, c.PollBurst = 1000, 1000
	})
	legacy := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	tc := &rpcClient{t: t, url: s.url, caps: withTasks()}
	r := tc.tool("generate", map[string]any{"modelId": "openai-gpt-image-2", "prompt": "a lighthouse [run=4s]"})
	taskID, _ := r.Result["taskId"].(string)
	if taskID == "" {
		t.Fatalf("generate: %+v %v", r.Error, r.Result)
	}
	var uri string
	var g rpcReply
	eventually(t, 10*time.Second, func() bool {
		g = tc.call("tasks/get", map[string]any{"taskId": taskID})
		msg, _ := g.Result["statusMessage"].(string)
		uri = previewURIRe.FindString(msg)
		return uri != "" || g.Result["status"] != "working"
	}, "the statusMessage to name the preview")
	if uri == "" {
		t.Fatalf("the task ended before its statusMessage named a preview: %v %+v", g.Result, g.Error)
	}
	read := tc.call("resources/read", map[string]any{"uri": uri}, "Mcp-Name", uri)
	if read.Error != nil {
		t.Fatalf("resources/read %s: %+v", uri, read.Error)
	}
	id := strings.TrimSuffix(strings.TrimPrefix(uri, "darkroom://generations/"), "/preview")
	if res := legacy.tool("get_generation", map[string]any{"generationId": id}); !hasImage(res.Result) {
		t.Errorf("get_generation of the running generation carries no image: %v", res.Result)
	}
	done := tc.waitTask(taskID)
	outs := done["result"].(map[string]any)["structuredContent"].(map[string]any)["outputs"].([]any)
	if done["status"] != "completed" || len(outs) != 1 {
		t.Fatalf("completed with %d outputs: %v", len(outs), done["status"])
	}
	if read := tc.call("resources/read", map[string]any{"uri": uri}, "Mcp-Name", uri); read.Error == nil {
		t.Error("the preview of a completed generation was read")
	}
}
