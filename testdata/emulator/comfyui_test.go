package emulator

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func comfyWorkflow(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "..", "provider", "comfyui", "workflows", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var w map[string]any
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	return w
}

func comfyDo(t *testing.T, method, url string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func comfyUpload(t *testing.T, url, name string, data []byte, fields map[string]string) map[string]any {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	fw, _ := mw.CreateFormFile("image", name)
	fw.Write(data)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	mw.Close()
	resp, err := http.Post(url, mw.FormDataContentType(), &b)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return out
}

// TestComfyValidation: each refusal has ComfyUI's status and shape.
func TestComfyValidation(t *testing.T) {
	e := New(Options{})
	defer e.Close()
	c := e.ComfyUI(ComfyOptions{})
	set := func(w map[string]any, node, input string, v any) map[string]any {
		w[node].(map[string]any)["inputs"].(map[string]any)[input] = v
		return w
	}
	for _, tc := range []struct {
		name     string
		body     func() map[string]any
		status   int
		errType  string
		node     string // the node_errors entry
		nodeType string
	}{
		{"valid", func() map[string]any { return map[string]any{"prompt": comfyWorkflow(t, "text-to-image")} }, 200, "", "", ""},
		{"bad prompt_id", func() map[string]any {
			return map[string]any{"prompt": comfyWorkflow(t, "text-to-image"), "prompt_id": "ABC"}
		}, 400, "invalid_prompt_id", "", ""},
		{"uppercase uuid", func() map[string]any {
			return map[string]any{"prompt": comfyWorkflow(t, "text-to-image"), "prompt_id": "0000000A-0000-4000-8000-000000000000"}
		}, 400, "invalid_prompt_id", "", ""},
		{"no prompt", func() map[string]any { return map[string]any{} }, 400, "no_prompt", "", ""},
		{"unknown node", func() map[string]any {
			w := comfyWorkflow(t, "text-to-image")
			w["3"].(map[string]any)["class_type"] = "ClownsharKSampler_Beta"
			return map[string]any{"prompt": w}
		}, 400, "missing_node_type", "", ""},
		{"not in list", func() map[string]any {
			return map[string]any{"prompt": set(comfyWorkflow(t, "text-to-image"), "3", "sampler_name", "nope")}
		}, 400, "prompt_outputs_failed_validation", "3", "value_not_in_list"},
		{"too big", func() map[string]any {
			return map[string]any{"prompt": set(comfyWorkflow(t, "text-to-image"), "5", "batch_size", 5000.0)}
		}, 400, "prompt_outputs_failed_validation", "5", "value_bigger_than_max"},
		{"missing input", func() map[string]any {
			w := comfyWorkflow(t, "text-to-image")
			delete(w["6"].(map[string]any)["inputs"].(map[string]any), "text")
			return map[string]any{"prompt": w}
		}, 400, "prompt_outputs_failed_validation", "6", "required_input_missing"},
		{"no such input file", func() map[string]any { return map[string]any{"prompt": comfyWorkflow(t, "masked-inpainting")} },
			400, "prompt_outputs_failed_validation", "10", "custom_validation_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, out := comfyDo(t, "POST", c.URL+"/prompt", tc.body())
			if st != tc.status {
				t.Fatalf("status %d, want %d: %v", st, tc.status, out)
			}
			if tc.status == 200 {
				if out["prompt_id"] == "" || out["node_errors"] == nil {
					t.Fatalf("reply %v", out)
				}
				return
			}
			if typ := out["error"].(map[string]any)["type"]; typ != tc.errType {
				t.Fatalf("error type %v, want %s", typ, tc.errType)
			}
			ne := out["node_errors"].(map[string]any)
			if tc.node == "" {
				if len(ne) != 0 {
					t.Fatalf("node_errors %v", ne)
				}
				return
			}
			errs := ne[tc.node].(map[string]any)["errors"].([]any)
			if got := errs[0].(map[string]any)["type"]; got != tc.nodeType {
				t.Fatalf("node %s error %v, want %s", tc.node, got, tc.nodeType)
			}
		})
	}
}

// TestComfyRun runs prompts one at a time: a client's prompt_id, the
// websocket's events and preview frames, history, the jobs API, /view,
// uploads, cancel, interrupt, a failure, a restart that loses the queue.
func TestComfyRun(t *testing.T) {
	clock := NewClock(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	e := New(Options{Clock: clock})
	defer e.Close()
	c := e.ComfyUI(ComfyOptions{Steps: 4, RunTime: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(c.URL, "http", "ws", 1)+"/ws?clientId=me", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.Write(ctx, websocket.MessageText, []byte(`{"type":"feature_flags","data":{"supports_preview_metadata":true}}`))
	next := func() (string, map[string]any, []byte) {
		typ, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if typ == websocket.MessageBinary {
			return "binary", nil, b
		}
		var m struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		json.Unmarshal(b, &m)
		return m.Type, m.Data, nil
	}
	if ev, d, _ := next(); ev != "status" || d["sid"] != "me" {
		t.Fatalf("first event %s %v", ev, d)
	}
	if ev, _, _ := next(); ev != "feature_flags" {
		t.Fatalf("second event %s", ev)
	}

	id1, id2 := "3f0b8c1e-0000-4000-8000-000000000001", "3f0b8c1e-0000-4000-8000-000000000002"
	w := comfyWorkflow(t, "text-to-image")
	w["5"].(map[string]any)["inputs"].(map[string]any)["batch_size"] = 2.0
	for _, id := range []string{id1, id2} {
		if st, out := comfyDo(t, "POST", c.URL+"/prompt", map[string]any{"prompt": w, "prompt_id": id, "client_id": "me"}); st != 200 || out["prompt_id"] != id {
			t.Fatalf("submit %s: %d %v", id, st, out)
		}
	}
	if _, q := comfyDo(t, "GET", c.URL+"/prompt", nil); q["exec_info"].(map[string]any)["queue_remaining"] != 2.0 {
		t.Fatalf("queue %v", q)
	}
	if st, j := comfyDo(t, "GET", c.URL+"/api/jobs/"+id2, nil); st != 200 || j["status"] != "pending" {
		t.Fatalf("job 2: %d %v", st, j)
	}
	if st, j := comfyDo(t, "GET", c.URL+"/api/jobs/"+id1, nil); st != 200 || j["status"] != "in_progress" {
		t.Fatalf("job 1: %d %v", st, j)
	}
	// The second is cancelled while pending; the first runs to its end.
	if _, r := comfyDo(t, "POST", c.URL+"/api/jobs/"+id2+"/cancel", nil); r["cancelled"] != true {
		t.Fatalf("cancel pending: %v", r)
	}
	if _, r := comfyDo(t, "POST", c.URL+"/api/jobs/"+id2+"/cancel", nil); r["cancelled"] != false {
		t.Fatalf("cancel again: %v", r)
	}
	clock.Advance(5 * time.Second)
	e.Flush()
	seen := map[string]int{}
	previews := 0
	for {
		ev, d, b := next()
		seen[ev]++
		if ev == "binary" {
			if binary.BigEndian.Uint32(b) != 4 {
				t.Fatalf("preview frame type %d", binary.BigEndian.Uint32(b))
			}
			n := binary.BigEndian.Uint32(b[4:])
			var meta map[string]any
			json.Unmarshal(b[8:8+n], &meta)
			if meta["prompt_id"] != id1 {
				t.Fatalf("preview metadata %v", meta)
			}
			if _, err := png.Decode(bytes.NewReader(b[8+n:])); err != nil {
				t.Fatal(err)
			}
			previews++
		}
		if ev == "executing" && d["node"] == nil {
			break
		}
	}
	if previews != 4 || seen["progress"] != 4 || seen["executed"] != 1 || seen["execution_success"] != 1 {
		t.Fatalf("events %v, previews %d", seen, previews)
	}
	_, h := comfyDo(t, "GET", c.URL+"/history/"+id1, nil)
	item := h[id1].(map[string]any)
	if item["status"].(map[string]any)["status_str"] != "success" {
		t.Fatalf("history %v", item)
	}
	images := item["outputs"].(map[string]any)["9"].(map[string]any)["images"].([]any)
	if len(images) != 2 {
		t.Fatalf("outputs %v", images)
	}
	im := images[0].(map[string]any)
	resp, err := http.Get(c.URL + "/view?filename=" + im["filename"].(string) + "&subfolder=" + im["subfolder"].(string) + "&type=output")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(resp.Body); err != nil || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("view: %v %v", err, resp.Header)
	}
	resp.Body.Close()
	if st, j := comfyDo(t, "GET", c.URL+"/api/jobs/"+id1, nil); st != 200 || j["status"] != "completed" || j["outputs_count"] != 2.0 {
		t.Fatalf("job 1 done: %d %v", st, j)
	}
	if st, _ := comfyDo(t, "GET", c.URL+"/api/jobs/"+id2, nil); st != 404 {
		t.Fatalf("a dequeued job: %d", st)
	}

	// Uploads: the same name with other bytes is renamed, unless overwritten.
	for _, tc := range []struct {
		data   []byte
		fields map[string]string
		want   string
	}{
		{comfyPNG(8, 8, 1), nil, "in.png"},
		{comfyPNG(8, 8, 1), nil, "in.png"},
		{comfyPNG(8, 8, 2), nil, "in (1).png"},
		{comfyPNG(8, 8, 3), map[string]string{"overwrite": "true"}, "in.png"},
	} {
		if out := comfyUpload(t, c.URL+"/upload/image", "in.png", tc.data, tc.fields); out["name"] != tc.want || out["type"] != "input" {
			t.Fatalf("upload: %v, want %s", out, tc.want)
		}
	}
	out := comfyUpload(t, c.URL+"/api/upload/mask", "in-mask.png", comfyPNG(8, 8, 4), map[string]string{"original_ref": `{"filename":"in.png","type":"input"}`, "overwrite": "1"})
	if out["name"] != "in-mask.png" {
		t.Fatalf("mask upload %v", out)
	}

	// A failure mid-run, then an interrupt, then a restart.
	fw := comfyWorkflow(t, "text-to-image")
	fw["6"].(map[string]any)["inputs"].(map[string]any)["text"] = "a cat [fail]"
	id3, id4, id5 := "3f0b8c1e-0000-4000-8000-000000000003", "3f0b8c1e-0000-4000-8000-000000000004", "3f0b8c1e-0000-4000-8000-000000000005"
	comfyDo(t, "POST", c.URL+"/prompt", map[string]any{"prompt": fw, "prompt_id": id3, "client_id": "me"})
	comfyDo(t, "POST", c.URL+"/prompt", map[string]any{"prompt": w, "prompt_id": id4, "client_id": "me"})
	comfyDo(t, "POST", c.URL+"/prompt", map[string]any{"prompt": w, "prompt_id": id5, "client_id": "me"})
	clock.Advance(3 * time.Second)
	e.Flush()
	if _, j := comfyDo(t, "GET", c.URL+"/api/jobs/"+id3, nil); j["status"] != "failed" || j["execution_error"].(map[string]any)["exception_message"] == nil {
		t.Fatalf("failed job %v", j)
	}
	if c.Running() != id4 {
		t.Fatalf("running %q", c.Running())
	}
	comfyDo(t, "POST", c.URL+"/interrupt", map[string]any{"prompt_id": id5}) // not running: nothing
	if c.Running() != id4 {
		t.Fatal("an interrupt for another prompt stopped the running one")
	}
	comfyDo(t, "POST", c.URL+"/interrupt", map[string]any{"prompt_id": id4})
	if _, j := comfyDo(t, "GET", c.URL+"/api/jobs/"+id4, nil); j["status"] != "cancelled" {
		t.Fatalf("interrupted job %v", j)
	}
	c.Restart()
	if st, _ := comfyDo(t, "GET", c.URL+"/api/jobs/"+id5, nil); st != 404 || c.Queued() != 0 {
		t.Fatalf("after a restart: %d, %d queued", st, c.Queued())
	}
	if _, h := comfyDo(t, "GET", c.URL+"/history/"+id1, nil); len(h) != 0 {
		t.Fatalf("history after a restart: %v", h)
	}
}

// TestComfyOlderAndGuarded: an older ComfyUI has no jobs API; one behind a
// proxy wants its header.
func TestComfyOlderAndGuarded(t *testing.T) {
	e := New(Options{})
	defer e.Close()
	old := e.ComfyUI(ComfyOptions{NoJobsAPI: true})
	if st, _ := comfyDo(t, "GET", old.URL+"/api/jobs/3f0b8c1e-0000-4000-8000-000000000001", nil); st != 404 {
		t.Fatalf("jobs API on an older ComfyUI: %d", st)
	}
	if st, _ := comfyDo(t, "GET", old.URL+"/api/system_stats", nil); st != 200 {
		t.Fatalf("/api/system_stats: %d", st)
	}
	guarded := e.ComfyUI(ComfyOptions{Header: "Authorization: Bearer s3cret"})
	if st, _ := comfyDo(t, "GET", guarded.URL+"/prompt", nil); st != 401 {
		t.Fatalf("no header: %d", st)
	}
	req, _ := http.NewRequest("GET", guarded.URL+"/prompt", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("with the header: %v %v", err, resp)
	}
	resp.Body.Close()
}

// TestComfyMintsPromptID: a ComfyUI before 2025-07-14 answers its own
// uuid4 whatever prompt_id it is given, keeps extra_data in the queue and
// the history, interrupts whatever runs whatever prompt_id /interrupt
// names, and has no jobs API.
func TestComfyMintsPromptID(t *testing.T) {
	e := New(Options{})
	defer e.Close()
	c := e.ComfyUI(ComfyOptions{MintsPromptID: true, RunTime: time.Hour})
	ours := "3f0b8c1e-0000-4000-8000-000000000001"
	st, r := comfyDo(t, "POST", c.URL+"/prompt", map[string]any{"prompt": comfyWorkflow(t, "text-to-image"), "prompt_id": ours,
		"extra_data": map[string]any{"darkroom_generation": "gen-1"}})
	id, _ := r["prompt_id"].(string)
	if st != 200 || id == ours || !canonicalUUID.MatchString(id) || id[14] != '4' {
		t.Fatalf("POST /prompt: %d %v", st, r)
	}
	_, q := comfyDo(t, "GET", c.URL+"/queue", nil)
	running, _ := q["queue_running"].([]any)
	if len(running) != 1 || running[0].([]any)[1] != id || running[0].([]any)[3].(map[string]any)["darkroom_generation"] != "gen-1" {
		t.Fatalf("/queue: %v", q)
	}
	if st, _ := comfyDo(t, "GET", c.URL+"/api/jobs/"+id, nil); st != 404 {
		t.Fatalf("jobs API: %d", st)
	}
	comfyDo(t, "POST", c.URL+"/interrupt", map[string]any{"prompt_id": ours}) // not the running one's id
	_, h := comfyDo(t, "GET", c.URL+"/history?max_items=5", nil)
	item, _ := h[id].(map[string]any)
	if item == nil || item["prompt"].([]any)[3].(map[string]any)["darkroom_generation"] != "gen-1" || item["status"].(map[string]any)["status_str"] != "error" {
		t.Fatalf("/history after /interrupt: %v", h)
	}
}

// TestComfyObjectInfo: /object_info lists every node class installed,
// each with its inputs, and not those Missing or uninstalled, which a
// prompt may not use.
func TestComfyObjectInfo(t *testing.T) {
	e := New(Options{})
	defer e.Close()
	c := e.ComfyUI(ComfyOptions{Missing: []string{"VHS_VideoCombine"}})
	c.Uninstall("SaveVideo")
	_, info := comfyDo(t, "GET", c.URL+"/object_info", nil)
	ks, _ := info["KSampler"].(map[string]any)
	steps := ks["input"].(map[string]any)["required"].(map[string]any)["steps"].([]any)
	if ks["name"] != "KSampler" || steps[0] != "INT" || info["VHS_VideoCombine"] != nil || info["SaveVideo"] != nil {
		t.Fatalf("/object_info: KSampler %v, VHS %v, SaveVideo %v", ks, info["VHS_VideoCombine"], info["SaveVideo"])
	}
	st, r := comfyDo(t, "POST", c.URL+"/prompt", map[string]any{"prompt": comfyWorkflow(t, "image-to-video")})
	if e, _ := r["error"].(map[string]any); st != 400 || e["type"] != "missing_node_type" {
		t.Fatalf("a prompt with an uninstalled node: %d %v", st, r)
	}
	c.Install("SaveVideo")
	if _, info = comfyDo(t, "GET", c.URL+"/object_info", nil); info["SaveVideo"] == nil {
		t.Fatal("reinstalled SaveVideo not listed")
	}
}
