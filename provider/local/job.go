package local

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Prompt tokens that steer the simulation (see the package comment).
const (
	failToken   = "[fail]"
	slowToken   = "[slow]"
	failMessage = "the local provider refused this prompt ([fail] token)"
)

// A job spends queuePercent of its latency queued, entering the simulated
// queue at position queuePositions.
const (
	queuePercent   = 15
	queuePositions = 3
)

// record is one job as persisted in jobs/<id>.json. The state is not stored
// while it is still moving: it follows from SubmittedAt, Latency and the
// clock, so a restarted process carries on where the old one stopped.
type record struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	Model          string `json:"model"`
	Prompt         string `json:"prompt"`
	NegativePrompt string `json:"negativePrompt,omitempty"`
	AspectRatio    string `json:"aspectRatio"`
	Seed           int64  `json:"seed"`
	Duration       int    `json:"durationSeconds,omitempty"`
	// Input names the copy of the input image in jobs/. It is named by
	// its content, so a losing concurrent submit cannot overwrite it.
	Input         string `json:"input,omitempty"`
	InputMimeType string `json:"inputMimeType,omitempty"`
	// Extras are the further inputs (mask, references, last frame), kept
	// beside Input in the order the request gave them.
	Extras []extraFile `json:"extras,omitempty"`
	// Count is how many outputs the job makes (0 means 1, so records
	// written before outputs could be several read as one).
	Count       int           `json:"count,omitempty"`
	SubmittedAt time.Time     `json:"submittedAt"`
	Latency     time.Duration `json:"latencyNs"`

	// Final is set once the job is terminal, which it then stays even if
	// the clock steps back.
	Final       provider.State `json:"final,omitempty"`
	CancelledAt time.Time      `json:"cancelledAt,omitzero"`
	Output      string         `json:"output,omitempty"` // output 0's file name in outputs/<id>/
	OutputMime  string         `json:"outputMimeType,omitempty"`
	// More are outputs 1 and on; each has its own type, since a video's
	// ffmpeg conversion may fail for one and not another.
	More []outputFile `json:"more,omitempty"`
}

type outputFile struct {
	Name string `json:"name"`
	Mime string `json:"mimeType"`
}

// outputs lists r's rendered outputs in order.
func (r *record) outputs() []outputFile {
	if r.Output == "" {
		return nil
	}
	return append([]outputFile{{r.Output, r.OutputMime}}, r.More...)
}

// extraFile is one stored extra input.
type extraFile struct {
	Role     string `json:"role"`
	File     string `json:"file"` // in jobs/, named by content as Input is
	MimeType string `json:"mimeType"`
	Sum      string `json:"sha256"` // of the bytes: seeds the output without reading them
}

// count is how many outputs r makes.
func (r *record) count() int { return max(r.Count, 1) }

func hasToken(prompt, token string) bool {
	return strings.Contains(strings.ToLower(prompt), token)
}

// status is the job's state at now.
func (r *record) status(now time.Time) provider.Status {
	switch r.Final {
	case provider.StateCancelled:
		st := r.timeline(r.CancelledAt)
		return provider.Status{State: provider.StateCancelled, Progress: st.Progress, Message: "cancelled"}
	case provider.StateCompleted, provider.StateFailed:
		now = r.SubmittedAt.Add(r.Latency)
	}
	return r.timeline(now)
}

// timeline is the simulated course of an uncancelled job: queued for the
// first queuePercent of its latency, then running (or failing, for [fail]),
// then completed.
func (r *record) timeline(now time.Time) provider.Status {
	elapsed := max(now.Sub(r.SubmittedAt), 0)
	queue := r.Latency * queuePercent / 100
	switch {
	case elapsed < queue:
		left := float64(queue-elapsed) / float64(queue)
		pos := int(math.Ceil(left * queuePositions))
		return provider.Status{State: provider.StateQueued, Message: fmt.Sprintf("position %d in line", pos)}
	case hasToken(r.Prompt, failToken):
		return provider.Status{State: provider.StateFailed, Message: "refused", Error: failMessage}
	case elapsed < r.Latency:
		p := float64(elapsed-queue) / float64(r.Latency-queue)
		return provider.Status{State: provider.StateRunning, Progress: p, Message: "rendering"}
	}
	return provider.Status{State: provider.StateCompleted, Progress: 1, Message: "completed"}
}

// Job ids are "lj" and 32 hex digits: derived from the idempotency key, so
// Find is one file lookup and two submits with one key race for one file,
// or random when there is no key.
const jobIDPrefix = "lj"

func newJobID(idempotencyKey string) string {
	var b [16]byte
	if idempotencyKey == "" {
		rand.Read(b[:])
	} else {
		sum := sha256.Sum256([]byte("darkroom local job\x00" + idempotencyKey))
		copy(b[:], sum[:])
	}
	return jobIDPrefix + hex.EncodeToString(b[:])
}

// validJobID keeps foreign ids from naming paths outside our folders.
func validJobID(id string) bool {
	rest, ok := strings.CutPrefix(id, jobIDPrefix)
	if !ok || len(rest) != 32 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil && strings.ToLower(rest) == rest
}

func (p *Provider) jobPath(id string) string     { return filepath.Join(p.dir, "jobs", id+".json") }
func (p *Provider) inputPath(name string) string { return filepath.Join(p.dir, "jobs", name) }
func (p *Provider) outputDir(id string) string   { return filepath.Join(p.dir, "outputs", id) }

// load reads a job record; an unknown or malformed id is ErrNotFound.
func (p *Provider) load(id string) (*record, error) {
	if !validJobID(id) {
		return nil, fmt.Errorf("local: job %q: %w", id, provider.ErrNotFound)
	}
	data, err := os.ReadFile(p.jobPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("local: job %s: %w", id, provider.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("local: job %s: %w", id, err)
	}
	return &r, nil
}

// save replaces the job record; create writes it only if it does not exist
// yet and reports fs.ErrExist otherwise.
func (p *Provider) save(r *record, create bool) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(p.jobPath(r.ID), create, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeFile writes path atomically and durably: a temp file in the same
// folder is written, fsynced and then renamed over path (or, with
// exclusive, hard-linked to it so an existing file wins), and the folder is
// fsynced. A crash leaves the old file or the new one, never a torn one.
func writeFile(path string, exclusive bool, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil || exclusive {
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if err = write(bw); err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if exclusive {
		err = os.Link(tmp, path)
	} else {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable. Windows cannot fsync a folder and
// does not need to.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
