// Package generation is darkroom's domain: the life of one generation from
// request to stored outputs, the durable runner that drives providers, cost
// and approval, and change events that wake waiters.
package generation

import (
	"context"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/ids"
	"github.com/darkroom-mcp/darkroom/provider"
	segjson "github.com/segmentio/encoding/json"
)

// Status is a generation's place in its life.
type Status string

const (
	StatusReserved  Status = "reserved" // awaiting an input upload or spend approval
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Terminal reports whether the status can never change again.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is one of the six statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusReserved, StatusQueued, StatusRunning, StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// ErrorKind tells a provider's refusal (shown to the model as a tool error)
// from a failure inside darkroom (a protocol-level failure for tasks) and
// from a reservation nobody completed (a task failure too, but nothing
// in darkroom went wrong).
type ErrorKind string

const (
	ErrorProvider ErrorKind = "provider"
	ErrorInternal ErrorKind = "internal"
	ErrorExpired  ErrorKind = "expired"
)

// Params are the request parameters beyond model and prompt.
type Params struct {
	AspectRatio     string `json:"aspectRatio"`
	NegativePrompt  string `json:"negativePrompt,omitempty"`
	Seed            *int64 `json:"seed,omitempty"`
	DurationSeconds int    `json:"durationSeconds,omitempty"`
	// InputImage is the main input image (role image, or first_frame for
	// a video model).
	InputImage *InputFile `json:"inputImage,omitempty"`
	// Inputs are the further input files by role (a mask, references, a
	// last frame), in the order given.
	Inputs []InputFile `json:"inputs,omitempty"`
	// Count is how many outputs were asked for (omitted: 1).
	Count int `json:"count,omitempty"`
	// Input are the caller's provider-native fields, as validated.
	Input map[string]any `json:"input,omitempty"`
	// AwaitsImage marks a generation reserved until upload_input brings
	// its main image, Awaits the further roles it still waits for, and
	// AwaitsApproval one reserved until its spend is approved; it is
	// queued once none holds.
	AwaitsImage    bool     `json:"awaitsImage,omitempty"`
	Awaits         []string `json:"awaits,omitempty"`
	AwaitsApproval bool     `json:"awaitsApproval,omitempty"`
}

// Outputs is how many outputs the generation was asked for.
func (p Params) Outputs() int { return max(p.Count, 1) }

// files lists every input file, the main image first.
func (p Params) files() []*InputFile {
	var out []*InputFile
	if p.InputImage != nil {
		out = append(out, p.InputImage)
	}
	for i := range p.Inputs {
		out = append(out, &p.Inputs[i])
	}
	return out
}

// awaitsInput reports whether an input is still to upload.
func (p Params) awaitsInput() bool { return p.AwaitsImage || len(p.Awaits) > 0 }

// StoredBlob is a file darkroom keeps in its blob store.
type StoredBlob struct {
	Key      string `json:"key"`
	MimeType string `json:"mimeType"`
	Bytes    int64  `json:"bytes"`
	SHA256   string `json:"sha256"`
}

// Output is one stored result file.
type Output struct {
	StoredBlob
	Width           int     `json:"width,omitempty"`
	Height          int     `json:"height,omitempty"`
	DurationSeconds float64 `json:"durationSeconds,omitempty"`
	// Preview is the inline preview stored beside the file (nil: none),
	// recorded so rendering knows without asking the blob store.
	Preview *Preview `json:"preview,omitempty"`
}

// Preview describes an output's inline preview (see package preview).
type Preview struct {
	Key      string `json:"key"`
	MimeType string `json:"mimeType"`
	Bytes    int64  `json:"bytes"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
}

// Generation is the durable record, decoded.
type Generation struct {
	ID              string
	Owner           string
	ModelID         string
	Provider        string
	Kind            provider.Kind
	Prompt          string
	Params          Params
	Credits         int64
	Charged         int64
	Status          Status
	StatusMessage   string
	Progress        float64
	Outputs         []Output
	ErrorKind       ErrorKind
	ErrorMessage    string
	IdempotencyKey  string
	CancelRequested bool
	Submitted       bool // handed to the provider (or possibly, after a crash)
	OutputsExpired  bool // retention passed: the output files are deleted
	SubmittedAt     time.Time
	Checks          int64 // runner steps so far (status looks, once submitted)
	CreatedAt       time.Time
	UpdatedAt       time.Time
	// PreviewFrames is how many live preview frames the provider of a
	// Previewing generation sent (livepreview.go), as the Observer sees
	// it; 0 elsewhere (a read of the row alone does not fill it).
	PreviewFrames int
}

// InputFiles lists the generation's input files, the main image first,
// each with its role.
func (g *Generation) InputFiles() []InputFile {
	var out []InputFile
	for _, f := range g.Params.files() {
		in := *f
		if in.Role == "" { // recorded before roles
			in.Role = MainRole(g.Kind)
		}
		out = append(out, in)
	}
	return out
}

// UploadRequired reports whether the generation waits for an input file.
func (g *Generation) UploadRequired() bool {
	return g.Status == StatusReserved && g.Params.awaitsInput()
}

// AwaitedRoles lists the roles upload_input must still bring, the main
// image's first; none unless UploadRequired.
func (g *Generation) AwaitedRoles() []string {
	if !g.UploadRequired() {
		return nil
	}
	var roles []string
	if g.Params.AwaitsImage {
		roles = append(roles, MainRole(g.Kind))
	}
	return append(roles, g.Params.Awaits...)
}

// readIn reads a generation as transaction tx sees it.
func readIn(ctx context.Context, tx Tx, id string) (*Generation, error) {
	r, err := tx.Generation(ctx, id)
	if err != nil {
		return nil, err
	}
	return fromRow(r)
}

func fromRow(r Row) (*Generation, error) {
	g := &Generation{
		ID:              r.ID,
		Owner:           r.Owner,
		ModelID:         r.ModelID,
		Provider:        r.Provider,
		Kind:            provider.Kind(r.Kind),
		Prompt:          r.Prompt,
		Credits:         r.Credits,
		Charged:         r.Charged,
		Status:          r.Status,
		StatusMessage:   r.StatusMessage,
		Progress:        r.Progress,
		ErrorKind:       r.ErrorKind,
		ErrorMessage:    r.ErrorMessage,
		IdempotencyKey:  r.IdempotencyKey,
		CancelRequested: r.CancelRequested != 0,
		Submitted:       r.SubmitState != "",
		OutputsExpired:  r.OutputsExpired,
		SubmittedAt:     r.SubmittedAt.UTC(),
		Checks:          r.Attempts,
		CreatedAt:       r.CreatedAt.UTC(),
		UpdatedAt:       r.UpdatedAt.UTC(),
	}
	// The columns are darkroom's own encoding/json output, read on every
	// poll: segmentio's decoder reads them the same, in a third of the time.
	if err := segjson.Unmarshal([]byte(r.Params), &g.Params); err != nil {
		return nil, err
	}
	switch r.Outputs {
	case "[]":
		g.Outputs = []Output{}
	default:
		if err := segjson.Unmarshal([]byte(r.Outputs), &g.Outputs); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// NewID returns a new generation id (see package ids).
func NewID() string { return ids.New() }
