package emulator

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// falApp is the part of an endpoint fal's status paths keep.
func falApp(endpoint string) string {
	parts := strings.SplitN(endpoint, "/", 3)
	if len(parts) < 2 {
		return endpoint
	}
	return parts[0] + "/" + parts[1]
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
	// {owner}/{app}/requests/{id}[/status|/cancel]
	parts := strings.Split(p, "/")
	if len(parts) < 4 || parts[2] != "requests" {
		writeJSON(w, 404, map[string]any{"detail": "Not found"})
		return
	}
	appPath, id, tail := parts[0]+"/"+parts[1], parts[3], strings.Join(parts[4:], "/")
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[id]
	if j == nil || j.prov != "fal" || falApp(j.model) != appPath {
		// A path keeping the model's subpath lands here too: fal's
		// status paths drop it.
		writeJSON(w, 404, map[string]any{"status": "NOT_FOUND", "detail": "Request not found"})
		return
	}
	now := e.clock.Now()
	switch {
	case r.Method == http.MethodGet && tail == "status":
		writeJSON(w, e.falStatusCode(j, now), e.falStatus(j, now, r.URL.Query().Get("logs") == "1"))
	case r.Method == http.MethodGet && tail == "":
		st, v := e.falResult(j, now)
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
	base := e.Fal.URL + "/" + falApp(endpoint) + "/requests/" + j.id
	e.mu.Unlock()
	v := FixtureMap("fal", "submit.json")
	v["request_id"], v["gateway_request_id"] = j.id, j.id
	v["response_url"], v["status_url"], v["cancel_url"] = base, base+"/status", base+"/cancel"
	v["queue_position"] = 0
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
	base := e.Fal.URL + "/" + falApp(j.model) + "/requests/" + j.id
	switch ph {
	case "queued":
		v := FixtureMap("fal", "status_in_queue.json")
		pos := 0
		for _, o := range e.order {
			if o == j {
				break
			}
			if o.prov == "fal" && o.phase(now) == "queued" {
				pos++
			}
		}
		v["queue_position"], v["response_url"] = pos, base
		return v
	case "running":
		v := FixtureMap("fal", "status_in_progress.json")
		v["response_url"] = base
		if logs {
			v["logs"] = []any{
				map[string]any{"message": "Generating", "level": "INFO", "source": "user", "timestamp": ts(j.start)},
				map[string]any{"message": "Progress: " + itoa(int(prog*100)) + "%", "level": "INFO", "source": "user", "timestamp": ts(now)},
			}
		} else {
			delete(v, "logs")
		}
		return v
	default:
		v := FixtureMap("fal", "status_completed.json")
		v["response_url"] = base
		if !logs {
			delete(v, "logs")
		}
		return v
	}
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
