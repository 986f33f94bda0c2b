// Package limit holds darkroom's per-caller rate limits: keyed token buckets
// on golang.org/x/time/rate with bounded memory, the JSON-RPC error shape for
// an over-limit request, and the client-IP helper for pre-auth throttling.
//
// All time comes from an injectable clock and is passed explicitly to the
// buckets (ReserveN(now, 1)), so tests use a fake clock and never sleep.
package limit

import (
	"container/list"
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Options configure a Limiter. Zero values take the defaults.
type Options struct {
	// MaxKeys bounds the number of tracked keys (default 100,000). When a new
	// key would exceed it, the least recently used key is dropped.
	MaxKeys int
	// MaxIdle drops a key not seen for this long even if its bucket is not
	// yet full (default 1h). Sweep drops keys with a full bucket at once.
	MaxIdle time.Duration
	// SweepEvery is Run's ticker period (default 1 min).
	SweepEvery time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Defaults for Options.
const (
	DefaultMaxKeys    = 100_000
	DefaultMaxIdle    = time.Hour
	DefaultSweepEvery = time.Minute
)

// MaxRetryAfter is reported when a key can never be admitted (rate <= 0).
const MaxRetryAfter = time.Hour

// Limiter is a set of token buckets, one per key, each with its own rate and
// burst (so per-caller overrides work). It is safe for concurrent use.
type Limiter struct {
	mu      sync.Mutex
	m       map[string]*list.Element // of *entry
	lru     list.List                // front = most recently used
	maxKeys int
	maxIdle time.Duration
	every   time.Duration
	now     func() time.Time
}

type entry struct {
	key      string
	lim      *rate.Limiter
	lastSeen time.Time
}

// New returns an empty Limiter.
func New(o Options) *Limiter {
	l := &Limiter{
		m:       make(map[string]*list.Element),
		maxKeys: o.MaxKeys,
		maxIdle: o.MaxIdle,
		every:   o.SweepEvery,
		now:     o.Now,
	}
	if l.maxKeys <= 0 {
		l.maxKeys = DefaultMaxKeys
	}
	if l.maxIdle <= 0 {
		l.maxIdle = DefaultMaxIdle
	}
	if l.every <= 0 {
		l.every = DefaultSweepEvery
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

// Allow takes one token from key's bucket, which refills at rate tokens per
// second up to burst. If no token is available it takes nothing and returns
// the time until one will be. A changed rate or burst for an existing key is
// applied (SetLimitAt/SetBurstAt) before the check. rate may be +Inf (always
// allowed); rate <= 0 or NaN is always denied with MaxRetryAfter; burst < 1
// counts as 1.
func (l *Limiter) Allow(key string, r float64, burst int) (ok bool, retryAfter time.Duration) {
	return l.AllowAt(l.now(), key, r, burst)
}

// AllowAt is Allow at an explicit time.
func (l *Limiter) AllowAt(now time.Time, key string, r float64, burst int) (ok bool, retryAfter time.Duration) {
	return l.AllowNAt(now, key, r, burst, 1)
}

// AllowNAt takes n tokens at once, or none: a batch of n calls is admitted
// whole or refused whole. More than burst is never admitted
// (MaxRetryAfter).
func (l *Limiter) AllowNAt(now time.Time, key string, r float64, burst, n int) (ok bool, retryAfter time.Duration) {
	if n <= 0 {
		return true, 0
	}
	if math.IsInf(r, 1) {
		return true, 0
	}
	if !(r > 0) {
		return false, MaxRetryAfter
	}
	burst = max(burst, 1)

	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.get(now, key, rate.Limit(r), burst)
	res := lim.ReserveN(now, n)
	if !res.OK() { // n > burst (n = 1 cannot fail with burst >= 1 and a finite rate > 0)
		return false, MaxRetryAfter
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now) // give the token back: a denied call costs nothing
		return false, d
	}
	return true, 0
}

// ShortAt reports that key's bucket holds fewer than n tokens at now
// (at most its burst: a cost past the burst takes the whole bucket, as
// AllowForAtMostN), and the time until it will hold them; it takes
// nothing, and a key without a bucket has a full one.
func (l *Limiter) ShortAt(now time.Time, key string, r float64, burst, n int) (short bool, retryAfter time.Duration) {
	if math.IsInf(r, 1) || n <= 0 {
		return false, 0
	}
	if !(r > 0) {
		return true, MaxRetryAfter
	}
	burst = max(burst, 1)
	need := float64(min(n, burst))
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.m[key]; !ok {
		return false, 0
	}
	tokens := l.get(now, key, rate.Limit(r), burst).TokensAt(now)
	if tokens >= need {
		return false, 0
	}
	return true, time.Duration((need - tokens) / r * float64(time.Second))
}

// get returns key's bucket, creating it (full) or updating its settings.
// l.mu must be held.
func (l *Limiter) get(now time.Time, key string, r rate.Limit, burst int) *rate.Limiter {
	if el, ok := l.m[key]; ok {
		e := el.Value.(*entry)
		e.lastSeen = now
		l.lru.MoveToFront(el)
		if e.lim.Limit() != r {
			e.lim.SetLimitAt(now, r)
		}
		if e.lim.Burst() != burst {
			e.lim.SetBurstAt(now, burst)
		}
		return e.lim
	}
	for len(l.m) >= l.maxKeys {
		l.remove(l.lru.Back())
	}
	e := &entry{key: key, lim: rate.NewLimiter(r, burst), lastSeen: now}
	l.m[key] = l.lru.PushFront(e)
	return e.lim
}

func (l *Limiter) remove(el *list.Element) {
	delete(l.m, el.Value.(*entry).key)
	l.lru.Remove(el)
}

// Sweep drops keys whose bucket has refilled completely by now (forgetting
// them changes nothing: a new bucket starts full) and keys idle longer than
// MaxIdle. It returns the number dropped.
func (l *Limiter) Sweep(now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for el := l.lru.Back(); el != nil; {
		prev := el.Prev()
		e := el.Value.(*entry)
		if now.Sub(e.lastSeen) >= l.maxIdle || e.lim.TokensAt(now) >= float64(e.lim.Burst()) {
			l.remove(el)
			n++
		}
		el = prev
	}
	return n
}

// Run sweeps every SweepEvery until ctx is done.
func (l *Limiter) Run(ctx context.Context) {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.Sweep(l.now())
		}
	}
}

// Len returns the number of tracked keys.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
