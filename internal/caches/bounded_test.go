package caches

import (
	"fmt"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
)

func newTest(entries, bytes int, clock *testclock.Clock) *Bounded[string, string] {
	return New(Previews, Options[string, string]{
		Size:    func(k, v string) int { return len(v) },
		Now:     clock.Now,
		Entries: entries, Bytes: bytes,
	})
}

// TestBounds: each bound holds on its own, least recently used out
// first, and what is left is what the bounds allow.
func TestBounds(t *testing.T) {
	start := time.Unix(1000, 0)
	idle := specs[Previews].Idle
	for _, tc := range []struct {
		name           string
		entries, bytes int
		run            func(c *Bounded[string, string], clock *testclock.Clock)
		kept, gone     []string
		held           int
	}{
		{"count: the least recently used leaves", 3, 1 << 20, func(c *Bounded[string, string], _ *testclock.Clock) {
			c.Put("a", "1")
			c.Put("b", "2")
			c.Put("c", "3")
			c.Get("a") // b is now the least recently used
			c.Put("d", "4")
		}, []string{"a", "c", "d"}, []string{"b"}, 3},
		{"bytes: as many leave as it takes", 100, 64 * 10, func(c *Bounded[string, string], _ *testclock.Clock) {
			for i := range 64 { // 640 bytes: full
				c.Put(fmt.Sprint(i), "0123456789")
			}
			c.Get("0")             // 1 is now the least recently used
			c.Put("a", "01234567") // 8 bytes: 1 leaves
			c.Put("b", "0123")     // 4 bytes: 2 leaves (8 - 10 + 4 > 0)
		}, []string{"0", "3", "a", "b"}, []string{"1", "2"}, 62*10 + 8 + 4},
		{"bytes: a value over 1/64 is not kept, nor the key's old one", 100, 64 * 10, func(c *Bounded[string, string], _ *testclock.Clock) {
			c.Put("a", "aaaa")
			if c.Put("a", "aaaaaaaaaaa") {
				panic("kept")
			}
		}, nil, []string{"a"}, 0},
		{"replacing a key counts its bytes once", 100, 64 * 10, func(c *Bounded[string, string], _ *testclock.Clock) {
			c.Put("a", "aaaa")
			c.Put("a", "aa")
		}, []string{"a"}, nil, 2},
		{"idle: a read keeps it, an unread one leaves on a put", 100, 1 << 20, func(c *Bounded[string, string], clock *testclock.Clock) {
			c.Put("a", "1")
			c.Put("b", "2")
			clock.Advance(idle / 2)
			c.Get("a")
			clock.Advance(idle/2 + time.Second)
			c.Put("c", "3")
		}, []string{"a", "c"}, []string{"b"}, 2},
		{"idle: a get past the idle time misses", 100, 1 << 20, func(c *Bounded[string, string], clock *testclock.Clock) {
			c.Put("a", "1")
			clock.Advance(idle + time.Second)
		}, nil, []string{"a"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testclock.New(start)
			c := newTest(tc.entries, tc.bytes, clock)
			tc.run(c, clock)
			if _, held := c.Len(); held != tc.held {
				t.Errorf("%d bytes held, want %d", held, tc.held)
			}
			for _, k := range tc.kept {
				if _, ok := c.Get(k); !ok {
					t.Errorf("%s left", k)
				}
			}
			for _, k := range tc.gone {
				if _, ok := c.Get(k); ok {
					t.Errorf("%s kept", k)
				}
			}
		})
	}
}

// TestBoundsUnderLoad: however many keys go in, the entries and bytes
// stay within the bounds and the bytes counted are the bytes held.
func TestBoundsUnderLoad(t *testing.T) {
	clock := testclock.New(time.Unix(1000, 0))
	c := newTest(50, 64*100, clock)
	for i := range 5000 {
		c.Put(fmt.Sprint("k", i%700), fmt.Sprintf("%0*d", 1+i%90, i))
		c.Get(fmt.Sprint("k", (i*7)%700))
		if i%100 == 0 {
			clock.Advance(time.Second)
		}
		n, held := c.Len()
		sum := 0
		c.Range(func(_, v string) bool { sum += len(v); return true })
		if n > 50 || held > 64*100 || held != sum {
			t.Fatalf("after %d puts: %d entries, %d bytes counted, %d held", i+1, n, held, sum)
		}
	}
	c.DeleteFunc(func(k, _ string) bool { return k != "k699" })
	if n, _ := c.Len(); n > 1 {
		t.Fatalf("%d entries after DeleteFunc", n)
	}
	c.Clear()
	if n, held := c.Len(); n != 0 || held != 0 {
		t.Fatalf("%d entries, %d bytes after Clear", n, held)
	}
}

// TestSwitch: a cache switched off answers nothing, Peek still does, and
// it answers again once restored.
func TestSwitch(t *testing.T) {
	c := newTest(10, 0, testclock.New(time.Unix(1000, 0)))
	c.Put("a", "1")
	restore := Disable(Previews)
	if _, ok := c.Get("a"); ok {
		t.Error("answered with the cache off")
	}
	if _, ok := c.Peek("a"); !ok {
		t.Error("Peek missed with the cache off")
	}
	restore()
	if _, ok := c.Get("a"); !ok {
		t.Error("missed with the cache on")
	}
}

// TestSpecs: every cache says what it holds, by what key, within what
// bound and what invalidates it.
func TestSpecs(t *testing.T) {
	for _, c := range All() {
		s := c.Spec()
		if s.Name == "" || s.Key == "" || s.Invalidated == "" || s.Entries <= 0 {
			t.Errorf("cache %d: incomplete spec %+v", c, s)
		}
	}
}
