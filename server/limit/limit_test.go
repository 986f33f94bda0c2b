package limit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
)

func newClock() *testclock.Clock { return testclock.New(time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)) }

// drain takes from c's bucket for "k" until it refuses: how many it
// admitted is the burst.
func drain(c Class, ro *float64, bo *int) int {
	n := 0
	for {
		if ok, _ := c.AllowFor("k", ro, bo); !ok {
			return n
		}
		n++
	}
}

// admitted counts what c admits for "k" over d, asked once every step
// of the clock.
func admitted(clk *testclock.Clock, c Class, ro *float64, bo *int, d, step time.Duration) int {
	got := 0
	for range d / step {
		clk.Advance(step)
		if ok, _ := c.AllowFor("k", ro, bo); ok {
			got++
		}
	}
	return got
}

func TestBurstThenDeny(t *testing.T) {
	tests := []struct {
		rate  float64
		burst int
		retry time.Duration
	}{
		{5, 20, 200 * time.Millisecond}, // poll default
		{1, 10, time.Second},            // create default
		{0.5, 1, 2 * time.Second},
		{100, 3, 10 * time.Millisecond},
		{4, 0, 250 * time.Millisecond}, // burst < 1 counts as 1
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%g/s burst %d", tt.rate, tt.burst), func(t *testing.T) {
			clk := newClock()
			l := New(Options{Now: clk.Now})
			for i := range max(tt.burst, 1) {
				if ok, d := l.Allow("k", tt.rate, tt.burst); !ok {
					t.Fatalf("call %d denied (retry %v) within burst", i+1, d)
				}
			}
			// Denials cost nothing: asking again reports the same wait.
			for range 3 {
				ok, d := l.Allow("k", tt.rate, tt.burst)
				if ok || d != tt.retry {
					t.Fatalf("after burst: ok=%v retry=%v, want false %v", ok, d, tt.retry)
				}
			}
			clk.Advance(tt.retry / 2)
			if ok, d := l.Allow("k", tt.rate, tt.burst); ok || d != tt.retry-tt.retry/2 {
				t.Fatalf("half way: ok=%v retry=%v, want %v", ok, d, tt.retry-tt.retry/2)
			}
			clk.Advance(tt.retry - tt.retry/2)
			if ok, d := l.Allow("k", tt.rate, tt.burst); !ok {
				t.Fatalf("after retryAfter: denied, retry %v", d)
			}
			if ok, d := l.Allow("k", tt.rate, tt.burst); ok || d != tt.retry {
				t.Fatalf("next: ok=%v retry=%v", ok, d)
			}
		})
	}
}

func TestKeysIndependent(t *testing.T) {
	clk := newClock()
	l := New(Options{Now: clk.Now})
	for range 2 {
		l.Allow("alice", 1, 2)
	}
	if ok, _ := l.Allow("alice", 1, 2); ok {
		t.Fatal("alice not limited")
	}
	for i := range 2 {
		if ok, _ := l.Allow("bob", 1, 2); !ok {
			t.Fatalf("bob denied on call %d because of alice", i+1)
		}
	}
	if l.Len() != 2 {
		t.Errorf("Len = %d", l.Len())
	}
}

func TestRateChangeApplies(t *testing.T) {
	clk := newClock()
	l := New(Options{Now: clk.Now})
	l.Allow("k", 1, 1)
	if ok, d := l.Allow("k", 1, 1); ok || d != time.Second {
		t.Fatalf("ok=%v d=%v", ok, d)
	}
	// The caller's override is raised: the new rate applies at once.
	if ok, d := l.Allow("k", 10, 1); ok || d != 100*time.Millisecond {
		t.Fatalf("after SetLimit: ok=%v d=%v, want 100ms", ok, d)
	}
	// A bigger burst applies at once but does not mint tokens: the bucket
	// keeps its level and then fills up to the new size.
	clk.Advance(time.Second)
	if ok, _ := l.Allow("k", 10, 5); !ok {
		t.Fatal("refilled token denied")
	}
	if ok, d := l.Allow("k", 10, 5); ok || d != 100*time.Millisecond {
		t.Fatalf("after SetBurst: ok=%v d=%v", ok, d)
	}
	clk.Advance(time.Second)
	for i := range 5 {
		if ok, d := l.Allow("k", 10, 5); !ok {
			t.Fatalf("burst 5 call %d denied (%v)", i+1, d)
		}
	}
	if ok, _ := l.Allow("k", 10, 5); ok {
		t.Fatal("6th allowed with burst 5")
	}
}

func TestSpecialRates(t *testing.T) {
	l := New(Options{Now: newClock().Now})
	for range 1000 {
		if ok, d := l.Allow("k", math.Inf(1), 1); !ok || d != 0 {
			t.Fatal("Inf rate denied")
		}
	}
	if l.Len() != 0 {
		t.Error("Inf rate kept state")
	}
	for _, r := range []float64{0, -1, math.NaN()} {
		if ok, d := l.Allow("k", r, 10); ok || d != MaxRetryAfter {
			t.Errorf("rate %v: ok=%v d=%v", r, ok, d)
		}
	}
}

func TestEvictionBounds(t *testing.T) {
	clk := newClock()
	l := New(Options{Now: clk.Now, MaxKeys: 3})
	for _, k := range []string{"a", "b", "c"} {
		l.Allow(k, 1, 1) // each bucket now empty
		clk.Advance(time.Millisecond)
	}
	l.Allow("a", 1, 1) // touch a: b becomes the oldest
	l.Allow("d", 1, 1)
	if l.Len() != 3 {
		t.Fatalf("Len = %d, want 3", l.Len())
	}
	// b was dropped, so it starts with a full bucket; a and c kept theirs.
	if ok, _ := l.Allow("b", 1, 1); !ok {
		t.Error("b was not evicted")
	}
	if ok, _ := l.Allow("a", 1, 1); ok {
		t.Error("a lost its state (it was recently used)")
	}
	for i := range 10_000 {
		l.Allow(fmt.Sprint("flood", i), 1, 1)
	}
	if l.Len() != 3 {
		t.Errorf("Len after flood = %d, want 3", l.Len())
	}
}

func TestSweep(t *testing.T) {
	clk := newClock()
	l := New(Options{Now: clk.Now, MaxIdle: time.Hour})
	l.Allow("fast", 10, 1)    // full again after 100ms
	l.Allow("medium", 1, 5)   // full again after 1s
	l.Allow("slow", 0.001, 2) // full again after 1000s
	clk.Advance(200 * time.Millisecond)
	if n := l.Sweep(clk.Now()); n != 1 || l.Len() != 2 {
		t.Fatalf("swept %d (Len %d), want only fast", n, l.Len())
	}
	clk.Advance(time.Second)
	if n := l.Sweep(clk.Now()); n != 1 || l.Len() != 1 {
		t.Fatalf("swept %d (Len %d), want medium", n, l.Len())
	}
	// slow keeps its state: one token left, so one call, then denied.
	l.Allow("slow", 0.001, 2)
	if ok, _ := l.Allow("slow", 0.001, 2); ok {
		t.Fatal("slow bucket state lost")
	}
	// Idle longer than MaxIdle: dropped although not yet full.
	clk.Advance(time.Hour)
	if n := l.Sweep(clk.Now()); n != 1 || l.Len() != 0 {
		t.Fatalf("MaxIdle sweep: swept %d, Len %d", n, l.Len())
	}
}

// TestRunStops: each sweeper's Run returns once its context ends;

// TestRunStops: Run sweeps idle keys every SweepEvery while its context
// lives; once the context is cancelled it returns, and sweeps no more.
func TestRunStops(t *testing.T) {
	opts := Options{SweepEvery: time.Minute, MaxIdle: time.Minute}
	for _, tc := range []struct {
		name string
		make func() (*Limiter, func(context.Context))
	}{
		{"Limiter", func() (*Limiter, func(context.Context)) { l := New(opts); return l, l.Run }},
		{"Classes", func() (*Limiter, func(context.Context)) { c := NewClasses(opts); return c.Poll.Limiter, c.Run }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, run := tc.make()
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { run(ctx); close(done) }()
				l.Allow("before", 1, 1)
				time.Sleep(3 * opts.SweepEvery)
				synctest.Wait()
				if n := l.Len(); n != 0 {
					t.Fatalf("%d keys left three sweeps after the key went idle: Run is not sweeping", n)
				}
				cancel()
				synctest.Wait()
				select {
				case <-done:
				default:
					t.Fatal("Run still running after its context was cancelled")
				}
				l.Allow("after", 1, 1)
				time.Sleep(3 * opts.SweepEvery)
				synctest.Wait()
				if n := l.Len(); n != 1 {
					t.Fatalf("%d keys after the stop; want the idle key kept: something still sweeps", n)
				}
			})
		})
	}
}

func TestConcurrentExactBudget(t *testing.T) {
	clk := newClock()
	l := New(Options{Now: clk.Now})
	var allowed [4]atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 100 {
				k := (g + i) % 4
				if ok, _ := l.Allow(fmt.Sprint("k", k), 1, 25); ok {
					allowed[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range allowed {
		if n := allowed[k].Load(); n != 25 {
			t.Errorf("key %d: %d allowed, want exactly the burst 25", k, n)
		}
	}
}

func TestClasses(t *testing.T) {
	clk := newClock()
	c := NewClasses(Options{Now: clk.Now})
	if c.Poll.Rate != 5 || c.Poll.Burst != 20 || c.Create.Rate != 1 || c.Create.Burst != 10 {
		t.Fatalf("defaults: %+v %+v", c.Poll, c.Create)
	}
	for i := range 20 {
		if ok, _ := c.Poll.AllowFor("alice", nil, nil); !ok {
			t.Fatalf("poll %d denied", i+1)
		}
	}
	if ok, d := c.Poll.AllowFor("alice", nil, nil); ok || d != 200*time.Millisecond {
		t.Fatalf("poll 21: ok=%v d=%v", ok, d)
	}
	// Buckets of different classes are separate.
	if ok, _ := c.Create.AllowFor("alice", nil, nil); !ok {
		t.Fatal("create denied because of polls")
	}
	// Overrides: 2 per second, burst 1.
	r, b := 2.0, 1
	c.Create.AllowFor("bob", &r, &b)
	if ok, d := c.Create.AllowFor("bob", &r, &b); ok || d != 500*time.Millisecond {
		t.Fatalf("override: ok=%v d=%v", ok, d)
	}
	if gr, gb := c.Poll.Effective(&r, nil); gr != 2 || gb != 20 {
		t.Errorf("Effective = %v, %v", gr, gb)
	}
}

func TestSuggestPollInterval(t *testing.T) {
	tests := []struct {
		rate float64
		base time.Duration
		want time.Duration
	}{
		{5, 0, 200 * time.Millisecond},
		{5, time.Second, time.Second},
		{5, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 0, 334 * time.Millisecond}, // 333.33 rounded up
		{1, 500 * time.Millisecond, time.Second},
		{0.1, 0, 10 * time.Second},
		{7, 0, 143 * time.Millisecond},
		{2000, 0, time.Millisecond},
		{0, time.Second, time.Second},
		{-1, time.Second, time.Second},
		{math.NaN(), time.Second, time.Second},
		{math.Inf(1), time.Second, time.Second},
	}
	for _, tt := range tests {
		if got := SuggestPollInterval(tt.rate, tt.base); got != tt.want {
			t.Errorf("SuggestPollInterval(%v, %v) = %v, want %v", tt.rate, tt.base, got, tt.want)
		}
	}
	// A client polling at the suggested interval is never refused.
	for _, r := range []float64{5, 3, 7, 0.3, 1.0 / 3} {
		clk := newClock()
		l := New(Options{Now: clk.Now})
		iv := SuggestPollInterval(r, 0)
		for i := range 500 {
			if ok, d := l.Allow("k", r, 1); !ok {
				t.Fatalf("rate %v, interval %v: poll %d refused (retry %v)", r, iv, i, d)
			}
			clk.Advance(iv)
		}
	}
}

// TestSplit: each of n replicas enforces rate/n and ceil(burst/n), so n
// of them behind a round-robin balancer admit the configured rate; the
// split follows the live count as it changes, and overrides are split too.
func TestSplit(t *testing.T) {
	const secs = 10
	for _, tt := range []struct {
		n, wantBurst int
		override     bool
	}{{0, 20, false}, {1, 20, false}, {2, 10, false}, {3, 7, false}, {3, 4, true}, {40, 1, false}} {
		t.Run(fmt.Sprintf("n=%d override=%v", tt.n, tt.override), func(t *testing.T) {
			clk := newClock()
			split := &Split{}
			split.Set(tt.n)
			c := Class{Limiter: New(Options{Now: clk.Now}), Rate: 30, Burst: 20, Split: split}
			var ro *float64
			var bo *int
			rate := 30.0
			if tt.override {
				rate, ro, bo = 6, new(6.0), new(10)
			}
			if burst := drain(c, ro, bo); burst != tt.wantBurst {
				t.Errorf("burst = %d, want %d", burst, tt.wantBurst)
			}
			got := admitted(clk, c, ro, bo, secs*time.Second, time.Millisecond)
			want := rate / float64(max(tt.n, 1)) * secs
			if math.Abs(float64(got)-want) > 1 {
				t.Errorf("%d admitted in %d s, want %.0f (%g/s split %d ways)", got, secs, want, rate, tt.n)
			}
			if r, b := c.Effective(ro, bo); r != rate || (b != 20 && !tt.override) {
				t.Errorf("Effective = %v, %v: the fleet-wide rate, unsplit", r, b)
			}
		})
	}
	// A replica joins: the next call is held to the new share.
	clk := newClock()
	split := &Split{}
	c := Class{Limiter: New(Options{Now: clk.Now}), Rate: 10, Burst: 1, Split: split}
	c.AllowFor("k", nil, nil)
	split.Set(2)
	if ok, d := c.AllowFor("k", nil, nil); ok || d != 200*time.Millisecond {
		t.Fatalf("after the split changed to 2: ok=%v retry=%v, want 200ms", ok, d)
	}
}

// ShortAt takes nothing and says, for a cost of n, what AllowNAt (at most
// the burst) would: short exactly when the take would be refused, and
// after the wait it gives, no longer short.
func TestShortAt(t *testing.T) {
	tests := []struct {
		name  string
		taken int // tokens taken first
		n     int
		short bool
		wait  time.Duration
	}{
		{"unknown key: a full bucket", -1, 20, false, 0},
		{"full bucket", 0, 20, false, 0},
		{"past the burst: the whole bucket", 0, 1000, false, 0},
		{"one short", 1, 20, true, 200 * time.Millisecond},
		{"empty, one token", 20, 1, true, 200 * time.Millisecond},
		{"empty, past the burst", 20, 1000, true, 4 * time.Second},
		{"enough left", 10, 10, false, 0},
		{"nothing asked", 20, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			l := New(Options{Now: clk.Now})
			if tt.taken >= 0 {
				if ok, _ := l.AllowNAt(clk.Now(), "k", 5, 20, max(tt.taken, 1)); !ok {
					t.Fatal("setup take refused")
				}
				if tt.taken == 0 { // a bucket that exists, full again
					clk.Advance(time.Second)
				}
			}
			short, wait := l.ShortAt(clk.Now(), "k", 5, 20, tt.n)
			if short != tt.short || wait != tt.wait {
				t.Fatalf("ShortAt(%d) = %v, %v; want %v, %v", tt.n, short, wait, tt.short, tt.wait)
			}
			if ok, _ := l.AllowNAt(clk.Now(), "k", 5, 20, min(tt.n, 20)); ok == short {
				t.Fatalf("AllowNAt admitted %v where ShortAt said short %v", ok, short)
			}
			if short {
				clk.Advance(wait)
				if again, _ := l.ShortAt(clk.Now(), "k", 5, 20, tt.n); again {
					t.Fatalf("still short after the wait %v", wait)
				}
			}
		})
	}
}
