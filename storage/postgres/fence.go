package postgres

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The fence bounds how stale this replica's view of the other replicas'
// commits can be, without a read per request. PostgreSQL delivers
// notifications to a listening session in commit order. Every FenceEvery
// the replica notifies its own fence channel (a sequence number, its send
// time kept here) from a pooled connection; when the listener hears it
// back, every commit that finished before that send has been delivered to
// the listener, and dispatched, since the listener handles notifications
// one at a time in order. Fresh reports whether the latest echoed fence
// was sent within FenceWindow of now: then every change committed more
// than FenceWindow ago is known here (its notification has dropped any
// older cached copy), and a cached row may be served.
const (
	FenceEvery  = 75 * time.Millisecond
	FenceWindow = 250 * time.Millisecond // the least pollIntervalMs
)

// Fence is a replica's listener fence (see FenceEvery). Only a fence sent
// after the listener's LISTEN on its current connection counts: a
// reconnect forgets the ones in flight and the last echo.
type Fence struct {
	now           func() time.Time
	every, window time.Duration

	mu      sync.Mutex
	live    bool // the listener listens
	seq     uint64
	pending map[uint64]time.Time // sent, not echoed yet: send times
	last    time.Time            // send time of the latest echo (zero: none on this connection)
}

// NewFence returns a fence on clock now (nil: time.Now) sent every
// every and fresh for window.
func NewFence(now func() time.Time, every, window time.Duration) *Fence {
	if now == nil {
		now = time.Now
	}
	return &Fence{now: now, every: every, window: window, pending: map[uint64]time.Time{}}
}

// Fresh reports whether the latest echoed fence was sent within the
// window of now (false while the listener is not connected or has heard
// no fence since it connected).
func (f *Fence) Fresh() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live && !f.last.IsZero() && f.now().Sub(f.last) <= f.window
}

// connected: the listener listens again; what was in flight is forgotten.
func (f *Fence) connected() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live, f.last = true, time.Time{}
	clear(f.pending)
}

// disconnected: the listener lost its connection; nothing is fresh.
func (f *Fence) disconnected() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live, f.last = false, time.Time{}
	clear(f.pending)
}

// next records a fence about to be sent and returns its payload (false:
// the listener is not connected, nothing to send). The send time is taken
// before the NOTIFY is sent, so every commit finished before it commits
// before the fence does.
func (f *Fence) next() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live {
		return "", false
	}
	if len(f.pending) >= 64 { // echoes lost: only newer ones matter
		clear(f.pending)
	}
	f.seq++
	f.pending[f.seq] = f.now()
	return strconv.FormatUint(f.seq, 10), true
}

// echoed records the listener hearing a fence back.
func (f *Fence) echoed(payload string) {
	seq, err := strconv.ParseUint(payload, 10, 64)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sent, ok := f.pending[seq]
	if !ok {
		return // sent before this connection listened
	}
	for s := range f.pending {
		if s <= seq {
			delete(f.pending, s)
		}
	}
	if sent.After(f.last) {
		f.last = sent
	}
}

// run sends a fence every f.every on pool until ctx ends.
func (f *Fence) run(ctx context.Context, pool *pgxpool.Pool, channel string) {
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		payload, ok := f.next()
		if !ok {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, _ = pool.Exec(sctx, "SELECT pg_notify($1, $2)", channel, payload)
		cancel()
	}
}

// Fence is this handle's listener fence: Fresh says whether a cached row
// of a live task may be served (tasks.Shared).
func (d *DB) Fence() *Fence { return d.fence }

// fenceChannel is this replica's own fence channel (origin is hex).
func (d *DB) fenceChannel() string { return "darkroom_fence_" + d.origin }
