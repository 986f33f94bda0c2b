package emulator

// The Gemini API (generativelanguage.googleapis.com), as Google's Go SDK
// (google.golang.org/genai v1.79.1, read 2026-12-07) speaks it:
//
//   - POST /v1beta/models/{model}:generateContent (the Gemini image
//     models) → {"candidates": [{"content": {"parts": [{"text"},
//     {"inlineData": {"mimeType", "data"}}]}, "finishReason"}]}.
//   - POST /v1beta/interactions (the Interactions API, the only way to
//     the Gemini Omni video models) with {"model", "input": [content...],
//     "background": true, "response_format": {"type": "video", ...}} →
//     an Interaction {"id", "status": "in_progress", ...}; GET
//     /v1beta/interactions/{id} until the status is terminal (completed,
//     failed, cancelled, ...); a completed one carries a model_output
//     step whose video content has a "uri"; POST
//     /v1beta/interactions/{id}/cancel stops a background one. Requests
//     are decoded and replies built with the SDK's own types
//     (interactions.CreateModelInteraction and .Interaction), so neither
//     can drift from the SDK.
//   - the video uri is GET /v1beta/files/{id}:download?alt=media, with the
//     key; it redirects to the file host (which must not see the key).
//   - GET /v1beta/models lists the models (darkroom's readiness ping,
//     and darkroom models check; listing.go).
//   - every call carries x-goog-api-key; errors are {"error": {"code",
//     "message", "status"}} (the Interactions API's own error type,
//     interactions.Error, has a string code: it gets the status name).
//
// What the Gemini API no longer serves is refused as it refuses it: the
// retired model ids of retired.go answer 404 NOT_FOUND; Imagen's :predict
// is not served on the Gemini API at all (go-genai: "only supported in
// Gemini Enterprise Agent Platform mode"); Veo's :predictLongRunning is
// gone with the Veo models (retired.go); long-running operations have no
// :cancel (the v1beta discovery document lists only get and list).
//
// Prompt tokens: [fail] fails an interaction when it ends (a late
// failure); [nsfw] is refused by the model (Gemini image: finishReason
// IMAGE_SAFETY; Omni: a completed interaction with text and no video);
// [invalid] is refused with 400; the hostile ones of hostile.go shape
// the Gemini image replies.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	ia "google.golang.org/genai/interactions/models/interactions"
)

func googleError(code int, status, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
	return b
}

// googleThrottled is a 429 as the Gemini API sends it: RESOURCE_EXHAUSTED
// with a google.rpc.RetryInfo detail saying when to come back.
func googleThrottled(after time.Duration) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"code": 429, "status": "RESOURCE_EXHAUSTED",
		"message": "You exceeded your current quota, please check your plan and billing details.",
		"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": durationJSON(after)}},
	}})
	return b
}

// durationJSON is a google.protobuf.Duration in its JSON form ("30s").
func durationJSON(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

func writeGoogleError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(googleError(code, status, msg))
}

// writeInteractionsError is an Interactions API error: the SDK's
// interactions.Error, whose code is a string.
func writeInteractionsError(w http.ResponseWriter, code int, status, msg string) {
	b, _ := json.Marshal(map[string]any{"error": ia.Error{Code: &status, Message: &msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

// googleModelGone is the Gemini API's answer for a model it does not
// serve (its usual text, as its SDK's users quote it).
func googleModelGone(w http.ResponseWriter, model, method string) {
	writeGoogleError(w, 404, "NOT_FOUND", "models/"+model+" is not found for API version v1beta, or is not supported for "+method+". Call ListModels to see the list of available models and their supported methods.")
}

func googleOp(r *http.Request) Op {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1beta/files/"):
		return OpFile
	case strings.HasSuffix(p, "/cancel") || strings.HasSuffix(p, ":cancel"):
		return OpCancel
	case r.Method == http.MethodPost:
		return OpCreate
	case r.URL.Query().Get("stream") == "true":
		return OpStream
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
	case r.Method == http.MethodPost && p == "interactions":
		e.interactionCreate(w, r)
	case strings.HasPrefix(p, "interactions/"):
		id, cancel := strings.CutSuffix(strings.TrimPrefix(p, "interactions/"), "/cancel")
		if cancel != (r.Method == http.MethodPost) || strings.Contains(id, "/") {
			writeInteractionsError(w, 404, "NOT_FOUND", "Not found: "+p)
			return
		}
		if !cancel && r.URL.Query().Get("stream") == "true" {
			e.interactionStream(w, r, id)
			return
		}
		e.interactionGet(w, id, cancel)
	case r.Method == http.MethodPost && strings.HasPrefix(p, "models/"):
		model, method, ok := strings.Cut(strings.TrimPrefix(p, "models/"), ":")
		if !ok {
			writeGoogleError(w, 404, "NOT_FOUND", "Method not found.")
			return
		}
		e.googleCall(w, r, model, method)
	case r.Method == http.MethodGet && p == "models":
		e.geminiModels(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(p, "files/"):
		e.googleDownload(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "files/"), ":download"))
	default:
		// Operations included: v1beta has get and list for them, and
		// there are none left to get (Veo is retired), nor a :cancel.
		writeGoogleError(w, 404, "NOT_FOUND", "Not found: "+p)
	}
}

// geminiRequest is a generateContent body (the fields darkroom's tests
// look at).
type geminiRequest struct {
	Contents []struct {
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

// input flattens a request for Inputs: the generation config, the prompt,
// the first image's type and how many images came.
func (g geminiRequest) input() map[string]any {
	in := map[string]any{}
	for k, v := range g.GenerationConfig {
		in[k] = v
	}
	images := 0
	for _, c := range g.Contents {
		for _, part := range c.Parts {
			if part.Text != "" {
				in["prompt"] = part.Text
			}
			if part.InlineData != nil {
				if images == 0 {
					in["image"] = part.InlineData.MimeType
				}
				images++
			}
		}
	}
	in["images"] = images
	return in
}

func (e *Emulator) googleCall(w http.ResponseWriter, r *http.Request, model, method string) {
	switch {
	case method == "predict" || method == "predictLongRunning":
		// Imagen and Veo live on Vertex AI only now.
		googleModelGone(w, model, method)
		return
	case method != "generateContent":
		writeGoogleError(w, 404, "NOT_FOUND", "Method "+method+" not found.")
		return
	case e.gone("google", model) || isVideo(model):
		googleModelGone(w, model, method)
		return
	}
	var req geminiRequest
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
	e.finishSync(j)
	if h, ok := hostileOf(prompt); ok {
		hostileReply(w, geminiShape, h)
		return
	}
	e.geminiReply(w, j)
}

// finishSync makes a synchronous call's job done at once (a slow call is
// a FaultSlow rule).
func (e *Emulator) finishSync(j *job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	j.start, j.end, j.video = now, now, false
}

func (e *Emulator) interactionCreate(w http.ResponseWriter, r *http.Request) {
	var req ia.CreateModelInteraction
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &req); err != nil || req.Model == "" {
		writeInteractionsError(w, 400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
		return
	}
	model := string(req.Model)
	switch {
	case e.gone("google", model):
		writeInteractionsError(w, 404, "NOT_FOUND", "Model "+model+" is not found or is no longer supported.")
		return
	case !isVideo(model):
		// The emulator serves the Interactions API for video only.
		writeInteractionsError(w, 400, "INVALID_ARGUMENT", "The emulator serves interactions for video models only, not "+model+".")
		return
	case req.Background == nil || !*req.Background:
		// A video takes minutes; the emulator has no blocking mode.
		writeInteractionsError(w, 400, "INVALID_ARGUMENT", "The emulator serves video interactions in background mode only.")
		return
	}
	in := interactionInput(req)
	prompt, _ := in["prompt"].(string)
	if prompt == "" || strings.Contains(prompt, "[invalid]") {
		writeInteractionsError(w, 400, "INVALID_ARGUMENT", "Request contains an invalid argument.")
		return
	}
	e.mu.Lock()
	j := e.newJob("google", model, in)
	it := e.interaction(j, e.clock.Now())
	e.mu.Unlock()
	writeJSON(w, 200, it)
}

// interactionInput flattens a create request for Inputs: the prompt, how
// many images came, the video format and the task.
func interactionInput(req ia.CreateModelInteraction) map[string]any {
	in := map[string]any{}
	var contents []ia.Content
	if req.Input != nil {
		contents = req.Input.ArrayOfContent
		if req.Input.Str != nil {
			in["prompt"] = *req.Input.Str
		}
	}
	images := 0
	for _, c := range contents {
		switch {
		case c.TextContent != nil:
			in["prompt"] = c.TextContent.Text
		case c.ImageContent != nil:
			images++
		}
	}
	in["images"] = images
	if v := videoFormat(req); v != nil {
		put := func(k string, s *string) {
			if s != nil {
				in[k] = *s
			}
		}
		put("duration", v.Duration)
		if v.AspectRatio != nil {
			in["aspect_ratio"] = string(*v.AspectRatio)
		}
		if v.Resolution != nil {
			in["resolution"] = string(*v.Resolution)
		}
		if v.Delivery != nil {
			in["delivery"] = string(*v.Delivery)
		}
	}
	if gc := req.GenerationConfig; gc != nil && gc.VideoConfig != nil && gc.VideoConfig.Task != nil {
		in["task"] = string(*gc.VideoConfig.Task)
	}
	return in
}

// videoFormat is a request's video response format. The SDK's union
// decoder takes {"type": "video", ...} for its map member (go-genai
// v1.79.1), so the map is decoded again as the video format it is.
func videoFormat(req ia.CreateModelInteraction) *ia.VideoResponseFormat {
	rf := req.ResponseFormat
	if rf == nil || rf.ResponseFormat == nil {
		return nil
	}
	if v := rf.ResponseFormat.VideoResponseFormat; v != nil {
		return v
	}
	if m := rf.ResponseFormat.MapOfAny; m["type"] == "video" {
		var v ia.VideoResponseFormat
		if b, err := json.Marshal(m); err == nil && json.Unmarshal(b, &v) == nil {
			return &v
		}
	}
	return nil
}

// interaction is j as the Interactions API shows it (callers hold e.mu).
func (e *Emulator) interaction(j *job, now time.Time) ia.Interaction {
	model := ia.Model(j.model)
	created := j.created.UTC().Format(time.RFC3339)
	it := ia.Interaction{ID: &j.id, Model: &model, Created: &created, Updated: &created}
	switch ph, _ := j.phaseProgress(now); ph {
	case "queued":
		it.Status = ia.InteractionStatusQueued
	case "running":
		it.Status = ia.InteractionStatusInProgress
	case "canceled", "aborted":
		it.Status = ia.InteractionStatusCancelled
	case "failed":
		code, msg := "INTERNAL", "Video generation failed: "+j.fail
		it.Status, it.Errors = ia.InteractionStatusFailed, []ia.Error{{Code: &code, Message: &msg}}
	default:
		var c ia.Content
		if j.nsfw {
			c = ia.NewContent(ia.TextContent{Text: "I can't make that video: it goes against the safety policies."})
		} else {
			uri := e.Google.URL + "/v1beta/files/" + j.id + ":download?alt=media"
			c = ia.NewContent(ia.VideoContent{URI: &uri, MimeType: ia.VideoContentMimeTypeVideoMp4.ToPointer()})
		}
		it.Status = ia.InteractionStatusCompleted
		it.Steps = []ia.Step{ia.NewStep(ia.ModelOutputStep{Content: []ia.Content{c}})}
	}
	if !j.end.IsZero() && !now.Before(j.end) {
		updated := j.end.UTC().Format(time.RFC3339)
		it.Updated = &updated
	}
	return it
}

// interactionGet answers a get, or a cancel: a cancel stops a running
// background interaction and answers with it as it now is.
func (e *Emulator) interactionGet(w http.ResponseWriter, id string, cancel bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[id]
	if j == nil || j.prov != "google" || !isVideo(j.model) {
		writeInteractionsError(w, 404, "NOT_FOUND", "Interaction "+id+" not found.")
		return
	}
	now := e.clock.Now()
	if cancel && !terminal(j.phase(now)) {
		j.canceled = now
	}
	writeJSON(w, 200, e.interaction(j, now))
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
// checking field maps): for google the generation config or video format
// plus prompt and which images came; for openai the form or JSON fields.
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

// interactionKeepAlive is how often, on the emulator's clock, an
// interaction stream sends a comment while nothing changes (assumed:
// go-genai documents none).
const interactionKeepAlive = 5 * time.Second

// interactionStream serves GET /v1beta/interactions/{id}?stream=true as
// go-genai v1.79.1 reads it: a 2xx text/event-stream of InteractionSSEEvent
// data, interaction.created first, an interaction.status_update at each
// change of status, and interaction.completed (with the partial
// interaction, no outputs) once it ends, after which the stream ends. A
// prompt holding "[drop-stream]" makes a stream that ends after its first
// event.
func (e *Emulator) interactionStream(w http.ResponseWriter, r *http.Request, id string) {
	e.mu.Lock()
	j := e.jobs[id]
	ok := j != nil && j.prov == "google" && isVideo(j.model)
	var prompt string
	if ok {
		prompt, _ = j.input["prompt"].(string)
	}
	e.mu.Unlock()
	if !ok {
		writeInteractionsError(w, 404, "NOT_FOUND", "Interaction "+id+" not found.")
		return
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	send := func(ev ia.InteractionSSEEvent) bool {
		b, err := json.Marshal(ev)
		if err == nil {
			_, err = fmt.Fprintf(w, "data: %s\n\n", b)
		}
		if fl != nil {
			fl.Flush()
		}
		return err == nil
	}
	seq := 0
	eventID := func() *string { seq++; s := fmt.Sprintf("evt-%d", seq); return &s }
	last, sentAt := ia.InteractionStatus(""), time.Time{}
	for {
		var it ia.Interaction
		var ev *ia.InteractionSSEEvent
		keepAlive := false
		e.hold(r, time.Time{}, func(now time.Time) bool {
			it = e.interaction(j, now)
			switch {
			case last == "":
				x := ia.NewInteractionSSEEvent(ia.InteractionCreatedEvent{EventID: eventID(),
					Interaction: ia.InteractionSseEventInteraction{ID: *it.ID, Status: ia.InteractionSseEventInteractionStatus(it.Status)}})
				ev = &x
			case it.Status != last:
				x := ia.NewInteractionSSEEvent(ia.InteractionStatusUpdate{EventID: eventID(), InteractionID: id, Status: ia.InteractionStatusUpdateStatus(it.Status)})
				ev = &x
			case !now.Before(sentAt.Add(interactionKeepAlive)):
				keepAlive = true
			default:
				return false
			}
			sentAt = now
			return true
		})
		if r.Context().Err() != nil || (ev == nil && !keepAlive) {
			return // the client left, or the emulator closed
		}
		if keepAlive {
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			continue
		}
		last = it.Status
		if !send(*ev) || strings.Contains(prompt, "[drop-stream]") {
			return
		}
		if it.Status != ia.InteractionStatusQueued && it.Status != ia.InteractionStatusInProgress {
			send(ia.NewInteractionSSEEvent(ia.InteractionCompletedEvent{EventID: eventID(),
				Interaction: ia.InteractionSseEventInteraction{ID: *it.ID, Status: ia.InteractionSseEventInteractionStatus(it.Status)}}))
			// The stream ends with the sentinel go-genai v1.79.1 waits for
			// (interactions.go, Interactions.Get: stream.NewEventStream(...,
			// "[DONE]", ...)); without it the SDK reports an unexpected EOF.
			fmt.Fprint(w, "data: [DONE]\n\n")
			if fl != nil {
				fl.Flush()
			}
			return
		}
	}
}
