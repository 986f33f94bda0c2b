package emulator

// OpenAI's image API, as its reference documents it:
//
//   - POST /v1/images/generations, JSON {model, prompt, n, size, quality,
//     background, output_format, output_compression, moderation} →
//     {"created", "data": [{"b64_json"}], "usage"} (GPT image models
//     always answer base64);
//   - POST /v1/images/edits, multipart/form-data with image (or image[]),
//     optional mask (a PNG), prompt and the same fields;
//   - GET /v1/models lists the models (darkroom's readiness ping);
//   - Authorization: Bearer $OPENAI_API_KEY (OpenAI-Organization and
//     OpenAI-Project optional); errors are {"error": {"message", "type",
//     "param", "code"}}: 401 invalid_api_key, 400 invalid_value, 400
//     moderation_blocked (the safety system), 429 rate_limit_exceeded
//     (with Retry-After) or insufficient_quota (billing: retrying does
//     not help), 404 model_not_found for a model OpenAI has shut down
//     (retired.go).
//
// Prompt tokens: [invalid] → 400, [nsfw] → moderation_blocked,
// [quota] → insufficient_quota; the hostile ones of hostile.go.
//
// Streaming, as openai-go v3.105.0 (2026-11-19) reads it (image.go:
// GenerateStreaming sends "stream": true, EditStreaming the form field
// "stream": "true"; partial_images 0–3; the event unions; ssestream's
// "event:" and "data:" lines): a GPT image model's call with stream
// answers text/event-stream, partial_images events
// image_generation.partial_image (image_edit.partial_image for an edit)
// spread over the call's scripted run time, then one
// image_generation.completed (image_edit.completed) per image. Another
// model, or partial_images outside 0–3, is refused with 400
// invalid_value; the safety system refuses before the stream starts.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func openaiError(msg, typ, code string) []byte {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return b
}

func writeOpenAIError(w http.ResponseWriter, status int, msg, typ, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(openaiError(msg, typ, code))
}

func (e *Emulator) openai(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+e.opts.OpenAIKey {
		writeOpenAIError(w, 401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
		return
	}
	var in map[string]any
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		e.openaiModels(w)
		return
	case r.Method == http.MethodPost && r.URL.Path == "/v1/images/generations":
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if json.Unmarshal(b, &in) != nil {
			writeOpenAIError(w, 400, "We could not parse the JSON body of your request.", "invalid_request_error", "")
			return
		}
	case r.Method == http.MethodPost && r.URL.Path == "/v1/images/edits":
		var msg string
		if in, msg = editInput(r); msg != "" {
			writeOpenAIError(w, 400, msg, "invalid_request_error", "invalid_value")
			return
		}
	default:
		writeOpenAIError(w, 404, "Invalid URL ("+r.Method+" "+r.URL.Path+")", "invalid_request_error", "")
		return
	}
	if m, _ := in["model"].(string); e.gone("openai", m) {
		writeOpenAIError(w, 404, openaiRetiredMessage(m), "invalid_request_error", "model_not_found")
		return
	}
	stream := in["stream"] == true || in["stream"] == "true"
	partials := 0
	if stream {
		m, _ := in["model"].(string)
		if !strings.HasPrefix(m, "gpt-image") && !strings.HasPrefix(m, "chatgpt-image") {
			writeOpenAIError(w, 400, "Streaming is not supported for model '"+m+"'; use a GPT image model.", "invalid_request_error", "invalid_value")
			return
		}
		if v, ok := in["partial_images"]; ok {
			n, err := strconv.Atoi(fmtAny(v))
			if err != nil || n < 0 || n > 3 {
				writeOpenAIError(w, 400, "Invalid value for 'partial_images': it must be an integer between 0 and 3.", "invalid_request_error", "invalid_value")
				return
			}
			partials = n
		}
	}
	for _, h := range []string{"OpenAI-Organization", "OpenAI-Project"} {
		if v := r.Header.Get(h); v != "" {
			in["header:"+h] = v
		}
	}
	prompt, _ := in["prompt"].(string)
	switch {
	case prompt == "" || strings.Contains(prompt, "[invalid]"):
		writeOpenAIError(w, 400, "Invalid value for 'prompt': it must be a non-empty string.", "invalid_request_error", "invalid_value")
		return
	case strings.Contains(prompt, "[quota]"):
		writeOpenAIError(w, 429, "You exceeded your current quota, please check your plan and billing details.", "insufficient_quota", "insufficient_quota")
		return
	}
	e.mu.Lock()
	j := e.newJob("openai", strings.TrimPrefix(r.URL.Path, "/v1/images/"), in)
	now := e.clock.Now()
	end := now
	if d, ok := runToken(prompt); ok {
		end = now.Add(d) // the call is held that long: OpenAI answers when the image is made
	}
	j.start, j.end, j.video = now, end, false
	nsfw := j.nsfw
	e.mu.Unlock()
	if _, hostile := hostileOf(prompt); stream && !nsfw && !hostile {
		e.openaiStream(w, r, in, strings.TrimPrefix(r.URL.Path, "/v1/images/"), partials, now, end)
		return
	}
	if end.After(now) {
		if !e.hold(r, time.Time{}, func(t time.Time) bool { return !t.Before(end) }) {
			return
		}
		now = e.Now()
	}
	if j.nsfw {
		writeOpenAIError(w, 400, "Your request was rejected by the safety system. If you believe this is an error, contact us.", "image_generation_user_error", "moderation_blocked")
		return
	}
	if h, ok := hostileOf(prompt); ok {
		hostileReply(w, openaiShape, h)
		return
	}
	n := 1
	if v, err := strconv.Atoi(fmtAny(in["n"])); err == nil && v >= 1 && v <= 10 {
		n = v
	}
	data := make([]any, n)
	for i := range data {
		data[i] = map[string]any{"b64_json": base64.StdEncoding.EncodeToString(pngBytes)}
	}
	writeJSON(w, 200, map[string]any{"created": now.Unix(), "data": data, "output_format": "png",
		"usage": map[string]any{"input_tokens": 50, "output_tokens": 4160, "total_tokens": 4210}})
}

// editInput reads an edit's form: the fields, and whether the image and
// mask came (and as what).
func editInput(r *http.Request) (map[string]any, string) {
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		return nil, "The request must be multipart/form-data."
	}
	in := map[string]any{}
	for k, vs := range r.MultipartForm.Value {
		in[k] = vs[0]
	}
	images := append(r.MultipartForm.File["image"], r.MultipartForm.File["image[]"]...)
	if len(images) == 0 {
		return nil, "Missing required parameter: 'image'."
	}
	// Recorded under the field name used, each image's type in order.
	types := make([]string, len(images))
	for i, f := range images {
		types[i] = f.Header.Get("Content-Type")
	}
	field := "image"
	if len(r.MultipartForm.File["image[]"]) > 0 {
		field = "image[]"
	}
	in[field] = strings.Join(types, ",")
	if m := r.MultipartForm.File["mask"]; len(m) > 0 {
		f, err := m[0].Open()
		if err != nil {
			return nil, "Unreadable mask."
		}
		head := make([]byte, 8)
		io.ReadFull(f, head)
		f.Close()
		if string(head) != "\x89PNG\r\n\x1a\n" {
			return nil, "Invalid mask: it must be a PNG with an alpha channel."
		}
		in["mask"] = true
	}
	return in, ""
}

func fmtAny(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.Itoa(int(x))
	}
	return ""
}

// partialPNG is what a partial image carries: a picture other than the
// finished one (PNG), so that a test tells them apart.
var partialPNG = func() []byte {
	img := image.NewGray(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = 128
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}()

// openaiStream answers a streamed call (see the file comment): partials
// partial images spread over start..end, then one completed event per
// image asked for.
func (e *Emulator) openaiStream(w http.ResponseWriter, r *http.Request, in map[string]any, op string, partials int, start, end time.Time) {
	prefix := "image_generation"
	if op == "edits" {
		prefix = "image_edit"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	event := func(typ string, img []byte, data map[string]any) {
		data["type"], data["b64_json"] = typ, base64.StdEncoding.EncodeToString(img)
		data["background"], data["output_format"], data["quality"], data["size"] = "opaque", "png", "auto", "1024x1024"
		data["created_at"] = e.Now().Unix()
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	for k := range partials {
		at := start.Add(end.Sub(start) * time.Duration(k+1) / time.Duration(partials+1))
		if !e.hold(r, time.Time{}, func(t time.Time) bool { return !t.Before(at) }) {
			return
		}
		event(prefix+".partial_image", partialPNG, map[string]any{"partial_image_index": k})
	}
	if !e.hold(r, time.Time{}, func(t time.Time) bool { return !t.Before(end) }) {
		return
	}
	n := 1
	if v, err := strconv.Atoi(fmtAny(in["n"])); err == nil && v >= 1 && v <= 10 {
		n = v
	}
	for range n {
		event(prefix+".completed", pngBytes, map[string]any{"usage": map[string]any{"input_tokens": 50, "output_tokens": 4160, "total_tokens": 4210}})
	}
}
