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

import (
	"encoding/base64"
	"encoding/json"
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
	e.mu.Unlock()
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
