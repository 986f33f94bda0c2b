package postgres

import (
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
)

// TestFence: a live row may be served only while the latest echoed
// fence was sent within the window; a fence sent before the listener's
// current connection never counts.
func TestFence(t *testing.T) {
	const window = 250 * time.Millisecond
	for _, tc := range []struct {
		name string
		run  func(f *Fence, c *testclock.Clock)
		want bool
	}{
		{"not connected", func(f *Fence, c *testclock.Clock) {}, false},
		{"connected, no echo yet", func(f *Fence, c *testclock.Clock) { f.connected() }, false},
		{"sent, not echoed", func(f *Fence, c *testclock.Clock) { f.connected(); f.next() }, false},
		{"echoed at once", func(f *Fence, c *testclock.Clock) {
			f.connected()
			p, _ := f.next()
			f.echoed(p)
		}, true},
		{"echo sent exactly the window ago", func(f *Fence, c *testclock.Clock) {
			f.connected()
			p, _ := f.next()
			c.Advance(window)
			f.echoed(p)
		}, true},
		{"stale: echo sent more than the window ago", func(f *Fence, c *testclock.Clock) {
			f.connected()
			p, _ := f.next()
			c.Advance(window + time.Millisecond)
			f.echoed(p)
		}, false},
		{"a fresh echo, then time passes without one", func(f *Fence, c *testclock.Clock) {
			f.connected()
			p, _ := f.next()
			f.echoed(p)
			c.Advance(window + time.Millisecond)
		}, false},
		{"an older echo never moves the mark back", func(f *Fence, c *testclock.Clock) {
			f.connected()
			p1, _ := f.next()
			c.Advance(200 * time.Millisecond)
			p2, _ := f.next()
			f.echoed(p2)
			f.echoed(p1)
			c.Advance(100 * time.Millisecond)
		}, true},
		{"sent before a reconnect: ignored", func(f *Fence, c *testclock.Clock) {
			f.connected()
			p, _ := f.next()
			f.disconnected()
			f.connected()
			f.echoed(p)
		}, false},
		{"disconnected after a fresh echo", func(f *Fence, c *testclock.Clock) {
			f.connected()
			p, _ := f.next()
			f.echoed(p)
			f.disconnected()
		}, false},
		{"nothing sent while disconnected", func(f *Fence, c *testclock.Clock) {
			if _, ok := f.next(); ok {
				panic("sent while disconnected")
			}
		}, false},
		{"garbage payload", func(f *Fence, c *testclock.Clock) { f.connected(); f.echoed("x") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testclock.New(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
			f := NewFence(c.Now, FenceEvery, window)
			tc.run(f, c)
			if got := f.Fresh(); got != tc.want {
				t.Fatalf("Fresh() = %v, want %v", got, tc.want)
			}
		})
	}
}
