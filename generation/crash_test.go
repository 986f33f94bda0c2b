package generation

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
	"github.com/darkroom-mcp/darkroom/provider"
)

// faulty is a provider that misbehaves on prompts carrying its tokens:
// "[panic:Method]" panics in that call, "[stuck]" is accepted and then
// reported running forever, "[hang]" also hangs in Status until its
// context ends. Everything else is the wrapped provider's.
type faulty struct {
	provider.Provider
	mu      sync.Mutex
	prompts map[string]string // job id → prompt
	cancels chan provider.Job
	parsed  atomic.Int32
}

func newFaulty(p provider.Provider) *faulty {
	return &faulty{Provider: p, prompts: map[string]string{}, cancels: make(chan provider.Job, 16)}
}

// prompt is the prompt of job's generation (set by Submit, which runs
// before any other call on it).
func (f *faulty) prompt(job provider.Job) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prompts[job.ID]
}

func maybePanic(prompt, method string) {
	if strings.Contains(prompt, "[panic:"+method+"]") {
		panic("faulty provider: " + method + " exploded")
	}
}

func (f *faulty) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	maybePanic(req.Prompt, "Submit")
	job, err := f.Provider.Submit(ctx, req)
	if err == nil {
		f.setPrompt(job.ID, req.Prompt)
	}
	return job, err
}

func (f *faulty) setPrompt(job, prompt string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prompts[job] = prompt
}

func (f *faulty) Find(ctx context.Context, key string) (provider.Job, bool, error) {
	panic("faulty provider: Find exploded") // only reconcile calls it, in the test that wants it
}

func (f *faulty) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	p := f.prompt(job)
	maybePanic(p, "Status")
	switch {
	case strings.Contains(p, "[hang]"):
		<-ctx.Done()
		return provider.Status{}, ctx.Err()
	case strings.Contains(p, "[stuck]"), strings.Contains(p, "[panic:Cancel]"):
		return provider.Status{State: provider.StateRunning, Progress: 0.5, Message: "rendering 50%"}, nil
	}
	return f.Provider.Status(ctx, job)
}

func (f *faulty) Cancel(ctx context.Context, job provider.Job) (provider.Status, error) {
	f.cancels <- job
	maybePanic(f.prompt(job), "Cancel")
	return provider.Status{State: provider.StateRunning}, nil // asked; never confirmed
}

func (f *faulty) OpenOutput(ctx context.Context, job provider.Job, out provider.Output) (io.ReadCloser, error) {
	maybePanic(f.prompt(job), "OpenOutput")
	return f.Provider.OpenOutput(ctx, job, out)
}

func (f *faulty) ParseWebhook(ctx context.Context, h http.Header, q url.Values, body []byte) (provider.WebhookEvent, error) {
	f.parsed.Add(1)
	panic("faulty provider: webhook parser exploded")
}

// TestRunnerPanicEndsGeneration: a panic in any provider call the runner
// makes ends that generation failed, as darkroom's error, with a message
// a person reads and its credits refunded, and the runner goes on: the
// next generation completes.
func TestRunnerPanicEndsGeneration(t *testing.T) {
	tests := []struct {
		name, prompt string
		prepare      func(e *testEnv, id string) // before the runner starts
		cancel       bool                        // ask to cancel once running
	}{
		{name: "Submit", prompt: "a heron [panic:Submit]"},
		{name: "Status", prompt: "a heron [panic:Status]"},
		{name: "OpenOutput", prompt: "a heron [panic:OpenOutput]"},
		{name: "Cancel", prompt: "a heron [panic:Cancel]", cancel: true},
		{name: "Find", prompt: "a heron", prepare: func(e *testEnv, id string) {
			// A submit whose outcome is unknown (a crash mid-submit):
			// reconcile asks Find.
			e.exec("UPDATE generations SET submit_state = 'submitting' WHERE id = ?", id)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFaulty(nil)
			e := newEnv(t, func(c *Config) { f.Provider = c.Providers[0]; c.Providers = []provider.Provider{f} })
			g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: tt.prompt, AspectRatio: "1:1"})
			if tt.prepare != nil {
				tt.prepare(e, g.ID)
			}
			startRunnerWith(t, e, RunnerConfig{Logger: slog.New(slog.DiscardHandler)})
			if tt.cancel {
				waitFor(t, e.svc, g.ID, func(g *Generation) bool { return g.Status == StatusRunning })
				if _, _, err := e.svc.Cancel(context.Background(), "alice", g.ID); err != nil {
					t.Fatal(err)
				}
			}
			done := e.waitDone(g.ID)
			if done.Status != StatusFailed || done.ErrorKind != ErrorInternal || done.Charged != 0 ||
				!strings.Contains(done.ErrorMessage, "an internal error in darkroom stopped it") ||
				strings.Contains(done.ErrorMessage, "exploded") || strings.Contains(done.ErrorMessage, "goroutine") {
				t.Fatalf("after a panic in %s: %s/%s charged %d: %q (%q)", tt.name, done.Status, done.ErrorKind, done.Charged, done.ErrorMessage, done.StatusMessage)
			}
			next := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "a calm heron", AspectRatio: "1:1"})
			if after := e.waitDone(next.ID); after.Status != StatusCompleted {
				t.Fatalf("the runner did not go on: next generation %s (%s)", after.Status, after.StatusMessage)
			}
		})
	}
}

// TestDeliverParserPanic: a webhook parser that panics makes Deliver
// return an error (the handler answers "not stored; retry") instead of
// taking the process down.
func TestDeliverParserPanic(t *testing.T) {
	f := newFaulty(nil)
	e := newEnv(t, func(c *Config) { f.Provider = c.Providers[0]; c.Providers = []provider.Provider{f} })
	r := NewRunner(e.svc, RunnerConfig{})
	err := r.Deliver(context.Background(), "local", f, http.Header{}, url.Values{}, []byte(`{}`))
	if err == nil || f.parsed.Load() != 1 {
		t.Fatalf("Deliver = %v after %d parses; want an error", err, f.parsed.Load())
	}
}

// TestMaxLifetime: a provider that took a job and never finishes it
// cannot keep the generation live: once its kind's lifetime has passed
// (the injected clock), the runner ends it failed with a reason a person
// understands, refunds it, and asks the provider to cancel; a Status call
// that hangs is cut after the last look. A job found finished on that
// last look completes instead.
func TestMaxLifetime(t *testing.T) {
	tests := []struct {
		name, prompt string
		taken        bool          // the provider holds a job already (prepared row)
		lastLook     time.Duration // 0: the default
		want         Status
	}{
		{name: "stuck", prompt: "a heron [stuck]", taken: true, want: StatusFailed},
		// The hanging call is cut as the last look ends (made short).
		{name: "hangs in Status", prompt: "a heron [hang]", taken: true, lastLook: time.Millisecond, want: StatusFailed},
		{name: "done on the last look", prompt: "a heron", want: StatusCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := testclock.New(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
			f := newFaulty(nil)
			e := newEnv(t, func(c *Config) {
				f.Provider = c.Providers[0]
				c.Providers = []provider.Provider{f}
				c.Now = clock.Now
			})
			g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: tt.prompt, AspectRatio: "1:1"})
			if tt.taken {
				// As the runner leaves a job the provider accepted.
				f.setPrompt("job-"+g.ID, tt.prompt)
				e.exec(`UPDATE generations SET submit_state = 'submitted', status = 'running', provider_job = ?,
					provider_job_id = ?, submitted_at = created_at WHERE id = ?`, `{"id":"job-`+g.ID+`"}`, "job-"+g.ID, g.ID)
			}
			// The runner starts once the clock has moved past the
			// lifetime: its one step is the last look.
			clock.Advance(61 * time.Minute)
			e.exec("UPDATE generations SET next_check_at = ? WHERE id = ?", clock.Now().UnixMilli(), g.ID)
			startRunnerWith(t, e, RunnerConfig{MaxLifetime: map[provider.Kind]time.Duration{provider.KindImage: time.Hour},
				LastLook: tt.lastLook})
			done := e.waitDone(g.ID)
			if done.Status != tt.want {
				t.Fatalf("ended %s (%s), want %s", done.Status, done.StatusMessage, tt.want)
			}
			if tt.want != StatusFailed {
				return
			}
			want := "the provider (local) took the image but did not finish it within 1 hour, the longest this server waits for one"
			if done.ErrorKind != ErrorProvider || done.ErrorMessage != want || done.Charged != 0 ||
				done.StatusMessage != "failed: "+want+"; its 1 credit was refunded" {
				t.Fatalf("failed as %s, charged %d: %q / %q", done.ErrorKind, done.Charged, done.ErrorMessage, done.StatusMessage)
			}
			if spent, _ := e.svc.Spent(context.Background(), "alice"); spent != 0 {
				t.Fatalf("spent %d after the refund", spent)
			}
			select {
			case job := <-f.cancels:
				if job.ID != "job-"+g.ID {
					t.Fatalf("cancelled job %q, want job-%s", job.ID, g.ID)
				}
			case <-time.After(waitLimit):
				t.Fatal("the provider was never asked to cancel")
			}
		})
	}
}
