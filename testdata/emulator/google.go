package emulator

// The Gemini API (generativelanguage.googleapis.com/v1beta), as its
// reference documents it:
//
//   - POST /v1beta/models/{model}:predictLongRunning (Veo) → an operation
//     {"name": "models/{model}/operations/{id}"}; GET /v1beta/{name} →
//     {"name", "done": true, "response": {"generateVideoResponse":
//     {"generatedSamples": [{"video": {"uri"}}]}}} or {"done": true,
//     "error": {"code", "message"}}; "done" is left out while false;
//     POST /v1beta/{name}:cancel.
//   - the video uri is GET /v1beta/files/{id}:download?alt=media, with the
//     key; it redirects to the file host (which must not see the key).
//   - POST /v1beta/models/{model}:predict (Imagen) → {"predictions":
//     [{"mimeType", "bytesBase64Encoded"}]}.
//   - POST /v1beta/models/{model}:generateContent (Gemini image models) →
//     {"candidates": [{"content": {"parts": [{"text"}, {"inlineData":
//     {"mimeType", "data"}}]}, "finishReason"}]}.
//   - GET /v1beta/models lists the models (darkroom's readiness ping);
//   - every call carries x-goog-api-key; errors are {"error": {"code",
//     "message", "status"}}.
//
// Prompt tokens: [fail] fails a Veo operation when it ends (a late
// failure); [nsfw] is filtered by the safety system (Veo:
// raiMediaFilteredReasons, Imagen: raiFilteredReason, Gemini:
// finishReason IMAGE_SAFETY); [invalid] is refused with 400; the hostile
// ones of hostile.go shape Imagen's and Gemini's replies.

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

func googleError(code int, status, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
	return b
}

func writeGoogleError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(googleError(code, status, msg))
}

func googleOp(r *http.Request) Op {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1beta/files/"):
		return OpFile
	case strings.HasSuffix(p, ":cancel"):
		return OpCancel
	case r.Method == http.MethodPost:
		return OpCreate
	default:
		return OpStatus
	}
}

func (e *Emulator) google(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Goog-Api-Key") != e.opts.GeminiKey {
		writeGoogleError(w, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/v1beta/")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(p, ":cancel"):
		e.googleCancel(w, strings.TrimSuffix(p, ":cancel"))
	case r.Method == http.MethodPost && strings.HasPrefix(p, "models/"):
		model, method, ok := strings.Cut(strings.TrimPrefix(p, "models/"), ":")
		if !ok {
			writeGoogleError(w, 404, "NOT_FOUND", "Method not found.")
			return
		}
		e.googleCall(w, r, model, method)
	case r.Method == http.MethodGet && p == "models":
		writeJSON(w, 200, map[string]any{"models": []any{map[string]any{"name": "models/veo-3.0-generate-001", "supportedGenerationMethods": []string{"predictLongRunning"}}}, "nextPageToken": "x"})
	case r.Method == http.MethodGet && strings.HasPrefix(p, "files/"):
		e.googleDownload(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "files/"), ":download"))
	case r.Method == http.MethodGet && strings.Contains(p, "/operations/"):
		e.mu.Lock()
		defer e.mu.Unlock()
		j := e.jobs[p[strings.LastIndex(p, "/")+1:]]
		if j == nil || j.prov != "google" || !strings.HasPrefix(p, "models/"+j.model+"/") {
			writeGoogleError(w, 404, "NOT_FOUND", "Operation not found: "+p)
			return
		}
		writeJSON(w, 200, e.veoOperation(j, e.clock.Now()))
	default:
		writeGoogleError(w, 404, "NOT_FOUND", "Not found: "+p)
	}
}

// googleRequest is the union of the three request bodies.
type googleRequest struct {
	Instances []struct {
		Prompt          string          `json:"prompt"`
		Image           json.RawMessage `json:"image"`
		LastFrame       json.RawMessage `json:"lastFrame"`
		ReferenceImages []any           `json:"referenceImages"`
	} `json:"instances"`
	Parameters map[string]any `json:"parameters"`
	Contents   []struct {
		Parts []struct {
			Text       string `json:"text"`
			InlineData *struct {
				MimeType string `json:"mimeType"`
				Data     string `json:"data"`
			} `json:"inlineData"`
		} `json:"parts"`
	} `json:"contents"`
	GenerationConfig map[string]any `json:"generationConfig"`
}

// input flattens a request for Inputs: prompt, parameters, and which
// images came.
func (g googleRequest) input() map[string]any {
	in := map[string]any{}
	for k, v := range g.Parameters {
		in[k] = v
	}
	for k, v := range g.GenerationConfig {
		in[k] = v
	}
	if len(g.Instances) > 0 {
		i := g.Instances[0]
		in["prompt"] = i.Prompt
		in["image"], in["lastFrame"], in["referenceImages"] = len(i.Image) > 0, len(i.LastFrame) > 0, len(i.ReferenceImages)
	}
	for _, c := range g.Contents {
		for _, part := range c.Parts {
			if part.Text != "" {
				in["prompt"] = part.Text
			}
			if part.InlineData != nil {
				in["image"] = part.InlineData.MimeType
			}
		}
	}
	return in
}

func (e *Emulator) googleCall(w http.ResponseWriter, r *http.Request, model, method string) {
	var req googleRequest
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &req); err != nil {
		writeGoogleError(w, 400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
		return
	}
	in := req.input()
	prompt, _ := in["prompt"].(string)
	if prompt == "" || strings.Contains(prompt, "[invalid]") {
		writeGoogleError(w, 400, "INVALID_ARGUMENT", "Request contains an invalid argument.")
		return
	}
	e.mu.Lock()
	j := e.newJob("google", model, in)
	e.mu.Unlock()
	switch method {
	case "predictLongRunning":
		writeJSON(w, 200, map[string]any{"name": "models/" + model + "/operations/" + j.id})
	case "predict":
		e.finishSync(j)
		if h, ok := hostileOf(prompt); ok {
			hostileReply(w, imagenShape, h)
			return
		}
		e.imagenReply(w, j, req.Parameters)
	case "generateContent":
		e.finishSync(j)
		if h, ok := hostileOf(prompt); ok {
			hostileReply(w, geminiShape, h)
			return
		}
		e.geminiReply(w, j)
	default:
		writeGoogleError(w, 404, "NOT_FOUND", "Method "+method+" not found.")
	}
}

// finishSync makes a synchronous call's job done at once (a slow call is
// a FaultSlow rule).
func (e *Emulator) finishSync(j *job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	j.start, j.end, j.video = now, now, false
}

func (e *Emulator) veoOperation(j *job, now time.Time) map[string]any {
	op := map[string]any{"name": "models/" + j.model + "/operations/" + j.id}
	ph, pct := j.phaseProgress(now)
	switch ph {
	case "queued", "running":
		op["metadata"] = map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningMetadata", "progressPercent": int(pct * 100)}
		return op
	case "canceled", "aborted":
		op["done"], op["error"] = true, map[string]any{"code": 1, "message": "Operation was cancelled."}
	case "failed":
		op["done"], op["error"] = true, map[string]any{"code": 13, "message": "Video generation failed: " + j.fail}
	default:
		gvr := map[string]any{}
		if j.nsfw {
			gvr["raiMediaFilteredCount"] = 1
			gvr["raiMediaFilteredReasons"] = []string{"Your prompt was blocked by our safety filters. Try rephrasing it."}
		} else {
			gvr["generatedSamples"] = []any{map[string]any{"video": map[string]any{"uri": e.Google.URL + "/v1beta/files/" + j.id + ":download?alt=media"}}}
		}
		op["done"] = true
		op["response"] = map[string]any{"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse", "generateVideoResponse": gvr}
	}
	return op
}

func (e *Emulator) googleCancel(w http.ResponseWriter, name string) {
	if e.opts.GoogleNoCancel {
		writeGoogleError(w, 400, "FAILED_PRECONDITION", "Cancellation is not supported for this operation.")
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[name[strings.LastIndex(name, "/")+1:]]
	if j == nil || j.prov != "google" {
		writeGoogleError(w, 404, "NOT_FOUND", "Operation not found: "+name)
		return
	}
	if now := e.clock.Now(); !terminal(j.phase(now)) {
		j.canceled = now
	}
	writeJSON(w, 200, map[string]any{})
}

// googleDownload redirects a video uri to the file host, as the Gemini
// API sends downloads on to storage.
func (e *Emulator) googleDownload(w http.ResponseWriter, r *http.Request, id string) {
	e.mu.Lock()
	j := e.jobs[id]
	ok := j != nil && j.prov == "google" && j.phase(e.clock.Now()) == "succeeded"
	e.mu.Unlock()
	if !ok || r.URL.Query().Get("alt") != "media" {
		writeGoogleError(w, 404, "NOT_FOUND", "File not found.")
		return
	}
	http.Redirect(w, r, e.Files.URL+"/files/"+id+"/output.mp4", http.StatusFound)
}

func (e *Emulator) imagenReply(w http.ResponseWriter, j *job, params map[string]any) {
	n := 1
	if v, ok := params["sampleCount"].(float64); ok && v >= 1 && v <= 4 {
		n = int(v)
	}
	var preds []any
	for range n {
		if j.nsfw {
			preds = append(preds, map[string]any{"raiFilteredReason": "The image was filtered by the safety settings: it may depict sensitive content."})
			continue
		}
		preds = append(preds, map[string]any{"mimeType": "image/png", "bytesBase64Encoded": base64.StdEncoding.EncodeToString(pngBytes)})
	}
	writeJSON(w, 200, map[string]any{"predictions": preds})
}

func (e *Emulator) geminiReply(w http.ResponseWriter, j *job) {
	cand := map[string]any{"index": 0}
	if j.nsfw {
		cand["finishReason"] = "IMAGE_SAFETY"
		cand["finishMessage"] = "Unable to show the generated image: it may violate the usage policies."
	} else {
		cand["finishReason"] = "STOP"
		cand["content"] = map[string]any{"role": "model", "parts": []any{
			map[string]any{"text": "Here is the image you asked for."},
			map[string]any{"inlineData": map[string]any{"mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(pngBytes)}},
		}}
	}
	writeJSON(w, 200, map[string]any{"candidates": []any{cand}, "modelVersion": j.model,
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 1290}})
}

// Inputs lists the inputs of the jobs created at provider, in order (for
// checking field maps): for google the parameters plus prompt and which
// images came; for openai the form or JSON fields.
func (e *Emulator) Inputs(provider string) []map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []map[string]any
	for _, j := range e.order {
		if j.prov == provider {
			out = append(out, j.input)
		}
	}
	return out
}
