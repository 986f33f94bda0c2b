package providertest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/providertest"
)

// TestFake runs the contract against a provider defined here, over an
// in-memory vendor: the shape a provider written in a test package takes
// (no emulator), and the suite's own check that a provider meeting every
// capability passes every check.
func TestFake(t *testing.T) {
	mutant = os.Getenv("PROVIDERTEST_MUTANT")
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) providertest.Env {
			v := &fakeVendor{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), jobs: map[string]*fakeJob{}}
			p := &fake{v: v}
			return providertest.Env{
				Provider: p, Model: fakeModel, VendorModel: fakeModel.ID,
				Restart: func() provider.Provider { return &fake{v: v} },
				Vendor: providertest.Vendor{
					Prompt: func(o providertest.Outcome) string { return "[" + string(o) + "]" },
					Fault: func(op providertest.Op, f providertest.Fault, after time.Duration) {
						v.mu.Lock()
						defer v.mu.Unlock()
						v.fault = map[providertest.Op]fakeFault{op: {f, after}}
					},
					Down:    func() { v.mu.Lock(); v.down = true; v.mu.Unlock() },
					Advance: func(d time.Duration) { v.mu.Lock(); v.now = v.now.Add(d); v.mu.Unlock() },
					Jobs:    func() int { v.mu.Lock(); defer v.mu.Unlock(); return len(v.jobs) },
					Unlist:  func(string) { v.mu.Lock(); v.unlisted = true; v.mu.Unlock() },
				},
			}
		},
		Lacks: map[providertest.Capability]string{
			providertest.CapRedirect: "the fake's outputs are not URLs",
		},
		NotBilled: []providertest.Outcome{providertest.OutcomeFail, providertest.OutcomeSafety, providertest.OutcomeQuota, providertest.OutcomeAppError},
	})
}

// mutant names the one fault TestMutants plants in the fake ("" none).
var mutant string

var fakeModel = provider.Model{ID: "fake-model", Provider: "fake", Kind: provider.KindImage, AspectRatios: []string{"1:1"}, MaxCount: 4, ExpectedDuration: 2 * time.Second}

type fakeFault struct {
	f     providertest.Fault
	after time.Duration
}

// fakeVendor runs jobs on its clock: queued for a second, running for
// one, then done ([fail] failed, [safety] refused by the safety system).
type fakeVendor struct {
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
func (v *fakeVendor) take(op providertest.Op) error {
	if v.down {
		return &provider.RetryableError{Err: fmt.Errorf("fake: connection refused: %w", provider.ErrNotCreated)}
	}
	f, ok := v.fault[op]
	if !ok || f.f == providertest.FaultLoseReply {
		return nil
	}
	delete(v.fault, op)
	if f.f == providertest.FaultThrottle {
		if mutant == "no-hint" {
			f.after = 0
		}
		return &provider.RetryableError{Err: fmt.Errorf("fake: 429: %w", provider.ErrNotCreated), After: f.after}
	}
	if f.f == providertest.FaultDrop {
		if mutant == "drop-not-created" {
			return &provider.RetryableError{Err: fmt.Errorf("fake: connection reset: %w", provider.ErrNotCreated)}
		}
		return &provider.RetryableError{Err: errors.New("fake: connection reset")}
	}
	return &provider.RetryableError{Err: errors.New("fake: 500")}
}

// fake is the adapter: all it keeps is in the vendor.
type fake struct {
	v    *fakeVendor
	mine sync.Map // job ids this instance submitted (the instance-state mutant's memory)
}

func (p *fake) Name() string             { return "fake" }
func (p *fake) Models() []provider.Model { return []provider.Model{fakeModel} }
func (p *fake) RefundsFailures() bool    { return mutant != "no-refund" }
func (p *fake) Ping(ctx context.Context) error {
	if mutant == "ping-lies" {
		return nil
	}
	_, err := p.Listed(ctx)
	return err
}
func jobOf(id string) provider.Job { return provider.Job{ID: id, Data: json.RawMessage(`{}`)} }
func (j *fakeJob) has(o providertest.Outcome) bool {
	return strings.Contains(j.prompt, "["+string(o)+"]")
}

func (p *fake) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
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
	if mutant == "count-ignored" {
		v.jobs[id].count = 1
	}
	if f, ok := v.fault[providertest.OpSubmit]; ok && f.f == providertest.FaultLoseReply {
		delete(v.fault, providertest.OpSubmit)
		if mutant == "lost-not-created" {
			return provider.Job{}, &provider.RetryableError{Err: fmt.Errorf("fake: connection reset: %w", provider.ErrNotCreated)}
		}
		return provider.Job{}, &provider.RetryableError{Err: errors.New("fake: connection reset")}
	}
	p.mine.Store(id, true)
	return jobOf(id), nil
}

func (p *fake) Find(ctx context.Context, key string) (provider.Job, bool, error) {
	v := p.v
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.down {
		return provider.Job{}, false, &provider.RetryableError{Err: errors.New("fake: connection refused")}
	}
	for id, j := range v.jobs {
		if j.key == key && mutant != "find-forgets" {
			return jobOf(id), true, nil
		}
	}
	return provider.Job{}, false, nil
}

func (p *fake) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	v := p.v
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := p.mine.Load(job.ID); !ok && mutant == "instance-state" {
		return provider.Status{}, provider.ErrNotFound
	}
	if v.down && mutant == "outage-fails" {
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
		if mutant == "progress-back" {
			progress = 1 - progress
		}
		return provider.Status{State: provider.StateRunning, Progress: progress}, nil
	case j.has(providertest.OutcomeFail):
		return provider.Status{State: provider.StateFailed, Progress: 1, Error: "fake: the job failed"}, nil
	case j.has(providertest.OutcomeAppError):
		return provider.Status{State: provider.StateFailed, Progress: 1, Error: "fake: the app crashed (500)", NotBilled: mutant != "no-refund"}, nil
	case j.has(providertest.OutcomeSafety):
		return provider.Status{State: provider.StateFailed, Progress: 1, Error: "fake: refused by the safety system", NotBilled: mutant != "no-refund"}, nil
	}
	st := provider.Status{State: provider.StateCompleted, Progress: 1}
	for i := range j.count {
		st.Outputs = append(st.Outputs, provider.Output{URL: fmt.Sprintf("fake:%s/%d", job.ID, i), MimeType: "image/png"})
	}
	return st, nil
}

func (p *fake) Cancel(ctx context.Context, job provider.Job) (provider.Status, error) {
	p.v.mu.Lock()
	if j, ok := p.v.jobs[job.ID]; ok && p.v.now.Sub(j.created) < 2*time.Second && mutant != "cancel-ignored" {
		j.cancelled = true
	}
	p.v.mu.Unlock()
	return p.Status(ctx, job)
}

// OpenOutput serves only the fake's own outputs, streamed: a large one
// is zeros read as they go.
func (p *fake) OpenOutput(ctx context.Context, job provider.Job, out provider.Output) (io.ReadCloser, error) {
	if mutant == "any-url" && strings.HasPrefix(out.URL, "http") {
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
	png := []byte("\x89PNG\r\n\x1a\n")
	if j.has(providertest.OutcomeLarge) {
		r := io.MultiReader(bytes.NewReader(png), io.LimitReader(zeros{}, providertest.LargeOutputBytes))
		if mutant == "held-whole" {
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
func (p *fake) Listed(ctx context.Context) (provider.Listing, error) {
	p.v.mu.Lock()
	defer p.v.mu.Unlock()
	switch {
	case p.v.down && mutant == "outage-hides":
		return provider.Listing{}, nil
	case p.v.down:
		return nil, &provider.RetryableError{Err: errors.New("fake: connection refused")}
	}
	return provider.Listing{fakeModel.ID: {Listed: !p.v.unlisted || mutant == "stale-listing"}}, nil
}

// TestMutants plants one fault at a time in the fake and runs TestFake
// again (this test binary, in a child process): each fault must fail the
// check that names it, so no check passes vacuously.
func TestMutants(t *testing.T) {
	if os.Getenv("PROVIDERTEST_MUTANT") != "" {
		t.Skip("inside a mutant run")
	}
	for _, c := range []struct{ mutant, fails string }{
		{"progress-back", "Complete"},
		{"instance-state", "StatusAfterRestart"},
		{"count-ignored", "Count"},
		{"find-forgets", "FindAfterRestart"},
		{"find-forgets", "LostSubmitReply"},
		{"lost-not-created", "LostSubmitReply"},
		{"drop-not-created", "DroppedSubmit"},
		{"no-refund", "Failed"},
		{"no-refund", "Safety"},
		{"no-refund", "Quota"},
		{"no-refund", "AppError"},
		{"cancel-ignored", "Cancel"},
		{"no-hint", "Throttled"},
		{"outage-fails", "Outage"},
		{"outage-hides", "Outage"},
		{"ping-lies", "Outage"},
		{"any-url", "ForeignOutputHost"},
		{"held-whole", "LargeOutputMemory"},
		{"stale-listing", "Listing"},
	} {
		t.Run(c.mutant+"/"+c.fails, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestFake$/^"+c.fails+"$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "PROVIDERTEST_MUTANT="+c.mutant)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "--- FAIL: TestFake/"+c.fails+" ") {
				t.Fatalf("with %s planted, %s did not fail (err %v):\n%s", c.mutant, c.fails, err, out)
			}
		})
	}
}
