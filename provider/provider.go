// Package provider defines what darkroom needs from a media-generation
// provider, in darkroom's own vocabulary. Each provider lives in a
// sub-package (local, replicate, fal) and maps its wire words onto these.
//
// A provider knows nothing of MCP, SQL or storage: the runner in package
// generation persists whatever a provider hands back (a Job) and gives it
// back on every later call, so a provider may be stateless across restarts.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"
)

// Kind is what a model produces.
type Kind string

const (
	KindImage Kind = "image"
	KindVideo Kind = "video"
)

// Model is one entry of a provider's catalog.
type Model struct {
	ID              string   `json:"modelId"`
	Provider        string   `json:"provider"`
	Kind            Kind     `json:"kind"`
	Title           string   `json:"title"`
	Description     string   `json:"description"`
	Credits         int64    `json:"credits"`
	AspectRatios    []string `json:"aspectRatios"`
	Durations       []int    `json:"durations,omitempty"` // seconds, video only
	NeedsInputImage bool     `json:"needsInputImage"`
	// AcceptsInputImage: an input image is optional (it guides the result).
	AcceptsInputImage bool `json:"acceptsInputImage,omitempty"`
	// MaxCount is the most outputs one call may ask for (0 means 1).
	MaxCount int `json:"maxCount,omitempty"`
	// Roles are the further input roles the model takes (RoleMask,
	// RoleReference, RoleLastFrame), each with how many at most. The main
	// input image (RoleImage, or RoleFirstFrame for video) is
	// NeedsInputImage/AcceptsInputImage.
	Roles map[string]int `json:"roles,omitempty"`
	// PriceUnit is what Credits is the price of: "run" (one call),
	// "image" (each output), "second" (of video, charged for the default
	// duration) or "megapixel".
	PriceUnit        string        `json:"priceUnit,omitempty"`
	ExpectedDuration time.Duration `json:"-"` // typical time from submit to completion
}

// Input roles: what an input file is for.
const (
	RoleImage      = "image"       // the image to edit or start from
	RoleMask       = "mask"        // where an edit may change the image
	RoleReference  = "reference"   // a style or subject reference
	RoleFirstFrame = "first_frame" // a video's first frame (the main input of a video model)
	RoleLastFrame  = "last_frame"  // a video's last frame
)

// Roles lists every input role, in the order docs name them.
var Roles = []string{RoleImage, RoleMask, RoleReference, RoleFirstFrame, RoleLastFrame}

// Input is an input image already stored by darkroom. Providers that need a
// URL get one that stays valid long enough for the job; the local provider
// reads the bytes through Open.
type Input struct {
	// Role is what an Extra input is for (RoleMask, RoleReference,
	// RoleLastFrame); empty for the main input image.
	Role     string
	MimeType string
	URL      string
	Open     func(ctx context.Context) (io.ReadCloser, error)
}

// Request is one generation to submit.
type Request struct {
	// IdempotencyKey is darkroom's generation id. Providers that support an
	// idempotency token send it, so a retried submit never makes two jobs.
	IdempotencyKey  string
	Model           Model
	Prompt          string
	NegativePrompt  string
	AspectRatio     string // "16:9", "1:1", ...
	Seed            int64
	DurationSeconds int // video only
	// Count is how many outputs to make (0 means 1; at most Model.MaxCount).
	Count      int
	InputImage *Input
	// Extra are further input files by role, for models that take them
	// (an edit mask, a video's last frame, reference images).
	Extra []Input
	// Input are provider-native input fields, validated against the
	// model's schema before the generation was stored; they are sent as
	// they are, beside the fields darkroom's own arguments map to.
	Input map[string]any
	// Deadline is when darkroom gives up on the job (provider-side
	// cancel-after where supported).
	Deadline time.Time
	// WebhookURL is set when darkroom can receive webhooks for this job.
	WebhookURL string
}

// Job is a provider's handle for one submitted request. Data holds whatever
// the provider needs to poll, fetch and cancel later (for fal: status,
// response and cancel URLs); it is persisted verbatim at submit time.
type Job struct {
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data,omitempty"`
}

// State is darkroom's view of a provider job.
type State string

const (
	StateQueued    State = "queued"
	StateRunning   State = "running"
	StateCompleted State = "completed"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
)

// Terminal reports whether no further change is expected.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// Output is one result file, as the provider offers it.
type Output struct {
	// URL is where the provider serves the file; the local provider uses
	// "local:" URLs that only it can open.
	URL      string `json:"url"`
	MimeType string `json:"mimeType,omitempty"`
}

// MaxOutputBytes bounds one output file of kind k as darkroom takes it
// from a provider (a reply's image into the spool, a download into the
// blob store); past it the output is refused and the generation fails,
// refunded. 128 MiB holds any image within the decode budget
// (preview.MaxPixels) even uncompressed, some ten times what image models
// return; 2 GiB holds minutes of high-bitrate video.
func MaxOutputBytes(k Kind) int64 {
	if k == KindVideo {
		return 2 << 30
	}
	return 128 << 20
}

// Status is one observation of a job.
type Status struct {
	State    State
	Progress float64 // 0..1, best effort
	Message  string  // human-readable: queue position, percent, provider message
	Outputs  []Output
	// Error is set when State is StateFailed: the provider's own message
	// (bad prompt, safety filter, ...). It reaches the client as an isError
	// tool result, not as a protocol error.
	Error string
	// NotBilled, with StateFailed, says the vendor bills nothing for this
	// failure (fal: a request that failed with a 5xx), so the runner
	// refunds it whether or not the provider implements RefundsFailures.
	NotBilled bool
	// StartedAt, when the vendor says, is when the job started running
	// (Replicate's started_at): the runner aims its next look at the end
	// it predicts (NextPollElapsed).
	StartedAt time.Time
}

// Provider is one media-generation backend.
type Provider interface {
	// Name is the provider's id in the catalog, e.g. "local", "replicate".
	Name() string
	// Models lists the models this provider serves.
	Models() []Model
	// Submit starts a job. It must be safe to call again with the same
	// IdempotencyKey after an unknown outcome where the provider supports
	// idempotency; otherwise the runner calls Find first.
	Submit(ctx context.Context, req Request) (Job, error)
	// Find looks for a job submitted earlier with this idempotency key, for
	// reconciling a submit whose reply was lost. ok is false when there is
	// none. Providers that cannot tell return ErrUnsupported.
	Find(ctx context.Context, idempotencyKey string) (job Job, ok bool, err error)
	// Status reports the job's current state.
	Status(ctx context.Context, job Job) (Status, error)
	// Cancel asks the provider to stop the job. It returns the state after
	// the request: StateCancelled only if the provider confirms.
	Cancel(ctx context.Context, job Job) (Status, error)
	// OpenOutput streams one output file. The caller closes it.
	OpenOutput(ctx context.Context, job Job, out Output) (io.ReadCloser, error)
}

// ErrUnsupported is returned by optional operations a provider cannot do.
var ErrUnsupported = errors.New("provider: operation not supported")

// ErrNotFound is returned when the provider does not know the job.
var ErrNotFound = errors.New("provider: job not found")

// PermanentError is a provider refusal that retrying cannot fix (invalid
// input, authentication, safety filter). The generation ends failed with
// Message shown to the client.
type PermanentError struct{ Message string }

func (e *PermanentError) Error() string { return e.Message }

// RetryableError is a transient fault (rate limit, 5xx, network); After,
// when non-zero, is how long the provider asked us to wait.
type RetryableError struct {
	Err   error
	After time.Duration
}

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// Wrapper is a Provider that wraps another (metrics, say): As looks
// through it for the wrapped provider's optional interfaces.
type Wrapper interface {
	Unwrap() Provider
}

// As finds an optional interface (WebhookParser, DuplicateRisk,
// JobRebuilder, ...) on p or on a provider it wraps.
func As[T any](p Provider) (T, bool) {
	for p != nil {
		if t, ok := p.(T); ok {
			return t, true
		}
		w, ok := p.(Wrapper)
		if !ok {
			break
		}
		p = w.Unwrap()
	}
	var zero T
	return zero, false
}
