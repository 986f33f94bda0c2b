package provider

import (
	"context"
	"errors"
	"time"
)

// Signal is how an adapter learns that a job ended, fastest first where
// darkroom can be called back (a webhook), else what the vendor offers
// without a public URL.
type Signal string

const (
	// SignalWebhook: the vendor calls darkroom back (needs a public URL;
	// the runner then only polls as a slow safety net).
	SignalWebhook Signal = "webhook"
	// SignalStream: a connection held open carries every change of the
	// job until it ends (fal's status stream); see Watcher.
	SignalStream Signal = "stream"
	// SignalWaitOnCreate: the create call itself is held until the job
	// ends, up to a bound (Replicate's Prefer: wait); see SubmitWaiter.
	SignalWaitOnCreate Signal = "wait-on-create"
	// SignalSynchronous: the call that starts the job answers with its
	// result (OpenAI and Gemini image calls, the local provider).
	SignalSynchronous Signal = "synchronous"
	// SignalPoll: only asking again tells (Gemini and Vertex operations,
	// Replicate jobs too long to wait on).
	SignalPoll Signal = "poll"
)

// Signaller is implemented by adapters that declare how they learn of
// completion. Signal says it for model m, with a webhook URL available
// (webhook) or not. An adapter without it is polled.
type Signaller interface {
	Signal(m Model, webhook bool) Signal
}

// SignalOf is p's declared signal for m (SignalPoll when p declares none).
func SignalOf(p Provider, m Model, webhook bool) Signal {
	if s, ok := As[Signaller](p); ok {
		if sig := s.Signal(m, webhook); sig != "" {
			return sig
		}
	}
	return SignalPoll
}

// Watcher is implemented by adapters whose vendor streams a job's status
// (SignalStream). Watch holds one stream open until the job ends and
// returns its terminal status, read as Status would (outputs included).
// Each status the stream carries before that is handed to progress (nil:
// none). It returns an error, and the last status seen, when the stream
// could not be opened, dropped, stalled (no bytes for the adapter's
// keep-alive interval) or ctx ended first: the caller then polls at once.
// It never makes a job.
type Watcher interface {
	Watch(ctx context.Context, job Job, progress func(Status)) (Status, error)
}

// SubmitWaiter is implemented by adapters whose vendor can hold the
// create call until the job ends (SignalWaitOnCreate). SubmitWait is
// Submit, waiting up to wait for the job to end; it returns the job and
// the status the create's reply carried (terminal when the job ended in
// time, outputs included). Its contract on errors is Submit's: an error
// with no job means the outcome is unknown unless it wraps ErrNotCreated.
type SubmitWaiter interface {
	SubmitWait(ctx context.Context, req Request, wait time.Duration) (Job, Status, error)
}

// ErrStreamStalled is a Watcher's error for a stream that sent nothing
// for its keep-alive interval.
var ErrStreamStalled = errors.New("provider: status stream stalled")

// ErrStreamEnded is a Watcher's error for a stream that closed before
// the job ended.
var ErrStreamEnded = errors.New("provider: status stream ended before the job")
