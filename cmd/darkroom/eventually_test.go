package main

import (
	"runtime"
	"testing"
	"time"
)

// eventually polls cond until it holds and fails tb, naming what it waited
// for, once timeout has passed. It is for conditions that publish no event
// (a row, a counter, a child process's files); the first polls come quickly
// and the rest at most every 20 ms.
func eventually(tb testing.TB, timeout time.Duration, cond func() bool, what string) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 20*time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pause) // paces the polls: no event to await
	}
}

func TestEventually(t *testing.T) {
	for _, tc := range []struct {
		name   string
		holdAt int // the poll at which cond first holds; 0: never
		fails  bool
	}{
		{"holds at once", 1, false},
		{"holds later", 5, false},
		{"never holds", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			polls := 0
			failed := runTB(func(tb testing.TB) {
				eventually(tb, 50*time.Millisecond, func() bool { polls++; return polls == tc.holdAt }, "the condition")
			})
			if failed != tc.fails {
				t.Fatalf("failed = %v after %d polls; want %v", failed, polls, tc.fails)
			}
			if tc.holdAt > 0 && polls != tc.holdAt {
				t.Errorf("%d polls; want it to stop at the first that holds (%d)", polls, tc.holdAt)
			}
		})
	}
}

// runTB runs f with a testing.TB whose Fatal ends f (as it ends a test)
// and reports whether f failed.
func runTB(f func(tb testing.TB)) (failed bool) {
	tb := &fatalTB{}
	done := make(chan struct{})
	go func() { defer close(done); f(tb) }()
	<-done
	return tb.failed
}

type fatalTB struct {
	testing.TB
	failed bool
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(string, ...any) {
	f.failed = true
	runtime.Goexit()
}
