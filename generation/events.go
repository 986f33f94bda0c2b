package generation

import "sync"

// Hub wakes waiters when a generation changes. It carries no data: a woken
// waiter re-reads the record, so a missed wake-up can never show stale state.
type Hub struct {
	mu      sync.Mutex
	waiters map[string]*watch
	subs    []func(id string)
	// drained is closed by Drain (shutdown): bounded waits end at once.
	drained  chan struct{}
	draining bool
}

type watch struct {
	ch chan struct{}
	n  int
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{waiters: make(map[string]*watch), drained: make(chan struct{})} }

// Watch returns a channel closed at the next change of id, and a release
// func the caller must call when it stops waiting. Take the watch before
// reading the record, so a change between read and wait is not lost.
func (h *Hub) Watch(id string) (<-chan struct{}, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, ok := h.waiters[id]
	if !ok {
		w = &watch{ch: make(chan struct{})}
		h.waiters[id] = w
	}
	w.n++
	released := false
	return w.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if released {
			return
		}
		released = true
		w.n--
		if w.n == 0 && h.waiters[id] == w {
			delete(h.waiters, id)
		}
	}
}

// Subscribe registers fn to be called after every committed change. fn
// must not block; the tasks layer uses it to push notifications.
func (h *Hub) Subscribe(fn func(id string)) {
	h.mu.Lock()
	h.subs = append(h.subs, fn)
	h.mu.Unlock()
}

// Publish wakes everyone watching id.
func (h *Hub) Publish(id string) {
	h.mu.Lock()
	w, ok := h.waiters[id]
	if ok {
		delete(h.waiters, id)
	}
	subs := h.subs
	h.mu.Unlock()
	if ok {
		close(w.ch)
	}
	for _, fn := range subs {
		fn(id)
	}
}

// WakeAll wakes every waiter to re-read, without telling subscribers: a
// resync after changes on other replicas whose notifications may have
// been lost (the tasks layer resyncs its own listeners).
func (h *Hub) WakeAll() {
	h.mu.Lock()
	ws := h.waiters
	h.waiters = make(map[string]*watch, len(ws))
	h.mu.Unlock()
	for _, w := range ws {
		close(w.ch)
	}
}
