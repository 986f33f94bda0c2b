package limit

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestScale: a scaled class (the create flood guard) admits Scale times
// the caller's burst and rate, overrides included, while Effective stays
// the caller's own.
func TestScale(t *testing.T) {
	const secs = 10
	for _, tt := range []struct {
		scale     float64
		override  bool
		wantBurst int
		wantRate  float64
	}{
		{0, false, 5, 2}, {1, false, 5, 2}, {4, false, 20, 8}, {4, true, 12, 4}, {2.5, false, 13, 5},
	} {
		t.Run(fmt.Sprintf("scale=%g override=%v", tt.scale, tt.override), func(t *testing.T) {
			clk := newClock()
			c := Class{Limiter: New(Options{Now: clk.Now}), Rate: 2, Burst: 5, Scale: tt.scale}
			var ro *float64
			var bo *int
			if tt.override {
				ro, bo = new(1.0), new(3)
			}
			if burst := drain(c, ro, bo); burst != tt.wantBurst {
				t.Errorf("burst = %d, want %d", burst, tt.wantBurst)
			}
			got := admitted(clk, c, ro, bo, secs*time.Second, 10*time.Millisecond)
			if want := tt.wantRate * secs; math.Abs(float64(got)-want) > 1 {
				t.Errorf("%d admitted in %d s, want %.0f", got, secs, want)
			}
			r, b := c.Effective(ro, bo)
			if (tt.override && (r != 1 || b != 3)) || (!tt.override && (r != 2 || b != 5)) {
				t.Errorf("Effective = %v, %v: the caller's own, unscaled", r, b)
			}
		})
	}
}
