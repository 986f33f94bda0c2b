package generation

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// capacityProvider refuses its first refusals submits the way an
// adapter's own bound on calls at once does (syncjob.Gate, fal's
// MaxConcurrent), or as an ordinary retryable fault.
type capacityProvider struct {
	provider.Provider
	refusals atomic.Int32
	err      error
}

func (c *capacityProvider) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	if c.refusals.Add(-1) >= 0 {
		return provider.Job{}, &provider.RetryableError{Err: c.err, After: time.Millisecond}
	}
	return c.Provider.Submit(ctx, req)
}

// TestRunnerAtCapacitySpendsNoAttempt: refused by the adapter's own cap
// more times than MaxAttempts, a generation still completes once a call
// is free; the same number of ordinary retryable faults fails it.
func TestRunnerAtCapacitySpendsNoAttempt(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Status
	}{
		{"at capacity: waits", fmt.Errorf("%w: %w: 4 calls already in flight", provider.ErrNotCreated, provider.ErrAtCapacity), StatusCompleted},
		{"a 429: attempts spent", fmt.Errorf("%w: throttled", provider.ErrNotCreated), StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cp *capacityProvider
			e := newEnv(t, func(c *Config) {
				cp = &capacityProvider{Provider: c.Providers[0], err: tc.err}
				cp.refusals.Store(6)
				c.Providers[0] = cp
			})
			startRunnerWith(t, e, RunnerConfig{MaxAttempts: 3})
			g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "a heron", AspectRatio: "1:1"})
			if done := e.waitDone(g.ID); done.Status != tc.want {
				t.Fatalf("ended %s (%s), want %s", done.Status, done.StatusMessage, tc.want)
			}
		})
	}
}
