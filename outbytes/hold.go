package outbytes

import (
	"context"
	"sync"
)

type holdKey struct{}

// hold collects the release funcs of the shares taken to answer one
// request, released together once its response is written.
type hold struct {
	mu     sync.Mutex
	fns    []func()
	closed bool
}

// WithHold returns ctx carrying a hold, and the func that releases every
// share kept on it (and any kept later, at once). Installed where the
// response is known to be written: around the HTTP handler chain (which
// returns once net/http has the last byte), and around a go-sdk call
// elsewhere (Scope).
func WithHold(ctx context.Context) (context.Context, func()) {
	h := &hold{}
	return context.WithValue(ctx, holdKey{}, h), h.release
}

// HasHold reports whether ctx carries a hold.
func HasHold(ctx context.Context) bool {
	_, ok := ctx.Value(holdKey{}).(*hold)
	return ok
}

func (h *hold) release() {
	h.mu.Lock()
	fns := h.fns
	h.fns, h.closed = nil, true
	h.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// Keep ties release to ctx's hold. Without a hold (or once it was
// released) it releases at once: nothing would.
func Keep(ctx context.Context, release func()) {
	h, ok := ctx.Value(holdKey{}).(*hold)
	if ok {
		h.mu.Lock()
		if !h.closed {
			h.fns = append(h.fns, release)
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
	release()
}
