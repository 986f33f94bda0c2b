package generation

import (
	"slices"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
)

// TestLifecycleTable checks the table's own rules: terminal statuses have
// no way out, every status but reserved is reachable, and every event
// has sources and targets (the store contract suite proves each SQL guard
// admits exactly the sources).
func TestLifecycleTable(t *testing.T) {
	reached := map[Status]bool{}
	for _, tr := range Lifecycle {
		if !tr.From.Valid() || !tr.To.Valid() {
			t.Errorf("%v: not a status", tr)
		}
		if tr.From.Terminal() {
			t.Errorf("%v leaves a terminal status", tr)
		}
		reached[tr.To] = true
	}
	for _, s := range Statuses {
		if s != StatusReserved && !reached[s] {
			t.Errorf("status %s is never reached", s)
		}
	}
	for _, ev := range Events() {
		if len(Sources(ev)) == 0 || len(Targets(ev)) == 0 {
			t.Errorf("event %s has no sources or targets", ev)
		}
		for _, from := range Statuses {
			for _, to := range Statuses {
				want := slices.Contains(Lifecycle, Transition{from, to, ev})
				if Allowed(from, to, ev) != want {
					t.Errorf("Allowed(%s, %s, %s) = %v", from, to, ev, !want)
				}
			}
		}
	}
	if got := Sources(EventComplete); !slices.Equal(got, []Status{StatusQueued, StatusRunning}) {
		t.Errorf("Sources(complete) = %v", got)
	}
}

func TestChangeTargets(t *testing.T) {
	tests := []struct {
		ev   Event
		to   Status
		want Status
		bad  bool
	}{
		{EventComplete, "", StatusCompleted, false},
		{EventProgress, StatusRunning, StatusRunning, false},
		{EventProgress, "", "", true}, // two targets: must be named
		{EventComplete, StatusFailed, "", true},
		{EventCancelAsk, "", "", false}, // keeps the status
	}
	for _, tt := range tests {
		t.Run(string(tt.ev)+"→"+string(tt.to), func(t *testing.T) {
			defer func() {
				if r := recover(); (r != nil) != tt.bad {
					t.Fatalf("panic = %v, want panic %v", r, tt.bad)
				}
			}()
			c := change("g", tt.ev, tt.to)
			if c.To != tt.want || !slices.Equal(c.From, Sources(tt.ev)) {
				t.Fatalf("change = %+v", c)
			}
		})
	}
}

func TestActiveStatus(t *testing.T) {
	for state, want := range map[provider.State]Status{
		provider.StateQueued:  StatusQueued,
		provider.StateRunning: StatusRunning,
	} {
		if got := activeStatus(state); got != want {
			t.Errorf("activeStatus(%s) = %s, want %s", state, got, want)
		}
	}
}
