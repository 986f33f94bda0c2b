package ids

import (
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		if len(id) != 44 {
			t.Fatalf("len(%q) = %d, want 44", id, len(id))
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
}

func TestOrderedByTime(t *testing.T) {
	t0 := time.UnixMilli(1_780_000_000_000)
	cases := []struct {
		name   string
		a, b   time.Time
		before bool
	}{
		{"next millisecond", t0, t0.Add(time.Millisecond), true},
		{"next day", t0, t0.Add(24 * time.Hour), true},
		{"earlier", t0.Add(time.Second), t0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := at(c.a) < at(c.b); got != c.before {
				t.Fatalf("at(%v) < at(%v) = %v, want %v", c.a, c.b, got, c.before)
			}
		})
	}
	// Same millisecond: the random part differs.
	if a, b := at(t0), at(t0); a == b {
		t.Fatal("two ids in one millisecond are equal")
	}
}
