package emulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func (e *Emulator) replicate(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+e.opts.ReplicateToken {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write(Fixture("replicate", "error_401.json"))
		return
	}
	p := r.URL.Path
	if e.replicateModels(w, r) {
		return
	}
	switch {
	case r.Method == http.MethodGet && p == "/v1/webhooks/default/secret":
		writeJSON(w, 200, map[string]string{"key": e.opts.WebhookSecret})
	case r.Method == http.MethodGet && p == "/v1/predictions":
		e.replicateList(w, r)
	case r.Method == http.MethodPost && p == "/v1/predictions":
		e.replicateCreate(w, r, "")
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/v1/models/") && strings.HasSuffix(p, "/predictions"):
		model := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/models/"), "/predictions")
		if strings.Count(model, "/") != 1 {
			http.NotFound(w, r)
			return
		}
		e.replicateCreate(w, r, model)
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/v1/predictions/") && strings.HasSuffix(p, "/cancel"):
		e.replicateCancel(w, strings.TrimSuffix(strings.TrimPrefix(p, "/v1/predictions/"), "/cancel"))
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/predictions/"):
		id := strings.TrimPrefix(p, "/v1/predictions/")
		e.mu.Lock()
		j := e.jobs[id]
		var v map[string]any
		if j != nil && j.prov == "replicate" {
			v = e.prediction(j, e.clock.Now())
		}
		e.mu.Unlock()
		if v == nil {
			writeJSON(w, 404, map[string]any{"detail": "Not found.", "status": 404})
			return
		}
		writeJSON(w, 200, v)
	default:
		http.NotFound(w, r)
	}
}

func (e *Emulator) replicateCreate(w http.ResponseWriter, r *http.Request, model string) {
	var body struct {
		Version       string         `json:"version"`
		Input         map[string]any `json:"input"`
		Webhook       string         `json:"webhook"`
		WebhookEvents []string       `json:"webhook_events_filter"`
	}
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &body); err != nil || body.Input == nil {
		replicateProblem(w, 422, "Input validation failed", "- input is required")
		return
	}
	version := ""
	if model == "" {
		if body.Version == "" {
			replicateProblem(w, 422, "Invalid version", "version is required")
			return
		}
		var ok bool
		if model, version, ok = e.replicateVersion(body.Version); !ok {
			replicateProblem(w, 422, "Invalid version or not permitted", "The specified version does not exist (or perhaps you don't have permission to use it?)")
			return
		}
	} else if m := e.replicateModel(model); m != nil && m.Official {
		version = "hidden"
	}
	prompt, _ := body.Input["prompt"].(string)
	if prompt == "" || strings.Contains(prompt, "[invalid]") {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(422)
		w.Write(Fixture("replicate", "error_422.json"))
		return
	}
	if replicateInvalid(w, model, body.Input) {
		return
	}
	var deadline time.Duration
	if ca := r.Header.Get("Cancel-After"); ca != "" {
		d, ok := replicateCancelAfter(ca)
		if !ok {
			// The last sentence is the document's; the status, title and
			// first sentence are not documented (assumed).
			replicateProblem(w, 400, "Invalid Cancel-After header", "Cancel-After must be a duration such as 30s, 5m or 1h30m. The minimum allowed duration is 5 seconds.")
			return
		}
		deadline = d
	}
	wait, ok := replicateWait(r.Header.Get("Prefer"))
	if !ok {
		// The document gives the pattern, not the refusal: status, title
		// and detail are assumed.
		replicateProblem(w, 400, "Invalid Prefer header", "Prefer must be wait or wait=n, where n is a number of seconds between 1 and 60.")
		return
	}
	e.mu.Lock()
	j := e.newJob("replicate", model, body.Input)
	j.version = version
	j.webhook = body.Webhook
	j.events = body.WebhookEvents
	if deadline > 0 {
		j.deadline = j.created.Add(deadline)
	}
	v := e.prediction(j, e.clock.Now())
	created := j.created
	e.mu.Unlock()
	if wait == 0 {
		writeJSON(w, http.StatusCreated, v)
		return
	}
	// Prefer: wait holds the create until the prediction ends or the wait
	// runs out: 201 "If the Prefer: wait header is provided it will
	// contain the final output", else 202 "created but does not yet have
	// all outputs", in its current state (predictions.create's responses).
	ended := e.hold(r, created.Add(wait), func(now time.Time) bool { return terminal(j.phase(now)) })
	if r.Context().Err() != nil {
		return // the client gave up: the prediction runs on, unanswered
	}
	e.mu.Lock()
	v = e.prediction(j, e.clock.Now())
	e.mu.Unlock()
	code := http.StatusAccepted
	if ended {
		code = http.StatusCreated
	}
	writeJSON(w, code, v)
}

// replicateVersion resolves predictions.create's "version" as Replicate's
// OpenAPI document describes it (schemas_version_prediction_request):
// "owner/name" only for an official model; "owner/name:id" or a bare "id"
// for any other. An official model refuses a version id, with 422 "Invalid
// version or not permitted" (vendors-2026-12.md item 5; the body as
// replicate/cog-flux-schnell#1 of 2024-08-12 quotes it, for a version id of
// the official flux-schnell). A community model named without its version,
// or with another, gets the same 422 (assumed: the document says only
// that the version is required). A model the emulator does not know is
// taken as sent. ok is false when Replicate refuses the version.
func (e *Emulator) replicateVersion(v string) (model, version string, ok bool) {
	model, version, pinned := strings.Cut(v, ":")
	if !strings.Contains(model, "/") { // a bare version id
		model, version, pinned = "unknown/versioned", v, true
		for _, m := range e.replicateAll() {
			if m.version == v {
				model = m.path
			}
		}
	}
	m := e.replicateModel(model)
	switch {
	case m == nil:
		return model, version, true
	case m.Official:
		return model, "hidden", !pinned
	default: // "For all other models, the specific version is required."
		return model, version, pinned && version == m.version
	}
}

// cancelAfterRE is Cancel-After's form in Replicate's OpenAPI document
// (parameters_cancel_after_header): units s, m and h, combinable ("1h30m45s"),
// a number without a unit being seconds.
var cancelAfterRE = regexp.MustCompile(`^(\d+h)?(\d+m)?(\d+s?)?$`)

// replicateCancelAfter reads a Cancel-After header; ok is false for one
// Replicate refuses, including one under its 5 s minimum.
func replicateCancelAfter(v string) (time.Duration, bool) {
	if !cancelAfterRE.MatchString(v) {
		return 0, false
	}
	if last := v[len(v)-1]; last >= '0' && last <= '9' {
		v += "s"
	}
	d, err := time.ParseDuration(v)
	return d, err == nil && d >= 5*time.Second
}

// replicateProblem writes Replicate's error body, {"title", "detail",
// "status"} as application/problem+json (as testdata/replicate's
// error_401.json and error_422.json).
func replicateProblem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"title": title, "detail": detail, "status": status})
}

// replicateThrottled is Replicate's 429 body for a wait of after, in
// whole seconds as the Retry-After beside it: "Request was throttled.
// Expected available in 1 second." (replicate.com/docs/topics/predictions/
// rate-limits, read 2026-12-07; testdata/replicate/error_429.json).
func replicateThrottled(after time.Duration) []byte {
	n := int(after.Seconds())
	unit := "seconds"
	if n == 1 {
		unit = "second"
	}
	b, _ := json.Marshal(map[string]string{"detail": fmt.Sprintf("Request was throttled. Expected available in %d %s.", n, unit)})
	return b
}

func (e *Emulator) replicateCancel(w http.ResponseWriter, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[id]
	if j == nil || j.prov != "replicate" {
		writeJSON(w, 404, map[string]any{"detail": "Not found.", "status": 404})
		return
	}
	now := e.clock.Now()
	if !terminal(j.phase(now)) {
		j.canceled = now
	}
	writeJSON(w, 200, e.prediction(j, now))
}

func (e *Emulator) replicateList(w http.ResponseWriter, r *http.Request) {
	off, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	e.mu.Lock()
	var all []*job
	for i := len(e.order) - 1; i >= 0; i-- {
		if e.order[i].prov == "replicate" {
			all = append(all, e.order[i])
		}
	}
	now := e.clock.Now()
	var results []any
	for i := off; i < len(all) && i < off+e.opts.PageSize; i++ {
		results = append(results, e.prediction(all[i], now))
	}
	e.mu.Unlock()
	list := FixtureMap("replicate", "prediction_list.json")
	list["results"] = results
	if results == nil {
		list["results"] = []any{}
	}
	list["next"] = nil
	if off+e.opts.PageSize < len(all) {
		list["next"] = fmt.Sprintf("%s/v1/predictions?cursor=%d", e.Replicate.URL, off+e.opts.PageSize)
	}
	if off > 0 {
		list["previous"] = fmt.Sprintf("%s/v1/predictions?cursor=%d", e.Replicate.URL, max(off-e.opts.PageSize, 0))
	}
	writeJSON(w, 200, list)
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

// prediction renders a job as Replicate's prediction object, starting
// from the fixture of its phase (callers hold e.mu).
func (e *Emulator) prediction(j *job, now time.Time) map[string]any {
	ph, prog := j.phaseProgress(now)
	fixture := map[string]string{
		"queued": "prediction_starting.json", "running": "prediction_processing.json",
		"succeeded": "prediction_succeeded.json", "failed": "prediction_failed.json",
		"canceled": "prediction_canceled.json", "aborted": "prediction_aborted.json",
	}[ph]
	v := FixtureMap("replicate", fixture)
	v["id"] = j.id
	v["model"] = j.model
	if j.version != "" {
		v["version"] = j.version
	}
	v["input"] = j.input
	v["created_at"] = ts(j.created)
	v["urls"] = map[string]any{
		"web":    "https://replicate.com/p/" + j.id,
		"get":    e.Replicate.URL + "/v1/predictions/" + j.id,
		"cancel": e.Replicate.URL + "/v1/predictions/" + j.id + "/cancel",
	}
	if !j.deadline.IsZero() { // Cancel-After's time (schemas_prediction_response.deadline)
		v["deadline"] = ts(j.deadline)
	}
	if e.opts.EchoWebhook && j.webhook != "" {
		v["webhook"] = j.webhook
		v["webhook_events_filter"] = j.events
	}
	v["started_at"], v["completed_at"], v["output"], v["error"] = nil, nil, nil, nil
	v["logs"] = ""
	switch ph {
	case "running":
		v["started_at"] = ts(j.start)
		v["logs"] = progressLogs(prog)
	case "succeeded":
		v["started_at"], v["completed_at"] = ts(j.start), ts(j.end)
		v["logs"] = progressLogs(1)
		if j.video {
			v["output"] = e.outputs(j)[0]
		} else {
			v["output"] = e.imageOutputs(j)
		}
		if !now.Before(j.end.Add(e.opts.OutputTTL)) {
			v["output"], v["input"], v["logs"], v["data_removed"] = nil, map[string]any{}, "", true
		}
	case "failed":
		v["started_at"], v["completed_at"] = ts(j.start), ts(j.end)
		if j.fail != "" {
			v["error"] = j.fail
		} else {
			v["error"] = FixtureMap("replicate", "prediction_failed.json")["error"]
		}
	case "canceled", "aborted":
		v["completed_at"] = ts(j.doneAt())
	}
	for _, k := range []string{"started_at", "completed_at"} {
		if v[k] == nil { // a time not yet come is absent, not null (the document's examples)
			delete(v, k)
		}
	}
	return v
}

func progressLogs(frac float64) string {
	var b strings.Builder
	steps := int(frac * 20)
	for s := 2; s <= steps; s += 2 {
		fmt.Fprintf(&b, "%3d%%|%-10s| %d/20 [00:%02d<00:%02d,  2.50s/it]\n", s*5, strings.Repeat("█", s/2), s, s, 20-s)
	}
	return b.String()
}

// replicateHook builds a signed webhook delivery of j as it was at "at",
// sent at now (callers hold e.mu).
func (e *Emulator) replicateHook(j *job, at, now time.Time) Delivery {
	body, _ := json.Marshal(e.prediction(j, at))
	e.hookSeq++
	id := fmt.Sprintf("msg_emu%06d", e.hookSeq)
	stamp := strconv.FormatInt(now.Unix(), 10)
	sig := SignStandard(e.opts.WebhookSecret, id, stamp, body)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Webhook-Id", id)
	h.Set("Webhook-Timestamp", stamp)
	h.Set("Webhook-Signature", sig)
	return Delivery{Provider: "replicate", URL: j.webhook, Header: h, Body: body}
}

// SignStandard computes a Standard Webhooks signature header value
// ("v1,<base64 HMAC-SHA256 of id.timestamp.body>") with a "whsec_" secret.
// It is written independently of the adapter's verifier on purpose.
func SignStandard(secret, id, timestamp string, body []byte) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic("emulator: bad webhook secret: " + err.Error())
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.", id, timestamp)
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
