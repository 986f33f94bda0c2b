// Package emulator serves Replicate, fal, Google Gemini API and OpenAI
// image API wire shapes for tests, built from the golden fixtures in
// testdata/replicate and testdata/fal and from the vendors' published
// references (google.go, openai.go).
//
// An Emulator runs five httptest servers: Replicate's API, fal's queue,
// the Gemini API, OpenAI's API, and a separate file host for outputs
// (which expire). Jobs move on an
// injectable Clock, never on wall time: a job is queued for its queue
// time, running (with progress logs) for its run time, then done. Prompt
// tokens steer a job: "[fail]" fails it, "[nsfw]" trips fal's safety
// checker, "[invalid]" is refused at submit with 422, "[run=12s]" runs it
// from its submit for that long (a Go duration), whatever its model's
// timing. DoneAt says when a job was scripted to end.
//
// Webhooks are delivered only from Advance and Flush (never from inside a
// request), signed with Standard Webhooks for Replicate and with fal's
// ED25519 scheme for fal, whose public keys the fal server serves as a
// JWKS (FalJWKSURL). Faults (429 with Retry-After, 500, dropped connections, slow
// responses, lost submit replies) are injected per operation, by rule or
// at random. Every call is counted.
package emulator

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
)

// Clock is the settable test clock jobs move on.
type Clock = testclock.Clock

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return testclock.New(t) }

// Op names an emulated operation, for faults and counters.
type Op string

const (
	OpCreate Op = "create"
	OpStatus Op = "status" // Replicate GET prediction, fal GET status
	OpResult Op = "result" // fal GET response_url
	OpCancel Op = "cancel"
	OpList   Op = "list" // Replicate GET /v1/predictions
	OpFile   Op = "file"
	OpSecret Op = "secret"
	OpJWKS   Op = "jwks"   // fal's webhook signing keys
	OpToken  Op = "token"  // Vertex AI's OAuth token exchange
	OpStream Op = "stream" // fal GET status/stream (server-sent events)
)

// Fault is an injected failure.
type Fault string

const (
	FaultNone Fault = ""
	// Fault429 answers 429 with Retry-After (and Replicate's throttle body).
	Fault429 Fault = "429"
	// Fault500 answers 500 without doing anything.
	Fault500 Fault = "500"
	// FaultDrop closes the connection without doing anything.
	FaultDrop Fault = "drop"
	// FaultSlow holds the request until the client gives up (or Release).
	FaultSlow Fault = "slow"
	// FaultLoseReply does the work (a create makes the job) and then
	// closes the connection without answering.
	FaultLoseReply Fault = "lose-reply"
)

// Rule injects Fault into the next Times calls (0: every call) of Op on
// Provider ("replicate", "fal", "files"; "" any).
type Rule struct {
	Provider   string
	Op         Op
	Fault      Fault
	Times      int
	RetryAfter time.Duration // for Fault429 (default 2 s)
}

// Options configures an Emulator.
type Options struct {
	Clock *Clock
	// ReplicateToken and FalKey are the credentials accepted (defaults
	// "r8_test" and "fal_test").
	ReplicateToken string
	FalKey         string
	// GeminiKey and OpenAIKey are the Gemini and OpenAI API keys accepted
	// (defaults "gemini_test" and "sk-test").
	GeminiKey string
	OpenAIKey string
	// VertexProject and VertexLocation are the Vertex AI project and
	// location served (defaults DefaultVertexProject and
	// DefaultVertexLocation).
	VertexProject, VertexLocation string
	// WebhookSecret signs Replicate webhooks (default: the fixture's).
	WebhookSecret string
	// OutputTTL is how long output files stay (default 1 h, Replicate's).
	OutputTTL time.Duration
	// PageSize of Replicate's prediction list (default 100).
	PageSize int
	// EchoWebhook includes "webhook" in Replicate prediction objects
	// (whether Replicate does is UNCONFIRMED; default off).
	EchoWebhook bool
	// FalIgnoreCancelInProgress makes an in-progress fal request run on
	// after a cancel (fal: "the app may ignore it").
	FalIgnoreCancelInProgress bool
	// Timing gives a model's queue and run times; nil: video models
	// (kling, video, wan, veo, omni in the name) 5 s + 175 s, images 0.5 s + 1.5 s.
	Timing func(model string) (queue, run time.Duration)
	// WebhookClient posts webhooks (default http.DefaultClient).
	WebhookClient *http.Client
	// WebhookRetries are the waits before each retry of a delivery the
	// receiver refused (not 2xx, or no answer); nil: none. Both vendors
	// retry (fal up to 10 times over 2 h, Replicate a delivery not
	// answered 2xx); the spacing is the test's. A retry is the same POST,
	// headers and signature included, valid within the receivers'
	// 5-minute tolerance.
	WebhookRetries []time.Duration
	// FalUserID is the account fal's deliveries name (default
	// DefaultFalUserID); FalSigningKey signs them (default
	// DefaultFalSigningKey).
	FalUserID     string
	FalSigningKey ed25519.PrivateKey
}

// DefaultFalUserID is the account the emulator's fal deliveries name.
const DefaultFalUserID = "emu-fal-user"

// DefaultFalSigningKey is the emulator's fal webhook signing key (fixed,
// so runs repeat).
var DefaultFalSigningKey = ed25519.NewKeyFromSeed(sha256Sum("darkroom emulator: fal webhook signing key"))

// DefaultWebhookSecret is the fixture's Replicate signing secret.
var DefaultWebhookSecret string

// Emulator is a running emulator. Close it when done.
type Emulator struct {
	Replicate *httptest.Server
	Fal       *httptest.Server
	Google    *httptest.Server
	Vertex    *httptest.Server // Vertex AI and its OAuth token endpoint
	OpenAI    *httptest.Server
	Files     *httptest.Server

	opts  Options
	clock *Clock

	mu        sync.Mutex
	jobs      map[string]*job
	order     []*job // creation order
	seq       int
	rules     []*Rule
	chaos     map[Op][]Fault
	chaosRate float64
	rng       *rand.Rand
	counts    map[string]int // provider/op
	inFlight  map[string]int // provider → requests being answered now
	peak      map[string]int // provider → most inFlight at once
	prompts   map[string]int // provider/prompt → creates
	release   chan struct{}
	slowHits  chan Op
	delivered []Delivery
	retrying  []retry // refused deliveries waiting for their next attempt
	hookSeq   int
	falKeys   []ed25519.PrivateKey // newest last; it signs, all are served
	tokens    map[string]bool      // Vertex access tokens issued
	unlisted  map[string]bool      // provider\x00model taken out of listings (listing.go)
	moved     chan struct{}        // closed and replaced each time Advance moves the clock (hold.go)
	closed    chan struct{}        // closed by Close: held requests end
	comfy     []*ComfyUI           // ComfyUI backends (comfyui.go)
	shutdown  map[string]time.Time // OpenAI models' announced shutdown dates (listing.go)
	listings  map[string]int       // model lists served, by provider (listing.go)
}

// Delivery is one webhook POST made by the emulator.
type Delivery struct {
	Provider string
	URL      string
	Header   http.Header
	Body     []byte
	Status   int // receiver's answer (0: transport error)
	Attempt  int // 0 the first POST, n its nth retry
}

// retry is a refused delivery due again at at.
type retry struct {
	d  Delivery
	at time.Time
}

type job struct {
	prov     string // "replicate" | "fal"
	id       string
	model    string // Replicate owner/name, fal endpoint
	version  string
	input    map[string]any
	webhook  string
	events   []string
	created  time.Time
	start    time.Time
	end      time.Time
	deadline time.Time // Cancel-After
	canceled time.Time // cancel effective at
	fail     string
	nsfw     bool
	video    bool

	sentStart, sentDone bool
}

// New starts an emulator.
func New(o Options) *Emulator {
	if o.Clock == nil {
		o.Clock = NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	}
	if o.ReplicateToken == "" {
		o.ReplicateToken = "r8_test"
	}
	if o.FalKey == "" {
		o.FalKey = "fal_test"
	}
	if o.GeminiKey == "" {
		o.GeminiKey = "gemini_test"
	}
	if o.OpenAIKey == "" {
		o.OpenAIKey = "sk-test"
	}
	if o.WebhookSecret == "" {
		o.WebhookSecret = DefaultWebhookSecret
	}
	if o.OutputTTL == 0 {
		o.OutputTTL = time.Hour
	}
	if o.PageSize == 0 {
		o.PageSize = 100
	}
	if o.WebhookClient == nil {
		o.WebhookClient = http.DefaultClient
	}
	if o.VertexProject == "" {
		o.VertexProject = DefaultVertexProject
	}
	if o.VertexLocation == "" {
		o.VertexLocation = DefaultVertexLocation
	}
	if o.FalUserID == "" {
		o.FalUserID = DefaultFalUserID
	}
	if o.FalSigningKey == nil {
		o.FalSigningKey = DefaultFalSigningKey
	}
	e := &Emulator{
		opts: o, clock: o.Clock, jobs: map[string]*job{}, counts: map[string]int{}, inFlight: map[string]int{}, peak: map[string]int{}, prompts: map[string]int{}, tokens: map[string]bool{},
		rng: rand.New(rand.NewPCG(1, 2)), release: make(chan struct{}), slowHits: make(chan Op, 64),
		falKeys: []ed25519.PrivateKey{o.FalSigningKey},
		moved:   make(chan struct{}), closed: make(chan struct{}),
	}
	e.Replicate = httptest.NewServer(e.wrap("replicate", http.HandlerFunc(e.replicate)))
	e.Fal = httptest.NewServer(e.wrap("fal", http.HandlerFunc(e.fal)))
	e.Google = httptest.NewServer(e.wrap("google", http.HandlerFunc(e.google)))
	e.Vertex = httptest.NewServer(e.wrap("vertex", http.HandlerFunc(e.vertex)))
	e.OpenAI = httptest.NewServer(e.wrap("openai", http.HandlerFunc(e.openai)))
	e.Files = httptest.NewServer(e.wrap("files", http.HandlerFunc(e.files)))
	return e
}

// Close stops the servers.
func (e *Emulator) Close() {
	e.Release()
	e.mu.Lock()
	select {
	case <-e.closed:
	default:
		close(e.closed)
	}
	e.mu.Unlock()
	e.Replicate.Close()
	e.Fal.Close()
	e.Google.Close()
	e.Vertex.Close()
	e.OpenAI.Close()
	e.Files.Close()
	e.closeComfy()
}

// Clock returns the emulator's clock.
func (e *Emulator) Clock() *Clock { return e.clock }

// Now is the emulator's time.
func (e *Emulator) Now() time.Time { return e.clock.Now() }

// Inject adds a fault rule (rules are tried in order).
func (e *Emulator) Inject(r Rule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rr := r
	e.rules = append(e.rules, &rr)
}

// ClearFaults removes every rule and the random faults.
func (e *Emulator) ClearFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rules = nil
	e.chaos = nil
	e.chaosRate = 0
}

// Chaos injects, into each call of an op listed in faults, one of its
// faults with probability rate (seeded, so runs repeat).
func (e *Emulator) Chaos(rate float64, seed uint64, faults map[Op][]Fault) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.chaosRate = rate
	e.chaos = faults
	e.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// SlowHits receives the op of every request held by FaultSlow.
func (e *Emulator) SlowHits() <-chan Op { return e.slowHits }

// Release lets every held (slow) request go on; later slow faults no
// longer hold.
func (e *Emulator) Release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.release:
	default:
		close(e.release)
	}
}

// Count returns how many calls of op reached provider ("replicate",
// "fal", "files"), faulted ones included.
func (e *Emulator) Count(provider string, op Op) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[provider+"/"+string(op)]
}

// PeakInFlight is the most requests to provider that were being answered
// at once (a synchronous call is in flight until its answer).
func (e *Emulator) PeakInFlight(provider string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.peak[provider]
}

// Jobs is the number of jobs created at provider.
func (e *Emulator) Jobs(provider string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, j := range e.order {
		if j.prov == provider {
			n++
		}
	}
	return n
}

// Models lists the vendor model of each job created at provider, in
// order (which model a catalog id reached).
func (e *Emulator) Models(provider string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, j := range e.order {
		if j.prov == provider {
			out = append(out, j.model)
		}
	}
	return out
}

// JobsByPrompt counts the jobs created at provider per prompt.
func (e *Emulator) JobsByPrompt(provider string) map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for k, v := range e.prompts {
		if p, prompt, _ := strings.Cut(k, "\x00"); p == provider {
			out[prompt] = v
		}
	}
	return out
}

// Deliveries lists the webhooks posted so far.
func (e *Emulator) Deliveries() []Delivery {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Delivery(nil), e.delivered...)
}

// Redeliver posts delivery i again, unchanged (a retry or a replay).
func (e *Emulator) Redeliver(i int) int {
	e.mu.Lock()
	d := e.delivered[i]
	e.mu.Unlock()
	return e.post(d.URL, d.Header, d.Body)
}

// Advance moves the clock on by d and delivers the webhooks due.
func (e *Emulator) Advance(d time.Duration) {
	e.clock.Set(e.clock.Now().Add(d))
	e.wake()
	e.Flush()
}

// AdvanceTo moves the clock to t (if later) and delivers the webhooks due.
func (e *Emulator) AdvanceTo(t time.Time) {
	e.clock.Set(t)
	e.wake()
	e.Flush()
}

// NextEvent is the earliest time after now at which a job changes phase
// (start or end) with a webhook still to deliver; ok is false when none.
func (e *Emulator) NextEvent() (t time.Time, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	for _, r := range e.retrying {
		at := r.at
		if at.Before(now) {
			at = now
		}
		if !ok || at.Before(t) {
			t, ok = at, true
		}
	}
	for _, j := range e.order {
		if j.webhook == "" {
			continue
		}
		for _, c := range []struct {
			at   time.Time
			done bool
		}{{j.start, j.sentStart || j.prov == "fal" || !j.wants("start")}, {j.doneAt(), j.sentDone}} {
			if c.done || c.at.IsZero() {
				continue
			}
			at := c.at
			if at.Before(now) {
				at = now
			}
			if !ok || at.Before(t) {
				t, ok = at, true
			}
		}
	}
	return t, ok
}

// Flush delivers every webhook due at the current time, in order.
func (e *Emulator) Flush() {
	e.stepComfy()
	for {
		d, ok := e.nextDelivery()
		if !ok {
			return
		}
		st := e.post(d.URL, d.Header, d.Body)
		e.mu.Lock()
		d.Status = st
		e.delivered = append(e.delivered, d)
		if (st < 200 || st > 299) && d.Attempt < len(e.opts.WebhookRetries) {
			e.retrying = append(e.retrying, retry{d: d, at: e.clock.Now().Add(e.opts.WebhookRetries[d.Attempt])})
		}
		e.mu.Unlock()
	}
}

func (e *Emulator) nextDelivery() (Delivery, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	for i, r := range e.retrying {
		if !r.at.After(now) {
			e.retrying = slices.Delete(e.retrying, i, i+1)
			r.d.Attempt++
			return r.d, true
		}
	}
	for _, j := range e.order {
		if j.webhook == "" {
			continue
		}
		ph := j.phase(now)
		if j.prov == "replicate" && !j.sentStart && j.wants("start") && ph != "queued" && !j.start.After(now) && j.canceled.IsZero() {
			j.sentStart = true
			return e.replicateHook(j, j.start, now), true
		}
		if !j.sentDone && terminal(ph) {
			j.sentDone = true
			j.sentStart = true
			if j.prov == "replicate" {
				if !j.wants("completed") {
					continue
				}
				return e.replicateHook(j, now, now), true
			}
			return e.falHook(j, now), true
		}
	}
	return Delivery{}, false
}

func (e *Emulator) post(url string, h http.Header, body []byte) int {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := e.opts.WebhookClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (j *job) wants(ev string) bool {
	if len(j.events) == 0 {
		return ev == "completed" || ev == "output"
	}
	for _, x := range j.events {
		if x == ev {
			return true
		}
	}
	return false
}

// doneAt is when the job reaches a terminal phase.
func (j *job) doneAt() time.Time {
	t := j.end
	if !j.canceled.IsZero() && j.canceled.Before(t) {
		t = j.canceled
	}
	if !j.deadline.IsZero() && j.deadline.Before(t) {
		t = j.deadline
	}
	return t
}

func terminal(ph string) bool {
	switch ph {
	case "succeeded", "failed", "canceled", "aborted":
		return true
	}
	return false
}

// phase is the job's phase at t and its progress.
func (j *job) phase(t time.Time) string {
	ph, _ := j.phaseProgress(t)
	return ph
}

func (j *job) phaseProgress(t time.Time) (string, float64) {
	if !j.deadline.IsZero() && !t.Before(j.deadline) && j.deadline.Before(j.end) {
		if j.deadline.Before(j.start) {
			return "aborted", 0
		}
		return "canceled", 0
	}
	if !j.canceled.IsZero() && !t.Before(j.canceled) {
		return "canceled", 0
	}
	switch {
	case t.Before(j.start):
		return "queued", 0
	case t.Before(j.end):
		return "running", float64(t.Sub(j.start)) / float64(j.end.Sub(j.start))
	case j.fail != "" || j.nsfw && j.prov == "replicate":
		return "failed", 1
	default:
		return "succeeded", 1
	}
}

func (e *Emulator) timing(model string) (time.Duration, time.Duration, bool) {
	video := isVideo(model)
	if e.opts.Timing != nil {
		q, r := e.opts.Timing(model)
		return q, r, video
	}
	if video {
		return 5 * time.Second, 175 * time.Second, true
	}
	return 500 * time.Millisecond, 1500 * time.Millisecond, false
}

func isVideo(model string) bool {
	m := strings.ToLower(model)
	for _, s := range []string{"kling", "video", "wan", "veo", "omni"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// newJob records a job (callers hold e.mu).
func (e *Emulator) newJob(prov, model string, input map[string]any) *job {
	e.seq++
	now := e.clock.Now()
	q, r, video := e.timing(model)
	j := &job{prov: prov, model: model, input: input, created: now, start: now.Add(q), end: now.Add(q + r), video: video}
	if prov == "replicate" {
		j.id = fmt.Sprintf("emu%023d", e.seq)
	} else {
		j.id = fmt.Sprintf("00000000-0000-4000-8000-%012d", e.seq)
	}
	prompt, _ := input["prompt"].(string)
	if strings.Contains(prompt, "[fail]") {
		j.fail = "failure requested by the [fail] token"
	}
	j.nsfw = strings.Contains(prompt, "[nsfw]")
	if d, ok := runToken(prompt); ok {
		j.start, j.end = now, now.Add(d)
	}
	e.jobs[j.id] = j
	e.order = append(e.order, j)
	e.prompts[prov+"\x00"+prompt]++
	return j
}

// outputs lists a finished job's file URLs.
func (e *Emulator) outputs(j *job) []string {
	if j.video {
		return []string{e.Files.URL + "/files/" + j.id + "/output.mp4"}
	}
	return []string{e.Files.URL + "/files/" + j.id + "/out-0.png"}
}

// wrap counts calls and applies faults. The op is decided by the
// provider's router through opOf.
func (e *Emulator) wrap(prov string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := opOf(prov, r)
		e.mu.Lock()
		e.counts[prov+"/"+string(op)]++
		e.inFlight[prov]++
		e.peak[prov] = max(e.peak[prov], e.inFlight[prov])
		f, after := e.faultFor(prov, op)
		release := e.release
		e.mu.Unlock()
		defer func() {
			e.mu.Lock()
			e.inFlight[prov]--
			e.mu.Unlock()
		}()
		switch f {
		case Fault429:
			if prov != "google" && prov != "vertex" { // Google says when in the body (RetryInfo)
				w.Header().Set("Retry-After", fmt.Sprint(int(after.Seconds())))
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			switch prov {
			case "replicate":
				w.Write(replicateThrottled(after))
			case "google", "vertex":
				w.Write(googleThrottled(after))
			case "openai":
				w.Write(openaiError("Rate limit reached for images per minute. Please try again later.", "requests", "rate_limit_exceeded"))
			default:
				w.Write([]byte(`{"detail":"Too many requests"}`))
			}
			return
		case Fault500:
			switch prov {
			case "google", "vertex":
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write(googleError(503, "UNAVAILABLE", "The model is overloaded. Please try again later."))
			case "openai":
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				w.Write(openaiError("The server had an error while processing your request. Sorry about that!", "server_error", ""))
			default:
				http.Error(w, `{"detail":"internal server error"}`, http.StatusInternalServerError)
			}
			return
		case FaultDrop:
			hijackClose(w)
			return
		case FaultSlow:
			select {
			case e.slowHits <- op:
			default:
			}
			select {
			case <-r.Context().Done():
				return
			case <-release:
			}
		case FaultLoseReply:
			next.ServeHTTP(discard{h: http.Header{}}, r)
			hijackClose(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (e *Emulator) faultFor(prov string, op Op) (Fault, time.Duration) {
	for i, r := range e.rules {
		if (r.Provider == "" || r.Provider == prov) && r.Op == op {
			if r.Times > 0 {
				r.Times--
				if r.Times == 0 {
					e.rules = append(e.rules[:i:i], e.rules[i+1:]...)
				}
			}
			return r.Fault, cmpOr(r.RetryAfter, 2*time.Second)
		}
	}
	if fs := e.chaos[op]; len(fs) > 0 && e.rng.Float64() < e.chaosRate {
		return fs[e.rng.IntN(len(fs))], 2 * time.Second
	}
	return FaultNone, 0
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func hijackClose(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

func opOf(prov string, r *http.Request) Op {
	p := r.URL.Path
	switch prov {
	case "files":
		return OpFile
	case "google":
		return googleOp(r)
	case "vertex":
		return vertexOp(r)
	case "openai":
		if r.Method == http.MethodPost {
			return OpCreate
		}
		return OpStatus
	case "replicate":
		switch {
		case r.Method == http.MethodGet && p == "/v1/predictions":
			return OpList
		case r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/webhooks/"):
			return OpSecret
		case r.Method == http.MethodPost && strings.HasSuffix(p, "/cancel"):
			return OpCancel
		case r.Method == http.MethodPost:
			return OpCreate
		default:
			return OpStatus
		}
	default:
		switch {
		case p == falJWKSPath:
			return OpJWKS
		case r.Method == http.MethodPost:
			return OpCreate
		case r.Method == http.MethodPut:
			return OpCancel
		case strings.HasSuffix(p, "/status"):
			return OpStatus
		case strings.HasSuffix(p, "/status/stream"):
			return OpStream
		default:
			return OpResult
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// Fixture reads testdata/<provider>/<name>.
func Fixture(provider, name string) []byte {
	b, err := os.ReadFile(filepath.Join(fixtureDir, provider, name))
	if err != nil {
		panic(err)
	}
	return b
}

// FixtureMap decodes a fixture into a fresh map.
func FixtureMap(provider, name string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(Fixture(provider, name), &m); err != nil {
		panic(err)
	}
	return m
}

var fixtureDir string

var pngBytes, mp4Bytes []byte

func init() {
	_, file, _, _ := runtime.Caller(0)
	fixtureDir = filepath.Join(filepath.Dir(file), "..")
	var s struct {
		Key string `json:"key"`
	}
	json.Unmarshal(Fixture("replicate", "webhook_secret.json"), &s)
	DefaultWebhookSecret = s.Key

	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	png.Encode(&b, img)
	pngBytes = b.Bytes()
	mp4Bytes = append([]byte{0, 0, 0, 0x18, 'f', 't', 'y', 'p', 'm', 'p', '4', '2', 0, 0, 0, 0, 'm', 'p', '4', '2', 'i', 's', 'o', 'm'}, bytes.Repeat([]byte{0}, 1000)...)
}

// PNG and MP4 are the bytes the file host serves.
func PNG() []byte { return pngBytes }
func MP4() []byte { return mp4Bytes }

// files serves /files/<job>/<name> while the job's outputs live, and
// /redirect?to=<url> (for redirect tests).
func (e *Emulator) files(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Goog-Api-Key") != "" || r.Header.Get("Authorization") != "" {
		// A vendor key must never reach the file host (Count "files"/"credential").
		e.mu.Lock()
		e.counts["files/credential"]++
		e.mu.Unlock()
	}
	if r.URL.Path == "/redirect" {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/files/"), "/")
	if len(parts) != 2 {
		http.NotFound(w, r)
		return
	}
	e.mu.Lock()
	j := e.jobs[parts[0]]
	now := e.clock.Now()
	ok := j != nil && j.phase(now) == "succeeded" && now.Before(j.end.Add(e.opts.OutputTTL))
	e.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if hostileFile(w, j) {
		return
	}
	if strings.HasSuffix(parts[1], ".mp4") {
		w.Header().Set("Content-Type", "video/mp4")
		w.Write(mp4Bytes)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Write(pngBytes)
}

func sha256Sum(s string) []byte {
	b := sha256.Sum256([]byte(s))
	return b[:]
}
