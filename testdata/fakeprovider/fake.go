// Package fakeprovider is a provider defined for tests, over an
// in-memory vendor: what a provider written outside darkroom's own
// adapters looks like. provider/providertest runs its contract against it
// (TestFake, and TestMutants with a fault planted at a time), and
// cmd/darkroom registers it with one line to serve generate through it
// (TestAddProviderFromTestPackage).
package fakeprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/providertest"
)

// Name is the provider's name.
const Name = "fake"

// NewVendor is a vendor whose clock stands at start until Advance.
func NewVendor(start time.Time) *Vendor {
	return &Vendor{now: start, jobs: map[string]*fakeJob{}}
}

// New is an adapter over v; a second one over the same vendor is the
// adapter after a restart.
func New(v *Vendor) *Provider { return &Provider{v: v} }

// Advance moves the vendor's clock: a job is queued for its first
// second, running for its second, then done.
func (v *Vendor) Advance(d time.Duration) { v.mu.Lock(); v.now = v.now.Add(d); v.mu.Unlock() }

// Down makes every call a refused connection.
func (v *Vendor) Down() { v.mu.Lock(); v.down = true; v.mu.Unlock() }

// Jobs counts the jobs the vendor made.
func (v *Vendor) Jobs() int { v.mu.Lock(); defer v.mu.Unlock(); return len(v.jobs) }

// Unlist takes the model out of the vendor's listing.
func (v *Vendor) Unlist() { v.mu.Lock(); v.unlisted = true; v.mu.Unlock() }

// Fault scripts the next call of op to fail with f (after is a 429's
// hint).
func (v *Vendor) Fault(op providertest.Op, f providertest.Fault, after time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.fault = map[providertest.Op]fakeFault{op: {f, after}}
}

// onePixel is a real PNG, an output any reader takes.
var onePixel = func() []byte {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewGray(image.Rect(0, 0, 1, 1)))
	return b.Bytes()
}()

// Mutant names the one fault providertest's TestMutants plants in the
// fake ("" none): each must fail the check that names it.
var Mutant string

// Model is the fake's one model.
var Model = provider.Model{ID: "fake-model", Provider: Name, Title: "Fake image", Credits: 5, Kind: provider.KindImage, AspectRatios: []string{"1:1"}, MaxCount: 4, ExpectedDuration: 2 * time.Second}

type fakeFault struct {
	f     providertest.Fault
	after time.Duration
}

// Vendor runs jobs on its clock: queued for a second, running for
// one, then done ([fail] failed, [safety] refused by the safety system).
type Vendor struct {
	mu       sync.Mutex
	now      time.Time
	jobs     map[string]*fakeJob
	fault    map[providertest.Op]fakeFault
	down     bool
	unlisted bool
}

type fakeJob struct {
	key, prompt string
	count       int
	created     time.Time
	cancelled   bool
}

// take returns and clears the fault scripted for op; an outage is a
// refused connection. The caller holds v.mu.
func (v *Vendor) take(op providertest.Op) error {
	if v.down {
		return &provider.RetryableError{Err: fmt.Errorf("fake: connection refused: %w", provider.ErrNotCreated)}
	}
	f, ok := v.fault[op]
	if !ok || f.f == providertest.FaultLoseReply {
		return nil
	}
	delete(v.fault, op)
	if f.f == providertest.FaultThrottle {
		if Mutant == "no-hint" {
			f.after = 0
		}
		return &provider.RetryableError{Err: fmt.Errorf("fake: 429: %w", provider.ErrNotCreated), After: f.after}
	}
	if f.f == providertest.FaultDrop {
		if Mutant == "drop-not-created" {
			return &provider.RetryableError{Err: fmt.Errorf("fake: connection reset: %w", provider.ErrNotCreated)}
		}
		return &provider.RetryableError{Err: errors.New("fake: connection reset")}
	}
	return &provider.RetryableError{Err: errors.New("fake: 500")}
}

// Provider is the adapter: all it keeps is in the vendor.
type Provider struct {
	v    *Vendor
	mine sync.Map // job ids this instance submitted (the instance-state Mutant's memory)
}

func (p *Provider) Name() string             { return Name }
func (p *Provider) Models() []provider.Model { return []provider.Model{Model} }
func (p *Provider) RefundsFailures() bool    { return Mutant != "no-refund" }
func (p *Provider) Ping(ctx context.Context) error {
	if Mutant == "ping-lies" {
		return nil
	}
	_, err := p.Listed(ctx)
	return err
}
func jobOf(id string) provider.Job { return provider.Job{ID: id, Data: json.RawMessage(`{}`)} }
func (j *fakeJob) has(o providertest.Outcome) bool {
	return strings.Contains(j.prompt, "["+string(o)+"]")
}

func (p *Provider) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	v := p.v
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.take(providertest.OpSubmit); err != nil {
		return provider.Job{}, err
	}
	if strings.Contains(req.Prompt, "[quota]") {
		return provider.Job{}, &provider.PermanentError{Message: "fake: credit used up"}
	}
	id := fmt.Sprintf("job-%d", len(v.jobs)+1)
	v.jobs[id] = &fakeJob{key: req.IdempotencyKey, prompt: req.Prompt, count: max(req.Count, 1), created: v.now}
	if Mutant == "count-ignored" {
		v.jobs[id].count = 1
	}
	if f, ok := v.fault[providertest.OpSubmit]; ok && f.f == providertest.FaultLoseReply {
		delete(v.fault, providertest.OpSubmit)
		if Mutant == "lost-not-created" {
			return provider.Job{}, &provider.RetryableError{Err: fmt.Errorf("fake: connection reset: %w", provider.ErrNotCreated)}
		}
		return provider.Job{}, &provider.RetryableError{Err: errors.New("fake: connection reset")}
	}
	p.mine.Store(id, true)
	return jobOf(id), nil
}

func (p *Provider) Find(ctx context.Context, key string) (provider.Job, bool, error) {
	v := p.v
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.down {
		return provider.Job{}, false, &provider.RetryableError{Err: errors.New("fake: connection refused")}
	}
	for id, j := range v.jobs {
		if j.key == key && Mutant != "find-forgets" {
			return jobOf(id), true, nil
		}
	}
	return provider.Job{}, false, nil
}

func (p *Provider) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	v := p.v
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := p.mine.Load(job.ID); !ok && Mutant == "instance-state" {
		return provider.Status{}, provider.ErrNotFound
	}
	if v.down && Mutant == "outage-fails" {
		return provider.Status{State: provider.StateFailed, Error: "fake: unreachable"}, nil
	}
	if err := v.take(providertest.OpStatus); err != nil {
		return provider.Status{}, err
	}
	j, ok := v.jobs[job.ID]
	if !ok {
		return provider.Status{}, provider.ErrNotFound
	}
	age := v.now.Sub(j.created)
	switch {
	case j.cancelled:
		return provider.Status{State: provider.StateCancelled}, nil
	case age < time.Second:
		return provider.Status{State: provider.StateQueued}, nil
	case age < 2*time.Second:
		progress := float64(age-time.Second) / float64(time.Second)
		if Mutant == "progress-back" {
			progress = 1 - progress
		}
		return provider.Status{State: provider.StateRunning, Progress: progress}, nil
	case j.has(providertest.OutcomeFail):
		return provider.Status{State: provider.StateFailed, Progress: 1, Error: "fake: the job failed"}, nil
	case j.has(providertest.OutcomeAppError):
		return provider.Status{State: provider.StateFailed, Progress: 1, Error: "fake: the app crashed (500)", NotBilled: Mutant != "no-refund"}, nil
	case j.has(providertest.OutcomeSafety):
		return provider.Status{State: provider.StateFailed, Progress: 1, Error: "fake: refused by the safety system", NotBilled: Mutant != "no-refund"}, nil
	}
	st := provider.Status{State: provider.StateCompleted, Progress: 1}
	for i := range j.count {
		st.Outputs = append(st.Outputs, provider.Output{URL: fmt.Sprintf("fake:%s/%d", job.ID, i), MimeType: "image/png"})
	}
	return st, nil
}

func (p *Provider) Cancel(ctx context.Context, job provider.Job) (provider.Status, error) {
	p.v.mu.Lock()
	if j, ok := p.v.jobs[job.ID]; ok && p.v.now.Sub(j.created) < 2*time.Second && Mutant != "cancel-ignored" {
		j.cancelled = true
	}
	p.v.mu.Unlock()
	return p.Status(ctx, job)
}

// OpenOutput serves only the fake's own outputs, streamed: a large one
// is zeros read as they go.
func (p *Provider) OpenOutput(ctx context.Context, job provider.Job, out provider.Output) (io.ReadCloser, error) {
	if Mutant == "any-url" && strings.HasPrefix(out.URL, "http") {
		resp, err := http.Get(out.URL)
		if err != nil {
			return nil, err
		}
		return resp.Body, nil
	}
	if !strings.HasPrefix(out.URL, "fake:"+job.ID+"/") {
		return nil, &provider.PermanentError{Message: "fake: not an output of this job: " + out.URL}
	}
	p.v.mu.Lock()
	j := p.v.jobs[job.ID]
	p.v.mu.Unlock()
	png := onePixel
	if j.has(providertest.OutcomeLarge) {
		r := io.MultiReader(bytes.NewReader(png), io.LimitReader(zeros{}, providertest.LargeOutputBytes))
		if Mutant == "held-whole" {
			b, _ := io.ReadAll(r)
			r = bytes.NewReader(b)
		}
		return io.NopCloser(r), nil
	}
	return io.NopCloser(bytes.NewReader(png)), nil
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// Listed implements provider.Lister.
func (p *Provider) Listed(ctx context.Context) (provider.Listing, error) {
	p.v.mu.Lock()
	defer p.v.mu.Unlock()
	switch {
	case p.v.down && Mutant == "outage-hides":
		return provider.Listing{}, nil
	case p.v.down:
		return nil, &provider.RetryableError{Err: errors.New("fake: connection refused")}
	}
	return provider.Listing{Model.ID: {Listed: !p.v.unlisted || Mutant == "stale-listing"}}, nil
}
