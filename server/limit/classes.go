package limit

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Server defaults for the named buckets.
const (
	DefaultPollRate     = 5.0 // tasks/get, get_generation, ... per second per caller
	DefaultPollBurst    = 20
	DefaultCreateRate   = 1.0 // generate / task-creating tools/call per second per caller
	DefaultCreateBurst  = 10
	DefaultPreAuthRate  = 20.0 // requests per second per client IP, before authentication
	DefaultPreAuthBurst = 100
	// Bytes: request body bytes per second per caller (upload_input's
	// images are what spends it: about 70 ms of CPU per MiB decoded), and
	// a burst of two full-size uploads at the default body cap.
	DefaultByteRate  = 1 << 20
	DefaultByteBurst = 32 << 20
	// DefaultMaxListens is the number of subscriptions/listen streams one
	// caller may hold open at once.
	DefaultMaxListens = 10
)

// Class is a named bucket: a Limiter plus its default rate and burst.
type Class struct {
	*Limiter
	Rate  float64
	Burst int
	// Split, when set, divides the rate and burst the buckets enforce
	// (not Effective's: that stays the caller's fleet-wide rate) among
	// the live replicas.
	Split *Split
	// Scale, when above 1, multiplies the rate and burst the buckets
	// enforce (not Effective's): a loose per-replica flood guard in front
	// of a limit decided exactly elsewhere (the create rate, in the
	// creating transaction).
	Scale float64
}

// Split is the number of live replicas sharing a fleet-wide rate: each
// replica's bucket refills at rate/n with burst ceil(burst/n), so a
// caller spread evenly over n replicas (a round-robin balancer) gets the
// configured rate in all, and one pinned to a replica (a sticky one)
// gets rate/n: stricter, never looser. The zero value and n < 1 mean 1.
type Split struct{ n atomic.Int64 }

// Set records n live replicas.
func (s *Split) Set(n int) { s.n.Store(int64(n)) }

// N is the divisor in force (at least 1).
func (s *Split) N() int {
	if s == nil {
		return 1
	}
	return int(max(s.n.Load(), 1))
}

// Of is rate and burst divided among the live replicas.
func (s *Split) Of(r float64, burst int) (float64, int) {
	n := s.N()
	if n == 1 {
		return r, burst
	}
	return r / float64(n), (burst + n - 1) / n
}

// Effective returns the rate and burst for a caller, taking non-nil overrides
// (e.g. auth.Overrides.PollRate / PollBurst) over the class defaults.
func (c Class) Effective(rateOverride *float64, burstOverride *int) (float64, int) {
	r, b := c.Rate, c.Burst
	if rateOverride != nil {
		r = *rateOverride
	}
	if burstOverride != nil {
		b = *burstOverride
	}
	return r, b
}

// AllowFor is Allow with the class defaults and optional per-caller overrides.
func (c Class) AllowFor(key string, rateOverride *float64, burstOverride *int) (bool, time.Duration) {
	return c.AllowForN(key, rateOverride, burstOverride, 1)
}

// AllowForN is AllowFor for n calls at once (all or none).
func (c Class) AllowForN(key string, rateOverride *float64, burstOverride *int, n int) (bool, time.Duration) {
	r, b := c.enforced(rateOverride, burstOverride)
	return c.AllowNAt(c.now(), key, r, b, n)
}

// AllowForAtMostN is AllowForN for a cost of n that may exceed the burst
// (a listen's task ids, a body's bytes): such a cost takes the whole
// bucket, so it is admitted once the bucket is full, never more often.
func (c Class) AllowForAtMostN(key string, rateOverride *float64, burstOverride *int, n int) (bool, time.Duration) {
	r, b := c.enforced(rateOverride, burstOverride)
	return c.AllowNAt(c.now(), key, r, b, min(n, max(b, 1)))
}

// ShortFor reports that key's bucket (class defaults, optional overrides)
// holds fewer than n tokens (at most its burst), and when it will; it
// takes nothing.
func (c Class) ShortFor(key string, rateOverride *float64, burstOverride *int, n int) (bool, time.Duration) {
	r, b := c.enforced(rateOverride, burstOverride)
	return c.ShortAt(c.now(), key, r, b, n)
}

// enforced is the rate and burst the buckets apply (Split, Scale).
func (c Class) enforced(rateOverride *float64, burstOverride *int) (float64, int) {
	r, b := c.Split.Of(c.Effective(rateOverride, burstOverride))
	if c.Scale > 1 {
		r, b = r*c.Scale, int(math.Ceil(float64(b)*c.Scale))
	}
	return r, b
}

// Classes are the buckets the server uses. Poll, Create and Bytes are
// keyed by principal ID; PreAuth by client IP (see ClientIP and IPKey).
// Listens bounds each principal's open subscriptions/listen streams;
// ListenOwed remembers the listens Poll refused (Owed).
type Classes struct {
	Poll, Create, PreAuth, Bytes Class
	Listens                      *Slots
	ListenOwed                   Owed
}

// NewClasses returns the three classes with the default rates, each on its
// own Limiter built from o.
func NewClasses(o Options) *Classes {
	return &Classes{
		Poll:    Class{Limiter: New(o), Rate: DefaultPollRate, Burst: DefaultPollBurst},
		Create:  Class{Limiter: New(o), Rate: DefaultCreateRate, Burst: DefaultCreateBurst},
		PreAuth: Class{Limiter: New(o), Rate: DefaultPreAuthRate, Burst: DefaultPreAuthBurst},
		Bytes:   Class{Limiter: New(o), Rate: DefaultByteRate, Burst: DefaultByteBurst},
		Listens: NewSlots(DefaultMaxListens),
	}
}

// Run sweeps all classes until ctx is done.
func (c *Classes) Run(ctx context.Context) {
	var wg sync.WaitGroup
	// Only the limiters sweep: a class's rate fields are not read here.
	for _, l := range []*Limiter{c.Poll.Limiter, c.Create.Limiter, c.PreAuth.Limiter, c.Bytes.Limiter} {
		if l != nil {
			wg.Go(func() { l.Run(ctx) })
		}
	}
	wg.Wait()
}

// SuggestPollInterval returns the pollIntervalMs to hand a caller whose poll
// bucket refills at rate per second: max(base, 1/rate rounded up to the
// millisecond). A client that waits that long between polls takes tokens no
// faster than they refill, so it never meets a 429 on its own (polls of
// several tasks by one caller share the bucket). A non-positive or NaN rate,
// or +Inf, returns base.
func SuggestPollInterval(rate float64, base time.Duration) time.Duration {
	if !(rate > 0) || math.IsInf(rate, 1) {
		return base
	}
	ms := math.Ceil(1000 / rate)
	if ms > float64(math.MaxInt64/int64(time.Millisecond)) {
		return max(base, time.Duration(math.MaxInt64))
	}
	return max(base, time.Duration(ms)*time.Millisecond)
}
