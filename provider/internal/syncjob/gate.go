package syncjob

import (
	"fmt"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Gate bounds the synchronous calls one provider holds open at once: each
// holds a runner worker for its whole length (up to minutes), so without
// a bound a burst of image calls would stall every other generation.
type Gate struct {
	slots chan struct{}
	retry time.Duration
}

// NewGate allows n calls at once (default 4); a refused one is retried
// after retry (default 2 s).
func NewGate(n int, retry time.Duration) *Gate {
	if n <= 0 {
		n = 4
	}
	if retry <= 0 {
		retry = 2 * time.Second
	}
	return &Gate{slots: make(chan struct{}, n), retry: retry}
}

// Enter takes a slot, or answers a RetryableError wrapping ErrNotCreated
// and ErrAtCapacity (the generation stays queued, spending no attempt);
// call the returned func when done.
func (g *Gate) Enter(name string) (func(), error) {
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }, nil
	default:
		return nil, &provider.RetryableError{
			Err:   fmt.Errorf("%w: %w: %s: %d calls already in flight", provider.ErrNotCreated, provider.ErrAtCapacity, name, cap(g.slots)),
			After: g.retry,
		}
	}
}
