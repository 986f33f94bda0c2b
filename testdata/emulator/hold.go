package emulator

import (
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Requests held open while a job runs: Replicate's create with Prefer:
// wait, fal's status stream and OpenAI's synchronous image call. They
// move on the emulator's clock like everything else: each Advance (or
// AdvanceTo) wakes them to look again, so a test on a stopped clock
// decides when they answer and one whose clock follows the wall clock
// (cmd/darkroom's rig) gets them answered as the job ends.

// wake tells held requests the clock moved.
func (e *Emulator) wake() {
	e.mu.Lock()
	close(e.moved)
	e.moved = make(chan struct{})
	e.mu.Unlock()
}

// hold waits until done holds (called under e.mu with the clock's time),
// until is reached on the clock (zero: no bound), the request ends or the
// emulator closes. It reports whether done held.
func (e *Emulator) hold(r *http.Request, until time.Time, done func(now time.Time) bool) bool {
	for {
		e.mu.Lock()
		now := e.clock.Now()
		ok := done(now)
		moved := e.moved
		e.mu.Unlock()
		if ok {
			return true
		}
		if !until.IsZero() && !now.Before(until) {
			return false
		}
		select {
		case <-moved:
		case <-r.Context().Done():
			return false
		case <-e.closed:
			return false
		}
	}
}

// runRE is the "[run=12s]" prompt token.
var runRE = regexp.MustCompile(`\[run=([0-9.]+(?:ns|us|µs|ms|s|m|h))\]`)

// runToken is the run time a prompt scripts, if any.
func runToken(prompt string) (time.Duration, bool) {
	m := runRE.FindStringSubmatch(prompt)
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(m[1])
	return d, err == nil && d >= 0
}

// DoneAt is when the job of provider made for prompt was scripted to end
// (its end, or an earlier cancel or deadline), on the emulator's clock;
// ok is false when there is none. For a prompt submitted more than once,
// the first job's.
func (e *Emulator) DoneAt(provider, prompt string) (t time.Time, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, j := range e.order {
		if p, _ := j.input["prompt"].(string); j.prov == provider && p == prompt {
			return j.doneAt(), true
		}
	}
	return time.Time{}, false
}

// preferRE is Prefer's pattern in Replicate's OpenAPI document
// (parameters_prefer_header: "Set to `wait=n` where n is a number of
// seconds between 1 and 60", pattern ^wait(=([1-9]|[1-9][0-9]|60))?$;
// tryAGI/Replicate src/libs/Replicate/openapi.json at 6c8ab8e,
// 2026-04-09).
var preferRE = regexp.MustCompile(`^wait(=([1-9]|[1-9][0-9]|60))?$`)

// replicateWait reads a create's Prefer header: how long to hold it (0:
// not asked), and ok false for a value the document's pattern refuses.
// A bare "wait" is 60 s ("The request will wait up to 60 seconds for the
// model to run": predictions.create).
func replicateWait(v string) (time.Duration, bool) {
	if v == "" {
		return 0, true
	}
	v = strings.TrimSpace(v)
	m := preferRE.FindStringSubmatch(v)
	if m == nil {
		return 0, false
	}
	if m[2] == "" {
		return 60 * time.Second, true
	}
	n := 0
	for _, c := range m[2] {
		n = n*10 + int(c-'0')
	}
	// The pattern admits 61–99 too; the description bounds n at 60.
	return time.Duration(n) * time.Second, n <= 60
}
