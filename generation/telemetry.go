package generation

import (
	"context"
	"log/slog"
	"time"
)

// Telemetry: the lifecycle log lines (info, one per lifecycle event, with
// the generation's ids) and metrics, all after commit. Config.Logger and
// Config.Metrics are optional.

// Meter counts the lifecycle as it is committed (metrics.Set is one): the
// domain names what it reports, the metrics package how.
type Meter interface {
	Created(model, provider, path string, credits int64)
	Submitted(provider string, sinceCreated time.Duration)
	Finished(model, provider, status, errorKind string, sinceCreated time.Duration, refunded int64)
	Webhook(provider, verdict string)
	InFlightHold()
}

// noMeter is the Meter of a service given none.
type noMeter struct{}

func (noMeter) Created(string, string, string, int64)                         {}
func (noMeter) Submitted(string, time.Duration)                               {}
func (noMeter) Finished(string, string, string, string, time.Duration, int64) {}
func (noMeter) Webhook(string, string)                                        {}
func (noMeter) InFlightHold()                                                 {}

type logAttrsKey struct{}

// LogWith adds attributes (key, value pairs) to the creation log line of
// a generation created with ctx: the tasks layer names the task here.
func LogWith(ctx context.Context, args ...any) context.Context {
	prev, _ := ctx.Value(logAttrsKey{}).([]any)
	return context.WithValue(ctx, logAttrsKey{}, append(prev[:len(prev):len(prev)], args...))
}

func (s *Service) log() *slog.Logger {
	if s.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.cfg.Logger
}

// noteCreated logs and counts a generation just committed.
func (s *Service) noteCreated(ctx context.Context, g *Generation, task bool) {
	path := "generationId"
	if task {
		path = "task"
	}
	s.cfg.Metrics.Created(g.ModelID, g.Provider, path, g.Charged)
	args := []any{"generation", g.ID, "model", g.ModelID, "provider", g.Provider, "path", path, "status", string(g.Status), "credits", g.Charged}
	extra, _ := ctx.Value(logAttrsKey{}).([]any)
	s.log().Info("generation created", append(args, extra...)...)
}

// noteChanged follows a committed change. Every status change is a
// compare-and-set whose sources exclude the terminal statuses, so a
// change that leaves g terminal is the one that ended it; the only other
// change to a terminal row is the expiry of its outputs.
func (s *Service) noteChanged(g *Generation, at time.Time) {
	if !g.Status.Terminal() || g.OutputsExpired {
		return
	}
	refunded := int64(0)
	if g.Status == StatusCancelled {
		refunded = g.Credits - g.Charged
	}
	took := at.Sub(g.CreatedAt)
	s.cfg.Metrics.Finished(g.ModelID, g.Provider, string(g.Status), string(g.ErrorKind), took, refunded)
	args := []any{"generation", g.ID, "model", g.ModelID, "provider", g.Provider, "seconds", took.Round(time.Millisecond).Seconds()}
	if g.Status == StatusFailed {
		args = append(args, "errorKind", string(g.ErrorKind), "error", g.ErrorMessage)
	}
	s.log().Info("generation "+string(g.Status), args...)
}

// noteStatus logs a move between live statuses (queued, running) and a
// cancel handed to the provider.
func (s *Service) noteStatus(g *Generation, what string) {
	args := []any{"generation", g.ID, "status", string(g.Status)}
	s.log().Info("generation "+what, args...)
}

// noteSubmitted logs and times the provider's acceptance of a job.
func (r *Runner) noteSubmitted(g *Generation, provider, jobID string) {
	r.s.cfg.Metrics.Submitted(provider, r.s.cfg.Now().Sub(g.CreatedAt))
	r.s.log().Info("generation submitted", "generation", g.ID, "provider", provider, "job", jobID)
}

// Waiting counts the callers watching a generation (bounded waits).
func (h *Hub) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, w := range h.waiters {
		n += w.n
	}
	return n
}

// Drain ends every bounded wait, now and later, as timed out (the caller
// is told to call again, which a restarted server answers): the process
// is shutting down.
func (h *Hub) Drain() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.draining {
		h.draining = true
		close(h.drained)
	}
}

// Drained is closed once Drain was called.
func (h *Hub) Drained() <-chan struct{} { return h.drained }
