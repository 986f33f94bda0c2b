package generation

import (
	"context"
	"sync"
)

// Creates are the generations created under a context from TrackCreates:
// a request whose handler panicked after its create committed never
// told its caller the id, so AbortCreates ends them instead of letting
// them run, and bill, unseen.
type Creates struct {
	mu  sync.Mutex
	ids []string
}

type createsKey struct{}

// TrackCreates returns ctx with every Create under it recorded in c.
func TrackCreates(ctx context.Context) (context.Context, *Creates) {
	c := &Creates{}
	return context.WithValue(ctx, createsKey{}, c), c
}

// noteCreate records a committed create in ctx's Creates, if any.
func noteCreate(ctx context.Context, id string) {
	if c, ok := ctx.Value(createsKey{}).(*Creates); ok {
		c.mu.Lock()
		c.ids = append(c.ids, id)
		c.mu.Unlock()
	}
}

// AbortCreates ends every generation recorded in c failed, refunded (the
// abandon event: one that ended meanwhile keeps its end), because the
// request that created it failed with an internal error. It returns the
// ids it ended.
func (s *Service) AbortCreates(ctx context.Context, c *Creates) []string {
	c.mu.Lock()
	ids := c.ids
	c.ids = nil
	c.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	var ended []string
	for _, id := range ids {
		const why = "an internal error in darkroom stopped the request that created it (logged on the server)"
		ch := change(id, EventAbandon, "")
		ch.ErrorKind, ch.ErrorMessage = ErrorInternal, why
		ch.Message = "failed: " + why + "; its credits are refunded"
		g, err := s.apply(ctx, ch)
		if err != nil {
			s.log().Error("abort create", "generation", id, "err", err)
			continue
		}
		if g.Status == StatusFailed && g.ErrorMessage == why {
			ended = append(ended, id)
			s.log().Warn("generation abandoned: its create request panicked", "generation", id)
		}
	}
	return ended
}
