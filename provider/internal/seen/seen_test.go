package seen

import (
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	now := time.Unix(1000, 0)
	s := New(2, time.Minute, func() time.Time { return now })
	if s.Add("a") {
		t.Fatal("a new")
	}
	if !s.Add("a") {
		t.Fatal("a dup")
	}
	s.Add("b")
	s.Add("c") // evicts a (bound 2)
	if s.Add("a") {
		t.Fatal("a should have been evicted by size")
	}
	now = now.Add(2 * time.Minute)
	if s.Add("c") {
		t.Fatal("c should have expired")
	}
	if !s.Has("c") || s.Has("zz") || s.Len() != 1 {
		t.Fatal("Has")
	}
	s.Forget("c")
	if s.Add("c") {
		t.Fatal("c forgotten")
	}
	if s.Len() != 1 {
		t.Fatalf("len %d", s.Len())
	}
}
