package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Receiver is a webhook endpoint for tests: it hands each delivery to a
// provider's ParseWebhook, answers like the server should (401 on a bad
// signature, 400 on a bad body, 200 otherwise) and queues the events.
type Receiver struct {
	Server *httptest.Server
	Events chan provider.WebhookEvent

	mu       sync.Mutex
	statuses map[int]int
}

// NewReceiver starts a receiver for parser.
func NewReceiver(parser provider.WebhookParser) *Receiver {
	rc := &Receiver{Events: make(chan provider.WebhookEvent, 4096), statuses: map[int]int{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		code := http.StatusOK
		var ev provider.WebhookEvent
		if err == nil {
			ev, err = parser.ParseWebhook(r.Context(), r.Header, r.URL.Query(), body)
		}
		switch {
		case errors.Is(err, provider.ErrWebhookUnauthenticated):
			code = http.StatusUnauthorized
		case errors.Is(err, provider.ErrWebhookUnverifiable):
			code = http.StatusServiceUnavailable
		case err != nil:
			code = http.StatusBadRequest
		default:
			rc.Events <- ev
		}
		rc.mu.Lock()
		rc.statuses[code]++
		rc.mu.Unlock()
		w.WriteHeader(code)
	}))
	return rc
}

// Answers counts the receiver's answers by status code.
func (rc *Receiver) Answers(code int) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.statuses[code]
}

// URL is where providers should post.
func (rc *Receiver) URL() string { return rc.Server.URL + "/webhooks" }

// Close stops the receiver.
func (rc *Receiver) Close() { rc.Server.Close() }

// Driver steps one generation through a provider the way darkroom's
// runner does: Submit; on an unknown outcome Find (or, for a provider with
// DuplicateRisk, wait for a webhook naming the key); then poll with
// provider.NextPoll, or wait for webhooks with a safety poll; retry
// RetryableErrors after their After; read every output at the end. Time
// is the emulator's clock: every wait advances it, nothing sleeps.
type Driver struct {
	Em       *Emulator
	P        provider.Provider
	Receiver *Receiver // nil: no webhooks
	Jitter   func(time.Duration) time.Duration
	// MaxSteps bounds the loop (default 2000).
	MaxSteps int
	// AwaitWebhook bounds the wait for a webhook after a lost fal submit
	// (default 4× the expected duration + 1 min).
	AwaitWebhook time.Duration
}

// Result is what a drive did.
type Result struct {
	Job         provider.Job
	Final       provider.Status
	Outputs     [][]byte
	Submits     int // Submit calls
	Finds       int // Find calls
	StatusCalls int // Status calls made by the driver (retries included)
	Webhooks    int // non-duplicate webhook events applied
	Elapsed     time.Duration
}

func (d *Driver) wait(dur time.Duration) {
	if dur <= 0 {
		dur = time.Millisecond
	}
	target := d.Em.Now().Add(dur)
	if d.Receiver != nil {
		if t, ok := d.Em.NextEvent(); ok && t.Before(target) {
			d.Em.AdvanceTo(t)
			return
		}
	}
	d.Em.AdvanceTo(target)
}

func retryAfter(err error, n int) time.Duration {
	var re *provider.RetryableError
	if errors.As(err, &re) && re.After > 0 {
		return re.After
	}
	return time.Duration(min(n+1, 30)) * time.Second
}

// Run drives req to a terminal state.
func (d *Driver) Run(ctx context.Context, req provider.Request) (Result, error) {
	var res Result
	maxSteps := d.MaxSteps
	if maxSteps == 0 {
		maxSteps = 2000
	}
	if d.Receiver != nil {
		req.WebhookURL = d.Receiver.URL()
	}
	expected := req.Model.ExpectedDuration
	start := d.Em.Now()
	var submittedAt, awaitUntil time.Time
	var job provider.Job
	phase := "new"
	fails, checks := 0, 0
	lastProg, lastState := -1.0, provider.State("")
	progressed := false

	// apply records a status; it returns the next phase.
	apply := func(st provider.Status) string {
		res.Final = st
		progressed = lastState != "" && (st.Progress > lastProg || st.State != lastState)
		lastProg, lastState = st.Progress, st.State
		if st.State.Terminal() {
			return "done"
		}
		return "wait"
	}

	for step := 0; step < maxSteps; step++ {
		switch phase {
		case "new":
			res.Submits++
			j, err := d.P.Submit(ctx, req)
			if err != nil {
				var perm *provider.PermanentError
				if errors.As(err, &perm) {
					return res, err
				}
				fails++
				if !errors.Is(err, provider.ErrNotCreated) {
					phase = "submitting"
				}
				d.wait(retryAfter(err, fails))
				continue
			}
			fails = 0
			job, submittedAt, phase = j, d.Em.Now(), "call"
		case "submitting":
			res.Finds++
			j, ok, err := d.P.Find(ctx, req.IdempotencyKey)
			switch {
			case err == nil && ok:
				job, submittedAt, phase = j, d.Em.Now(), "call"
			case err == nil:
				phase = "new"
			case errors.Is(err, provider.ErrUnsupported):
				if dr, ok := d.P.(provider.DuplicateRisk); ok && dr.ResubmitMayDuplicate() {
					if d.Receiver == nil {
						return res, fmt.Errorf("submit outcome unknown and %s cannot reconcile without webhooks: %w", d.P.Name(), err)
					}
					phase = "await"
					wait := d.AwaitWebhook
					if wait == 0 {
						wait = 4*expected + time.Minute
					}
					awaitUntil = d.Em.Now().Add(wait)
				} else {
					phase = "new"
				}
			default:
				fails++
				d.wait(retryAfter(err, fails))
			}
		case "await":
			if ev, ok := d.takeEvent(req.IdempotencyKey, ""); ok {
				// Bind the job named by the verified webhook, rebuilt
				// for our own model; the Status call that follows
				// confirms it exists.
				if rb, ok := d.P.(provider.JobRebuilder); ok {
					if j, err := rb.RebuildJob(req.Model, ev.JobID); err == nil {
						job, submittedAt, phase = j, d.Em.Now(), "call"
						continue
					}
				}
			}
			if !d.Em.Now().Before(awaitUntil) {
				return res, fmt.Errorf("submit outcome unknown: no webhook for %s", req.IdempotencyKey)
			}
			d.wait(time.Minute)
		case "call":
			res.StatusCalls++
			checks++
			st, err := d.P.Status(ctx, job)
			if err != nil {
				var perm *provider.PermanentError
				if errors.As(err, &perm) {
					return res, err
				}
				fails++
				d.wait(retryAfter(err, fails))
				continue
			}
			fails = 0
			phase = apply(st)
		case "wait":
			delay := provider.NextPoll(expected, d.Em.Now().Sub(submittedAt), checks, progressed, d.Receiver != nil, d.Jitter)
			deadline := d.Em.Now().Add(delay)
			phase = "call"
			for d.Em.Now().Before(deadline) {
				d.wait(deadline.Sub(d.Em.Now()))
				if d.Receiver == nil {
					continue
				}
				st, trusted, any := d.drain(job, &res)
				if !any {
					continue
				}
				if trusted {
					phase = apply(st) // a signed delivery: no call needed
				}
				break // an untrusted one: look now
			}
		case "done":
			res.Job = job
			res.Elapsed = d.Em.Now().Sub(start)
			if res.Final.State != provider.StateCompleted {
				return res, nil
			}
			for _, o := range res.Final.Outputs {
				b, err := d.readOutput(ctx, job, o)
				if err != nil {
					return res, err
				}
				res.Outputs = append(res.Outputs, b)
			}
			return res, nil
		}
	}
	return res, fmt.Errorf("gave up after %d steps", maxSteps)
}

// drain takes the queued webhook events about job. any reports there was
// at least one; trusted that the last trusted one carried st.
func (d *Driver) drain(job provider.Job, res *Result) (st provider.Status, trusted, any bool) {
	for {
		select {
		case ev := <-d.Receiver.Events:
			if ev.Duplicate || !ev.Trusted || ev.JobID != job.ID {
				continue
			}
			res.Webhooks++
			any = true
			if ev.Trusted && ev.Status != nil {
				st, trusted = *ev.Status, true
			}
		default:
			return st, trusted, any
		}
	}
}

// takeEvent returns the first queued event for key (or job id).
func (d *Driver) takeEvent(key, jobID string) (provider.WebhookEvent, bool) {
	for {
		select {
		case ev := <-d.Receiver.Events:
			if ev.Duplicate || !ev.Trusted {
				continue
			}
			if (key != "" && ev.Key == key) || (jobID != "" && ev.JobID == jobID) {
				return ev, true
			}
		default:
			return provider.WebhookEvent{}, false
		}
	}
}

func (d *Driver) readOutput(ctx context.Context, job provider.Job, o provider.Output) ([]byte, error) {
	var last error
	for i := 0; i < 20; i++ {
		rc, err := d.P.OpenOutput(ctx, job, o)
		if err == nil {
			b, err := io.ReadAll(rc)
			rc.Close()
			if err == nil {
				return b, nil
			}
		}
		var perm *provider.PermanentError
		if errors.As(err, &perm) {
			return nil, err
		}
		last = err
		d.wait(retryAfter(err, i))
	}
	return nil, fmt.Errorf("output never readable: %w", last)
}
