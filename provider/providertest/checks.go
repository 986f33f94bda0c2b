package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

var checks = []check{
	{"Complete", nil, testComplete},
	{"StatusAfterRestart", nil, testStatusAfterRestart},
	{"Count", nil, testCount},
	{"FindAfterRestart", nil, testFindAfterRestart},
	{"LostSubmitReply", []Capability{CapLostReply}, testLostSubmitReply},
	{"DroppedSubmit", []Capability{CapLostReply}, testDroppedSubmit},
	{"Failed", []Capability{CapFail}, func(t *testing.T, s *suite) { s.failure(t, OutcomeFail) }},
	{"Safety", []Capability{CapSafety}, func(t *testing.T, s *suite) { s.failure(t, OutcomeSafety) }},
	{"Quota", []Capability{CapQuota}, func(t *testing.T, s *suite) { s.failure(t, OutcomeQuota) }},
	{"AppError", []Capability{CapAppError}, func(t *testing.T, s *suite) { s.failure(t, OutcomeAppError) }},
	{"Cancel", []Capability{CapAsync, CapCancel}, testCancel},
	{"CancelAfterCompletion", nil, testCancelAfterCompletion},
	{"Throttled", []Capability{CapThrottle}, testThrottled},
	{"ServerError", []Capability{CapServerError}, testServerError},
	{"Outage", []Capability{CapOutage}, testOutage},
	{"ForeignOutputHost", nil, testForeignOutputHost},
	{"RedirectToForeignHost", []Capability{CapRedirect}, testRedirectToForeignHost},
	{"LargeOutputMemory", []Capability{CapLargeOutput}, testLargeOutputMemory},
	{"Listing", []Capability{CapListing}, testListing},
}

// maxSteps bounds settle: the vendor's clock moves at most maxSteps
// steps of a 40th of the model's expected duration (ten times it).
const maxSteps = 400

func (s *suite) req(key, prompt string) provider.Request {
	m := s.e.Model
	r := provider.Request{IdempotencyKey: key, Model: m, Prompt: prompt, AspectRatio: "1:1"}
	if len(m.AspectRatios) > 0 {
		r.AspectRatio = m.AspectRatios[0]
	}
	if len(m.Durations) > 0 {
		r.DurationSeconds = m.Durations[0]
	}
	return r
}

func (s *suite) submit(t *testing.T, p provider.Provider, key, prompt string) provider.Job {
	t.Helper()
	job, err := p.Submit(context.Background(), s.req(key, prompt))
	if err != nil {
		t.Fatalf("Submit(%q): %v", prompt, err)
	}
	return job
}

// settle polls job, moving the vendor's clock, until it is terminal; it
// returns the last status and the states seen, in order.
func (s *suite) settle(t *testing.T, p provider.Provider, job provider.Job) (provider.Status, []provider.State) {
	t.Helper()
	step := max(s.e.Model.ExpectedDuration/40, 25*time.Millisecond)
	var seen []provider.State
	var last provider.Status
	for range maxSteps {
		st, err := p.Status(context.Background(), job)
		if err != nil {
			t.Fatalf("Status after %v: %v", states(seen), err)
		}
		if st.State == provider.StateRunning && last.State == provider.StateRunning && st.Progress < last.Progress {
			t.Errorf("progress went back from %v to %v while running", last.Progress, st.Progress)
		}
		last = st
		if len(seen) == 0 || seen[len(seen)-1] != st.State {
			seen = append(seen, st.State)
		}
		if st.Progress < 0 || st.Progress > 1 {
			t.Errorf("Status progress %v, want 0..1", st.Progress)
		}
		if st.State.Terminal() {
			return st, seen
		}
		s.e.Advance(step)
	}
	t.Fatalf("job not terminal after %d steps of %v: %v", maxSteps, step, states(seen))
	return provider.Status{}, nil
}

func states(seen []provider.State) string { return fmt.Sprint(seen) }

// read opens and reads every output of st, returning the bytes read.
func read(t *testing.T, p provider.Provider, job provider.Job, st provider.Status) int64 {
	t.Helper()
	var total int64
	for i, out := range st.Outputs {
		rc, err := p.OpenOutput(context.Background(), job, out)
		if err != nil {
			t.Fatalf("OpenOutput %d (%s): %v", i, out.URL, err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			t.Fatalf("read output %d: %v", i, err)
		}
		if n == 0 {
			t.Fatalf("output %d is empty", i)
		}
		total += n
	}
	return total
}

func refundsFailures(p provider.Provider) bool {
	rf, ok := provider.As[provider.RefundsFailures](p)
	return ok && rf.RefundsFailures()
}

func duplicateRisk(p provider.Provider) bool {
	d, ok := provider.As[provider.DuplicateRisk](p)
	return ok && d.ResubmitMayDuplicate()
}

// testComplete: a job goes forward through the states the vendor has
// and its outputs read.
func testComplete(t *testing.T, s *suite) {
	p := s.e.Provider
	before := s.e.Jobs()
	job := s.submit(t, p, "pt-complete", "a lighthouse at dusk")
	if n := s.e.Jobs() - before; n != 1 {
		t.Fatalf("one Submit made %d vendor jobs", n)
	}
	if job.ID == "" {
		t.Fatal("Submit returned a job without an ID")
	}
	st, seen := s.settle(t, p, job)
	if st.State != provider.StateCompleted {
		t.Fatalf("job ended %s, want completed (states %v)", describe(st), states(seen))
	}
	rank := map[provider.State]int{provider.StateQueued: 0, provider.StateRunning: 1, provider.StateCompleted: 2}
	for i := 1; i < len(seen); i++ {
		if rank[seen[i]] <= rank[seen[i-1]] {
			t.Fatalf("states went backwards: %v", states(seen))
		}
	}
	if !s.lacks(CapAsync) {
		if !s.lacks(CapQueued) && seen[0] != provider.StateQueued {
			t.Errorf("first state %s, want queued (states %v; or declare %s lacking)", seen[0], states(seen), CapQueued)
		}
		if !containsState(seen, provider.StateRunning) {
			t.Errorf("never saw running (states %v)", states(seen))
		}
	}
	if len(st.Outputs) == 0 {
		t.Fatal("completed without outputs")
	}
	read(t, p, job, st)
	if n := s.e.Jobs() - before; n != 1 {
		t.Fatalf("the job made %d vendor jobs in all", n)
	}
}

func containsState(seen []provider.State, want provider.State) bool {
	for _, s := range seen {
		if s == want {
			return true
		}
	}
	return false
}

// testCount: a model that makes several outputs a call makes as many as
// asked, each readable.
func testCount(t *testing.T, s *suite) {
	if s.e.Model.MaxCount < 2 {
		t.Skipf("model %s makes one output a call (MaxCount %d)", s.e.Model.ID, s.e.Model.MaxCount)
	}
	req := s.req("pt-count", "a lighthouse at dusk")
	req.Count = 2
	p := s.e.Provider
	job, err := p.Submit(context.Background(), req)
	if err != nil {
		t.Fatalf("Submit with Count 2: %v", err)
	}
	st, seen := s.settle(t, p, job)
	if st.State != provider.StateCompleted || len(st.Outputs) != 2 {
		t.Fatalf("Count 2 ended %s (states %v), want completed with 2 outputs", describe(st), states(seen))
	}
	read(t, p, job, st)
}

// testStatusAfterRestart: the runner persists the Job Submit returned
// (as JSON) and gives it back to a restarted process, whose adapter
// follows it to its end and reads its outputs.
func testStatusAfterRestart(t *testing.T, s *suite) {
	job := s.submit(t, s.e.Provider, "pt-restart", "a lighthouse at dusk")
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	var stored provider.Job
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	p := s.e.Restart()
	st, seen := s.settle(t, p, stored)
	if st.State != provider.StateCompleted {
		t.Fatalf("after a restart the job ended %s (states %v)", describe(st), states(seen))
	}
	read(t, p, stored, st)
}

// testFindAfterRestart: a process that submitted and crashed finds the
// job again, or does not resubmit it blindly.
func testFindAfterRestart(t *testing.T, s *suite) {
	before := s.e.Jobs()
	job := s.submit(t, s.e.Provider, "pt-find", "a lighthouse at dusk")
	p := s.e.Restart()
	ctx := context.Background()
	if _, ok, err := p.Find(ctx, "pt-never-submitted"); err == nil && ok {
		t.Fatal("Find finds a job for a key never submitted")
	}
	found, ok, err := p.Find(ctx, "pt-find")
	switch {
	case errors.Is(err, provider.ErrUnsupported):
		s.noBlindResubmit(t, p, "pt-find", before+1)
		return
	case err != nil:
		t.Fatalf("Find: %v", err)
	case !ok:
		t.Fatal("after a restart Find does not find the job Submit made: the runner would submit a second paid job")
	case found.ID != job.ID:
		t.Fatalf("Find found job %q, Submit made %q", found.ID, job.ID)
	}
	if st, seen := s.settle(t, p, found); st.State != provider.StateCompleted {
		t.Fatalf("the job found ended %s (states %v)", describe(st), states(seen))
	}
	if n := s.e.Jobs() - before; n != 1 {
		t.Fatalf("%d vendor jobs, want 1", n)
	}
}

// noBlindResubmit: an adapter whose Find cannot tell either declares
// DuplicateRisk (the runner then waits, never resubmits) or makes no
// second job when the same key is submitted again.
func (s *suite) noBlindResubmit(t *testing.T, p provider.Provider, key string, want int) {
	t.Helper()
	if duplicateRisk(p) {
		t.Logf("Find is unsupported and the adapter declares DuplicateRisk: the runner does not resubmit")
		return
	}
	if _, err := p.Submit(context.Background(), s.req(key, "a lighthouse at dusk")); err != nil {
		t.Fatalf("Find is unsupported, no DuplicateRisk declared, and a second Submit with the same key fails: %v", err)
	}
	if n := s.e.Jobs(); n != want {
		t.Fatalf("Find is unsupported, no DuplicateRisk declared, and a second Submit with the same key made a second paid job (%d vendor jobs, want %d)", n, want)
	}
}

// testLostSubmitReply: the vendor made the job and the reply was lost;
// the adapter neither claims no job was made nor lets a second be made.
func testLostSubmitReply(t *testing.T, s *suite) {
	need(t, s.e.Fault != nil, "Vendor.Fault")
	before := s.e.Jobs()
	s.e.Fault(OpSubmit, FaultLoseReply, 0)
	_, err := s.e.Provider.Submit(context.Background(), s.req("pt-lost", "a lighthouse at dusk"))
	made := s.e.Jobs() - before
	if made != 1 {
		t.Fatalf("the scripted lost reply made %d vendor jobs, want 1", made)
	}
	var perm *provider.PermanentError
	switch {
	case err == nil:
		t.Log("Submit succeeded despite the lost reply (the adapter recovered it)")
	case errors.Is(err, provider.ErrNotCreated):
		t.Fatalf("Submit says no job was made (ErrNotCreated), but the vendor made one: %v", err)
	case errors.As(err, &perm):
		t.Fatalf("a lost reply is a PermanentError (the generation would fail with a billed job running): %v", err)
	}
	p := s.e.Restart()
	found, ok, err := p.Find(context.Background(), "pt-lost")
	switch {
	case errors.Is(err, provider.ErrUnsupported):
		s.noBlindResubmit(t, p, "pt-lost", before+1)
		return
	case errors.Is(err, provider.ErrResubmitOnce):
		s.resubmitOnce(t, p, "pt-lost", before)
		return
	case err != nil:
		t.Fatalf("Find: %v", err)
	case !ok:
		t.Fatal("the vendor made the job but Find says there is none: the runner would submit a second paid job")
	}
	if st, seen := s.settle(t, p, found); st.State != provider.StateCompleted {
		t.Fatalf("the job found ended %s (states %v)", describe(st), states(seen))
	}
	if n := s.e.Jobs() - before; n != 1 {
		t.Fatalf("%d vendor jobs, want 1", n)
	}
}

// testDroppedSubmit: the connection broke before the vendor did
// anything; the adapter cannot know that, so it must not claim
// ErrNotCreated, and reconciling makes exactly one job.
func testDroppedSubmit(t *testing.T, s *suite) {
	need(t, s.e.Fault != nil, "Vendor.Fault")
	before := s.e.Jobs()
	s.e.Fault(OpSubmit, FaultDrop, 0)
	_, err := s.e.Provider.Submit(context.Background(), s.req("pt-drop", "a lighthouse at dusk"))
	if n := s.e.Jobs() - before; n != 0 {
		t.Fatalf("the scripted dropped connection made %d vendor jobs, want 0", n)
	}
	if err == nil {
		t.Fatal("Submit succeeded over a dropped connection")
	}
	retryable(t, "Submit over a dropped connection", err)
	if errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("Submit over a dropped connection claims ErrNotCreated, which it cannot know: %v", err)
	}
	p := s.e.Restart()
	_, ok, err := p.Find(context.Background(), "pt-drop")
	switch {
	case errors.Is(err, provider.ErrUnsupported):
		if duplicateRisk(p) {
			t.Logf("Find is unsupported and the adapter declares DuplicateRisk: the runner waits, never resubmits")
			return
		}
	case errors.Is(err, provider.ErrResubmitOnce):
	case err != nil:
		t.Fatalf("Find: %v", err)
	case ok:
		t.Fatal("Find finds a job the vendor never made")
	}
	job := s.submit(t, p, "pt-drop", "a lighthouse at dusk")
	if st, seen := s.settle(t, p, job); st.State != provider.StateCompleted {
		t.Fatalf("the resubmitted job ended %s (states %v)", describe(st), states(seen))
	}
	if n := s.e.Jobs() - before; n != 1 {
		t.Fatalf("%d vendor jobs, want 1", n)
	}
}

// resubmitOnce: a provider whose Find answers ErrResubmitOnce (a
// synchronous call cut off, documented to allow one more call, which the
// vendor may bill too) allows exactly one: a second lost call leaves
// Find answering ErrUnsupported, with DuplicateRisk declared.
func (s *suite) resubmitOnce(t *testing.T, p provider.Provider, key string, before int) {
	t.Helper()
	t.Logf("Find answers ErrResubmitOnce: the runner submits once more, and the vendor may bill both calls")
	s.e.Fault(OpSubmit, FaultLoseReply, 0)
	_, err := p.Submit(context.Background(), s.req(key, "a lighthouse at dusk"))
	if errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("the second lost reply is reported as ErrNotCreated: %v", err)
	}
	if n := s.e.Jobs() - before; n != 2 {
		t.Fatalf("%d vendor jobs after the one resubmit allowed, want 2", n)
	}
	p = s.e.Restart()
	_, _, err = p.Find(context.Background(), key)
	if !errors.Is(err, provider.ErrUnsupported) || !duplicateRisk(p) {
		t.Fatalf("after two lost calls Find answers %v (DuplicateRisk %v); want ErrUnsupported with DuplicateRisk: never a third call", err, duplicateRisk(p))
	}
}

// failure: outcome o ends the generation failed, refunded exactly when
// the vendor does not bill o.
func (s *suite) failure(t *testing.T, o Outcome) {
	need(t, s.e.Prompt != nil, "Vendor.Prompt")
	p := s.e.Provider
	job, err := p.Submit(context.Background(), s.req("pt-"+string(o), "a fox "+s.e.Prompt(o)))
	var refunded bool
	if err != nil {
		var perm *provider.PermanentError
		if !errors.As(err, &perm) {
			t.Fatalf("Submit: %v; want a PermanentError (retrying cannot help) or a job that fails", err)
		}
		if perm.Message == "" {
			t.Fatal("PermanentError without a message")
		}
		refunded = refundsFailures(p)
		t.Logf("refused at submit: %v", err)
	} else {
		st, seen := s.settle(t, p, job)
		if st.State != provider.StateFailed {
			t.Fatalf("job ended %s, want failed (states %v)", describe(st), states(seen))
		}
		if st.Error == "" {
			t.Fatal("failed without an Error message")
		}
		if len(st.Outputs) > 0 {
			t.Fatalf("failed with %d outputs", len(st.Outputs))
		}
		refunded = refundsFailures(p) || st.NotBilled
		t.Logf("failed: %s", describe(st))
	}
	switch {
	case s.notBilled(o) && !refunded:
		t.Fatalf("the vendor bills nothing for %s, but the adapter does not refund it (RefundsFailures, Status.NotBilled)", o)
	case !s.notBilled(o) && refunded:
		t.Fatalf("the adapter refunds %s, which the vendor bills (the harness's NotBilled leaves it out)", o)
	}
}

// testCancel: a job cancelled before it ends ends cancelled.
func testCancel(t *testing.T, s *suite) {
	p := s.e.Provider
	job := s.submit(t, p, "pt-cancel", "a lighthouse at dusk")
	cst, err := p.Cancel(context.Background(), job)
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if cst.State.Terminal() && cst.State != provider.StateCancelled {
		t.Fatalf("Cancel of a fresh job answered %s", describe(cst))
	}
	st, seen := s.settle(t, p, job)
	if st.State != provider.StateCancelled {
		t.Fatalf("cancelled job ended %s (states %v)", describe(st), states(seen))
	}
	if len(st.Outputs) > 0 {
		t.Fatalf("cancelled job has %d outputs", len(st.Outputs))
	}
	if cst, err := p.Cancel(context.Background(), job); err != nil || cst.State != provider.StateCancelled {
		t.Fatalf("Cancel of a cancelled job: %s, %v", describe(cst), err)
	}
}

// testCancelAfterCompletion: cancelling a finished job changes nothing
// (StateCancelled only when the vendor confirms a cancel).
func testCancelAfterCompletion(t *testing.T, s *suite) {
	job, _ := s.completed(t, "pt-cancel-late")
	p := s.e.Provider
	cst, err := p.Cancel(context.Background(), job)
	if err != nil {
		t.Fatalf("Cancel of a completed job: %v", err)
	}
	if cst.State == provider.StateCancelled || cst.State == provider.StateFailed {
		t.Fatalf("Cancel of a completed job answered %s", describe(cst))
	}
	st, seen := s.settle(t, p, job)
	if st.State != provider.StateCompleted || len(st.Outputs) == 0 {
		t.Fatalf("after a late Cancel the job is %s (states %v), want completed with its outputs", describe(st), states(seen))
	}
	read(t, p, job, st)
}

func retryable(t *testing.T, what string, err error) *provider.RetryableError {
	t.Helper()
	var re *provider.RetryableError
	if !errors.As(err, &re) {
		t.Fatalf("%s: %v, want a RetryableError", what, err)
	}
	var perm *provider.PermanentError
	if errors.As(err, &perm) {
		t.Fatalf("%s: %v is also a PermanentError", what, err)
	}
	return re
}

// testThrottled: a 429 carries its hint, made no job, and says so.
func testThrottled(t *testing.T, s *suite) {
	need(t, s.e.Fault != nil, "Vendor.Fault")
	p := s.e.Provider
	before := s.e.Jobs()
	s.e.Fault(OpSubmit, FaultThrottle, ThrottleHint)
	_, err := p.Submit(context.Background(), s.req("pt-429", "a lighthouse at dusk"))
	re := retryable(t, "throttled Submit", err)
	if re.After != ThrottleHint {
		t.Errorf("throttled Submit: After = %v, want the vendor's hint %v", re.After, ThrottleHint)
	}
	if !errors.Is(err, provider.ErrNotCreated) {
		t.Errorf("throttled Submit: %v does not wrap ErrNotCreated (a 429 made nothing)", err)
	}
	if n := s.e.Jobs() - before; n != 0 {
		t.Fatalf("a throttled Submit made %d vendor jobs", n)
	}
	job := s.submit(t, p, "pt-429", "a lighthouse at dusk")
	if n := s.e.Jobs() - before; n != 1 {
		t.Fatalf("the retried Submit made %d vendor jobs, want 1", n)
	}
	if s.lacks(CapAsync) {
		t.Logf("status not throttled: lacks %s: %s", CapAsync, s.h.Lacks[CapAsync])
		return
	}
	s.e.Fault(OpStatus, FaultThrottle, ThrottleHint)
	_, err = p.Status(context.Background(), job)
	re = retryable(t, "throttled Status", err)
	if re.After != ThrottleHint {
		t.Errorf("throttled Status: After = %v, want the vendor's hint %v", re.After, ThrottleHint)
	}
	if st, seen := s.settle(t, p, job); st.State != provider.StateCompleted {
		t.Fatalf("after a throttled Status the job ended %s (states %v)", describe(st), states(seen))
	}
}

// testServerError: a 5xx is retryable, and claims no job was made only
// when none was.
func testServerError(t *testing.T, s *suite) {
	need(t, s.e.Fault != nil, "Vendor.Fault")
	p := s.e.Provider
	before := s.e.Jobs()
	s.e.Fault(OpSubmit, FaultServer, 0)
	_, err := p.Submit(context.Background(), s.req("pt-5xx", "a lighthouse at dusk"))
	retryable(t, "Submit answered 5xx", err)
	if errors.Is(err, provider.ErrNotCreated) && s.e.Jobs() != before {
		t.Fatalf("Submit claims ErrNotCreated but the vendor made a job: %v", err)
	}
	if _, ok, err := p.Find(context.Background(), "pt-5xx"); err == nil && ok {
		t.Fatal("after a 5xx that made nothing, Find finds a job")
	}
	job := s.submit(t, p, "pt-5xx", "a lighthouse at dusk")
	if n := s.e.Jobs() - before; n != 1 {
		t.Fatalf("%d vendor jobs, want 1", n)
	}
	if s.lacks(CapAsync) {
		t.Logf("status not faulted: lacks %s: %s", CapAsync, s.h.Lacks[CapAsync])
		return
	}
	s.e.Fault(OpStatus, FaultServer, 0)
	_, err = p.Status(context.Background(), job)
	retryable(t, "Status answered 5xx", err)
	if st, seen := s.settle(t, p, job); st.State != provider.StateCompleted {
		t.Fatalf("after a 5xx Status the job ended %s (states %v)", describe(st), states(seen))
	}
}

// testOutage: an unreachable vendor fails nothing for good and hides
// nothing.
func testOutage(t *testing.T, s *suite) {
	need(t, s.e.Down != nil, "Vendor.Down")
	p := s.e.Provider
	ctx := context.Background()
	var job provider.Job
	if !s.lacks(CapAsync) {
		job = s.submit(t, p, "pt-before-outage", "a lighthouse at dusk")
	}
	pinger, pings := provider.As[provider.Pinger](p)
	if pings && s.lacks(CapPing) {
		t.Logf("Ping not checked: lacks %s: %s", CapPing, s.h.Lacks[CapPing])
		pings = false
	}
	if pings {
		if err := pinger.Ping(ctx); err != nil {
			t.Fatalf("Ping of a reachable vendor: %v", err)
		}
	}
	before := s.e.Jobs()
	s.e.Down()
	// The reads go first: a GET on a kept-alive connection the vendor
	// just closed is retried on a new one (refused), so the Submit after
	// them meets the outage, not a stale connection.
	if pings && pinger.Ping(ctx) == nil {
		t.Error("Ping of an unreachable vendor answers nil")
	}
	if !s.lacks(CapAsync) {
		st, err := p.Status(ctx, job)
		if err == nil {
			t.Fatalf("Status from an unreachable vendor: %s, want a RetryableError", describe(st))
		}
		retryable(t, "Status from an unreachable vendor", err)
	}
	if l, ok := provider.As[provider.Lister](p); ok && !s.lacks(CapListing) {
		m, err := l.Listed(ctx)
		if err == nil {
			t.Fatalf("Listed from an unreachable vendor answered %v, want an error (an outage hides nothing)", m)
		}
	}
	_, err := p.Submit(ctx, s.req("pt-outage", "a lighthouse at dusk"))
	retryable(t, "Submit to an unreachable vendor", err)
	if !errors.Is(err, provider.ErrNotCreated) {
		t.Errorf("Submit to an unreachable vendor: %v does not wrap ErrNotCreated (the connection was refused)", err)
	}
	if s.e.Jobs() != before {
		t.Fatal("an unreachable vendor made a job")
	}
}

// foreignHost serves a PNG on a host no adapter allows ("localhost"),
// counting the requests that reach it.
func foreignHost(t *testing.T) (url string, hits *atomic.Int64) {
	hits = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n"))
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return "http://localhost:" + port + "/out.png", hits
}

// completed submits and settles one ordinary job.
func (s *suite) completed(t *testing.T, key string) (provider.Job, provider.Status) {
	t.Helper()
	job := s.submit(t, s.e.Provider, key, "a lighthouse at dusk")
	st, seen := s.settle(t, s.e.Provider, job)
	if st.State != provider.StateCompleted || len(st.Outputs) == 0 {
		t.Fatalf("job ended %s (states %v)", describe(st), states(seen))
	}
	return job, st
}

// refused checks that OpenOutput of out fails without reaching the
// foreign host.
func refused(t *testing.T, p provider.Provider, job provider.Job, out provider.Output, hits *atomic.Int64) {
	t.Helper()
	rc, err := p.OpenOutput(context.Background(), job, out)
	if err == nil {
		io.Copy(io.Discard, rc)
		rc.Close()
		t.Errorf("OpenOutput(%s) succeeded, want a refusal", out.URL)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("OpenOutput(%s) reached the foreign host %d times", out.URL, n)
	}
}

// testForeignOutputHost: an output URL on another host is refused.
func testForeignOutputHost(t *testing.T, s *suite) {
	job, st := s.completed(t, "pt-foreign")
	url, hits := foreignHost(t)
	out := st.Outputs[0]
	out.URL = url
	refused(t, s.e.Provider, job, out, hits)
}

// testRedirectToForeignHost: an allowed host redirecting elsewhere is
// refused.
func testRedirectToForeignHost(t *testing.T, s *suite) {
	need(t, s.e.Redirect != nil, "Vendor.Redirect")
	job, st := s.completed(t, "pt-redirect")
	url, hits := foreignHost(t)
	out := st.Outputs[0]
	out.URL = s.e.Redirect(url)
	refused(t, s.e.Provider, job, out, hits)
}

// testLargeOutputMemory: taking an output of LargeOutputBytes allocates
// at most MaxOutputAlloc.
func testLargeOutputMemory(t *testing.T, s *suite) {
	need(t, s.e.Prompt != nil, "Vendor.Prompt")
	p := s.e.Provider
	var m0, m1, m2, m3 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	job, err := p.Submit(context.Background(), s.req("pt-large", "a fox "+s.e.Prompt(OutcomeLarge)))
	runtime.ReadMemStats(&m1)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	st, seen := s.settle(t, p, job) // polling is not counted
	if st.State != provider.StateCompleted {
		t.Fatalf("job ended %s (states %v)", describe(st), states(seen))
	}
	runtime.GC()
	runtime.ReadMemStats(&m2)
	n := read(t, p, job, st)
	runtime.ReadMemStats(&m3)
	alloc := (m1.TotalAlloc - m0.TotalAlloc) + (m3.TotalAlloc - m2.TotalAlloc)
	t.Logf("took %d bytes, allocating %.2f MiB (submit %.2f, read %.2f; the vendor's side included)",
		n, mib(alloc), mib(m1.TotalAlloc-m0.TotalAlloc), mib(m3.TotalAlloc-m2.TotalAlloc))
	if n < LargeOutputBytes {
		t.Fatalf("read %d bytes of outputs, want at least %d", n, LargeOutputBytes)
	}
	if alloc > MaxOutputAlloc {
		t.Fatalf("taking a %d MiB output allocated %.2f MiB, more than MaxOutputAlloc (%d MiB): is it held whole?",
			LargeOutputBytes>>20, mib(alloc), MaxOutputAlloc>>20)
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// testListing: the vendor's listing names the model, and stops naming it
// once withdrawn.
func testListing(t *testing.T, s *suite) {
	l, ok := provider.As[provider.Lister](s.e.Provider)
	if !ok {
		t.Fatalf("the adapter implements no provider.Lister; declare %s lacking, with why", CapListing)
	}
	need(t, s.e.VendorModel != "" && s.e.Unlist != nil, "Env.VendorModel and Vendor.Unlist")
	ctx := context.Background()
	m, err := l.Listed(ctx)
	if err != nil {
		t.Fatalf("Listed: %v", err)
	}
	if !m[s.e.VendorModel].Listed {
		t.Fatalf("Listed does not list %q: %v", s.e.VendorModel, m)
	}
	s.e.Unlist(s.e.VendorModel)
	m, err = l.Listed(ctx)
	if err != nil {
		t.Fatalf("Listed after a withdrawal: %v", err)
	}
	if vm, known := m[s.e.VendorModel]; vm.Listed || !known {
		t.Fatalf("after the vendor withdrew %q, Listed says listed=%v known=%v, want known and not listed", s.e.VendorModel, vm.Listed, known)
	}
}
