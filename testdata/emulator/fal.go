package emulator

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fal's queue, as fal documents it and fal-js reads it:
//
//   - submit: POST /{endpoint} → 200 {status: IN_QUEUE, request_id,
//     response_url, status_url, cancel_url, queue_position}; the URLs keep
//     only the endpoint's app, never its sub-path ("The status, result,
//     and cancel URLs use only the owner and the app":
//     fal.ai/docs/api-reference/inference-api, 2026; fal-js's
//     parseEndpointId keeps a workflows/ or comfy/ namespace: falApp).
//   - status: GET {status_url}[?logs=1] → 202 IN_QUEUE / IN_PROGRESS, 200
//     COMPLETED; result: GET {response_url}; cancel: PUT {cancel_url}.
//   - status stream: GET {status_url}/stream[?logs=1] → text/event-stream,
//     one "data: {status}" event per change, the last one COMPLETED, then
//     the stream ends (fal-js queue.ts streamStatus and streaming.ts
//     FalStream, fal-ai/fal-js 381105e, 2026-08-02; see falStream).
//     Any other path of a request (its sub-path kept, say) is 404.
//
// Tests may ask for more than that:
//
//   - RouteFal serves an endpoint's requests under a path of the test's
//     own, so the URLs fal gives differ from any a client would build.
//   - A prompt holding "[app-error]" makes a request whose app fails: it
//     is COMPLETED, and its response_url answers 500 with fal's request
//     error (detail, error_type runner_server_error, X-Fal-Error-Type),
//     its webhook ERROR "Invalid status code: 500".

// falAppError is the failure of a request whose app failed ([app-error]).
const falAppError = "Internal Server Error"

// falApp is the part of an endpoint that fal's request paths keep: as
// fal-js parseEndpointId (libs/client/src/utils.ts, fal-ai/fal-js 381105e,
// 2026-08-02) makes it, owner/alias after an optional workflows/ or comfy/
// namespace.
func falApp(endpoint string) string {
	parts := strings.Split(endpoint, "/")
	n := 2
	if parts[0] == "workflows" || parts[0] == "comfy" {
		n = 3
	}
	if len(parts) <= n {
		return endpoint
	}
	return strings.Join(parts[:n], "/")
}

var falRoutes sync.Map // *Emulator → *sync.Map of endpoint → path prefix

// RouteFal makes fal give, and serve, the URLs of endpoint's requests
// under prefix on the queue's host ("gateway/x" → /gateway/x/{app}/
// requests/{id}): URLs no client would build from the endpoint, so a test
// can tell whether they are followed.
func (e *Emulator) RouteFal(endpoint, prefix string) {
	m, _ := falRoutes.LoadOrStore(e, &sync.Map{})
	m.(*sync.Map).Store(endpoint, strings.Trim(prefix, "/")+"/")
}

// falRoot is the path of j's request, without slashes around it.
func (e *Emulator) falRoot(j *job) string {
	prefix := ""
	if m, ok := falRoutes.Load(e); ok {
		if v, ok := m.(*sync.Map).Load(j.model); ok {
			prefix = v.(string)
		}
	}
	return prefix + falApp(j.model) + "/requests/" + j.id
}

// falURLs are the request's URLs as fal gives them.
func (e *Emulator) falURLs(j *job) map[string]any {
	base := e.Fal.URL + "/" + e.falRoot(j)
	return map[string]any{"request_id": j.id, "response_url": base, "status_url": base + "/status", "cancel_url": base + "/cancel"}
}

func (e *Emulator) fal(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == falJWKSPath {
		e.falJWKS(w, r)
		return
	}
	if r.URL.Path == "/api/openapi/queue/openapi.json" && e.falMeta(w, r) {
		return // public, as fal's documents are
	}
	if r.Header.Get("Authorization") != "Key "+e.opts.FalKey {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write(Fixture("fal", "error_401.json"))
		return
	}
	if strings.HasPrefix(r.URL.Path, "/v1/models") && e.falMeta(w, r) {
		return
	}
	p := strings.Trim(r.URL.Path, "/")
	if r.Method == http.MethodPost {
		e.falSubmit(w, r, p)
		return
	}
	// {falRoot}[/status|/status/stream|/cancel]
	_, rest, _ := strings.Cut(p, "/requests/")
	id, tail, _ := strings.Cut(rest, "/")
	if r.Method == http.MethodGet && tail == "status/stream" {
		e.falStream(w, r, p, id, tail)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[id]
	if j == nil || j.prov != "fal" || strings.TrimSuffix(strings.TrimSuffix(p, tail), "/") != e.falRoot(j) {
		// A path keeping the model's sub-path lands here too: fal's
		// request paths drop it.
		writeJSON(w, 404, map[string]any{"status": "NOT_FOUND", "detail": "Request not found"})
		return
	}
	now := e.clock.Now()
	switch {
	case r.Method == http.MethodGet && tail == "status":
		writeJSON(w, e.falStatusCode(j, now), e.falStatus(j, now, r.URL.Query().Get("logs") == "1"))
	case r.Method == http.MethodGet && tail == "":
		st, v := e.falResult(j, now)
		if m, ok := v.(map[string]any); ok && m["error_type"] != nil {
			w.Header().Set("X-Fal-Error-Type", fmt.Sprint(m["error_type"]))
		}
		writeJSON(w, st, v)
	case r.Method == http.MethodPut && tail == "cancel":
		ph := j.phase(now)
		switch {
		case terminal(ph):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			w.Write(Fixture("fal", "cancel_already_completed.json"))
			return
		case ph == "running" && e.opts.FalIgnoreCancelInProgress:
		default:
			j.canceled = now
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(202)
		w.Write(Fixture("fal", "cancel_requested.json"))
	default:
		writeJSON(w, 405, map[string]any{"detail": "Method not allowed"})
	}
}

func (e *Emulator) falSubmit(w http.ResponseWriter, r *http.Request, endpoint string) {
	if strings.Count(endpoint, "/") < 1 || strings.Contains(endpoint, "/requests/") {
		writeJSON(w, 404, map[string]any{"detail": "Application not found"})
		return
	}
	var input map[string]any
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &input); err != nil {
		writeJSON(w, 422, map[string]any{"detail": "body is not a JSON object"})
		return
	}
	prompt, _ := input["prompt"].(string)
	if prompt == "" || strings.Contains(prompt, "[invalid]") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(422)
		w.Write(Fixture("fal", "error_422.json"))
		return
	}
	if falInvalid(w, endpoint, input) {
		return
	}
	e.mu.Lock()
	j := e.newJob("fal", endpoint, input)
	if wh := r.URL.Query().Get("fal_webhook"); wh != "" {
		j.webhook = wh
	}
	if strings.Contains(prompt, "[app-error]") {
		j.fail = falAppError
	}
	v := FixtureMap("fal", "submit.json")
	maps.Copy(v, e.falURLs(j))
	e.mu.Unlock()
	v["gateway_request_id"], v["queue_position"] = j.id, 0
	writeJSON(w, 200, v)
}

func (e *Emulator) falStatusCode(j *job, now time.Time) int {
	if terminal(j.phase(now)) {
		return 200
	}
	return 202
}

// falStatus renders the status reply (callers hold e.mu).
func (e *Emulator) falStatus(j *job, now time.Time, logs bool) map[string]any {
	ph, prog := j.phaseProgress(now)
	var v map[string]any
	switch ph {
	case "queued":
		v = FixtureMap("fal", "status_in_queue.json")
		pos := 0
		for _, o := range e.order {
			if o == j {
				break
			}
			if o.prov == "fal" && o.phase(now) == "queued" {
				pos++
			}
		}
		v["queue_position"] = pos
	case "running":
		v = FixtureMap("fal", "status_in_progress.json")
		v["logs"] = []any{
			map[string]any{"message": "Generating", "level": "INFO", "source": "USER", "timestamp": ts(j.start)},
			map[string]any{"message": "Progress: " + itoa(int(prog*100)) + "%", "level": "INFO", "source": "USER", "timestamp": ts(now)},
		}
	default:
		v = FixtureMap("fal", "status_completed.json")
	}
	if !logs {
		delete(v, "logs")
	}
	maps.Copy(v, e.falURLs(j))
	return v
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// falResult renders GET response_url (callers hold e.mu).
func (e *Emulator) falResult(j *job, now time.Time) (int, any) {
	ph := j.phase(now)
	switch ph {
	case "queued", "running":
		return 400, map[string]any{"detail": "Request is still in progress"}
	case "canceled", "aborted":
		return 400, map[string]any{"detail": "Request was cancelled"}
	case "failed":
		if j.fail == falAppError {
			return 500, map[string]any{"detail": falAppError, "error_type": "runner_server_error"}
		}
		return 422, FixtureMap("fal", "error_422.json")
	}
	outs := e.outputs(j)
	if j.video {
		v := FixtureMap("fal", "result_kling.json")
		vid := v["video"].(map[string]any)
		vid["url"] = outs[0]
		return 200, v
	}
	name := "result_flux.json"
	if j.nsfw {
		name = "result_flux_nsfw.json"
	}
	v := FixtureMap("fal", name)
	tmpl := v["images"].([]any)[0].(map[string]any)
	var imgs, nsfw []any
	for _, u := range e.imageOutputs(j) {
		img := map[string]any{}
		for k, x := range tmpl {
			img[k] = x
		}
		img["url"], img["content_type"] = u, "image/png"
		imgs = append(imgs, img)
		nsfw = append(nsfw, j.nsfw)
	}
	v["images"] = imgs
	if _, ok := v["has_nsfw_concepts"]; ok {
		v["has_nsfw_concepts"] = nsfw
	}
	return 200, v
}

// falHook builds fal's completion webhook for j (callers hold e.mu).
func (e *Emulator) falHook(j *job, now time.Time) Delivery {
	st, res := e.falResult(j, now)
	name := "webhook_ok.json"
	if st != 200 {
		name = "webhook_error.json"
	}
	v := FixtureMap("fal", name)
	v["request_id"], v["gateway_request_id"] = j.id, j.id
	v["payload"] = res
	if st != 200 {
		v["error"] = "Invalid status code: " + itoa(st) // as docs.fal.ai/model-endpoints/webhooks shows it
	}
	body, _ := json.Marshal(v)
	stamp := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Fal-Webhook-Request-Id", j.id)
	h.Set("X-Fal-Webhook-User-Id", e.opts.FalUserID)
	h.Set("X-Fal-Webhook-Timestamp", stamp)
	h.Set("X-Fal-Webhook-Signature", SignFal(e.falKeys[len(e.falKeys)-1], j.id, e.opts.FalUserID, stamp, body))
	return Delivery{Provider: "fal", URL: j.webhook, Header: h, Body: body}
}

// falJWKSPath is where the fal server serves its signing keys (fal's own
// live at rest.alpha.fal.ai; any URL will do for the adapter).
const falJWKSPath = "/.well-known/jwks.json"

// FalJWKSURL is the URL of the emulator's fal webhook signing keys.
func (e *Emulator) FalJWKSURL() string { return e.Fal.URL + falJWKSPath }

// RotateFalKey makes key sign fal's deliveries from now on; the JWKS
// serves it alongside the earlier ones.
func (e *Emulator) RotateFalKey(key ed25519.PrivateKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.falKeys = append(e.falKeys, key)
}

// falJWKS serves the public keys as fal does: OKP/Ed25519, base64url x.
func (e *Emulator) falJWKS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeJSON(w, 405, map[string]any{"detail": "Method not allowed"})
		return
	}
	e.mu.Lock()
	var keys []any
	for i, k := range e.falKeys {
		pub := k.Public().(ed25519.PublicKey)
		keys = append(keys, map[string]any{"kty": "OKP", "crv": "Ed25519", "kid": "emu-" + itoa(i), "use": "sig", "alg": "EdDSA",
			"x": base64.RawURLEncoding.EncodeToString(pub)})
	}
	e.mu.Unlock()
	writeJSON(w, 200, map[string]any{"keys": keys})
}

// SignFal computes X-Fal-Webhook-Signature for a delivery: hex ED25519
// over "request_id\nuser_id\ntimestamp\nsha256hex(body)". It is written
// independently of the adapter's verifier on purpose.
func SignFal(key ed25519.PrivateKey, requestID, userID, timestamp string, body []byte) string {
	sum := sha256.Sum256(body)
	msg := fmt.Sprintf("%s\n%s\n%s\n%x", requestID, userID, timestamp, sum)
	return hex.EncodeToString(ed25519.Sign(key, []byte(msg)))
}

// falKeepAlive is how often, on the emulator's clock, the status stream
// sends its current status again while nothing changes. fal documents no
// keep-alive; fal-js gives up on a stream after 15 s without a chunk
// (streaming.ts EVENT_STREAM_TIMEOUT), so a live stream is taken to send
// one more often than that (assumed).
const falKeepAlive = 5 * time.Second

// falStream serves GET {status_url}/stream as fal-js reads it: a 2xx
// text/event-stream whose events' data are the status objects of the
// status endpoint, sent at each change of the request (and every
// falKeepAlive), the stream ending after the COMPLETED one. A request
// already done gets its COMPLETED status at once. A prompt holding
// "[drop-stream]" makes a stream that ends after its first event (a
// dropped stream, cleanly closed).
func (e *Emulator) falStream(w http.ResponseWriter, r *http.Request, p, id, tail string) {
	e.mu.Lock()
	j := e.jobs[id]
	ok := j != nil && j.prov == "fal" && strings.TrimSuffix(strings.TrimSuffix(p, tail), "/") == e.falRoot(j)
	e.mu.Unlock()
	if !ok {
		writeJSON(w, 404, map[string]any{"status": "NOT_FOUND", "detail": "Request not found"})
		return
	}
	logs := r.URL.Query().Get("logs") == "1"
	e.mu.Lock()
	prompt, _ := j.input["prompt"].(string)
	e.mu.Unlock()
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	last, sentAt := "", time.Time{}
	for {
		var ev []byte
		var done bool
		e.hold(r, time.Time{}, func(now time.Time) bool {
			v := e.falStatus(j, now, logs)
			done = v["status"] == "COMPLETED"
			// A change is of the status, the queue position or the
			// percentage (not of the logs' timestamps).
			_, prog := j.phaseProgress(now)
			key := fmt.Sprint(v["status"], v["queue_position"], int(prog*100))
			if key != last || !now.Before(sentAt.Add(falKeepAlive)) {
				last, sentAt = key, now
				ev, _ = json.Marshal(v)
				return true
			}
			return false
		})
		if ev == nil || r.Context().Err() != nil {
			return // the client left, or the emulator closed
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", ev); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		if done || strings.Contains(prompt, "[drop-stream]") {
			return // a "[drop-stream]" request's stream ends after its first event
		}
	}
}
