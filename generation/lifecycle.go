package generation

import (
	"fmt"
	"slices"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Event names what causes a status change.
type Event string

const (
	EventHold      Event = "hold"       // one of several reasons to wait is cleared
	EventQueue     Event = "queue"      // nothing left to wait for (upload, approval)
	EventSubmit    Event = "submit"     // about to call the provider (recorded first)
	EventSubmitted Event = "submitted"  // the provider accepted the job
	EventProgress  Event = "progress"   // the provider reported queued/running
	EventComplete  Event = "complete"   // every output is in our store
	EventFail      Event = "fail"       // the provider refused, or darkroom gave up
	EventAbandon   Event = "abandon"    // darkroom gave up (lifetime, crash, a create whose request panicked); refunded
	EventExpire    Event = "expire"     // a reservation nobody completed within its TTL; refunded
	EventCancel    Event = "cancel"     // cancelled before anything reached the provider
	EventCancelAsk Event = "cancel-ask" // the provider is asked to cancel
	EventCancelled Event = "cancelled"  // the provider confirmed the cancel
)

// Transition is one allowed status change.
type Transition struct {
	From, To Status
	On       Event
}

// Lifecycle is every status change a generation can make; nothing else
// changes a status. The store's compare-and-set for an event admits
// exactly the From statuses listed here (EventCancel and EventSubmit
// further require that nothing was handed to the provider yet, and
// EventSubmitted that a submit is in progress: a recorded job is never
// replaced).
// Terminal statuses have no way out.
var Lifecycle = []Transition{
	{StatusReserved, StatusReserved, EventHold},
	{StatusReserved, StatusQueued, EventQueue},
	{StatusQueued, StatusQueued, EventSubmit},
	{StatusQueued, StatusQueued, EventSubmitted},
	{StatusQueued, StatusRunning, EventSubmitted},
	{StatusRunning, StatusQueued, EventSubmitted},
	{StatusRunning, StatusRunning, EventSubmitted},
	{StatusQueued, StatusQueued, EventProgress},
	{StatusQueued, StatusRunning, EventProgress},
	{StatusRunning, StatusQueued, EventProgress},
	{StatusRunning, StatusRunning, EventProgress},
	{StatusQueued, StatusCompleted, EventComplete},
	{StatusRunning, StatusCompleted, EventComplete},
	{StatusReserved, StatusFailed, EventFail},
	{StatusQueued, StatusFailed, EventFail},
	{StatusRunning, StatusFailed, EventFail},
	{StatusReserved, StatusFailed, EventAbandon},
	{StatusQueued, StatusFailed, EventAbandon},
	{StatusRunning, StatusFailed, EventAbandon},
	{StatusReserved, StatusFailed, EventExpire},
	{StatusReserved, StatusCancelled, EventCancel},
	{StatusQueued, StatusCancelled, EventCancel},
	{StatusQueued, StatusQueued, EventCancelAsk},
	{StatusRunning, StatusRunning, EventCancelAsk},
	{StatusQueued, StatusCancelled, EventCancelled},
	{StatusRunning, StatusCancelled, EventCancelled},
}

// Statuses lists all six, in life order.
var Statuses = []Status{StatusReserved, StatusQueued, StatusRunning, StatusCompleted, StatusFailed, StatusCancelled}

// Events lists every event of the table, in table order.
func Events() []Event {
	var evs []Event
	for _, t := range Lifecycle {
		if !slices.Contains(evs, t.On) {
			evs = append(evs, t.On)
		}
	}
	return evs
}

// Sources lists the statuses ev may leave.
func Sources(ev Event) []Status { return ends(ev, func(t Transition) Status { return t.From }) }

// Targets lists the statuses ev may lead to.
func Targets(ev Event) []Status { return ends(ev, func(t Transition) Status { return t.To }) }

func ends(ev Event, end func(Transition) Status) []Status {
	var out []Status
	for _, t := range Lifecycle {
		if s := end(t); t.On == ev && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Allowed reports whether the table has from → to on ev.
func Allowed(from, to Status, ev Event) bool {
	return slices.Contains(Lifecycle, Transition{from, to, ev})
}

// change builds the guarded change for ev: its sources from the table,
// and its target (to, or the only one the event has; none for an event
// that keeps the status, such as EventCancelAsk).
func change(id string, ev Event, to Status) Change {
	targets := Targets(ev)
	if to == "" && len(targets) == 1 {
		to = targets[0]
	}
	if to == "" && keepsStatus(ev) {
		return Change{ID: id, Event: ev, From: Sources(ev)}
	}
	if !slices.Contains(targets, to) {
		panic(fmt.Sprintf("generation: %s does not lead to %q", ev, to))
	}
	return Change{ID: id, Event: ev, From: Sources(ev), To: to}
}

func keepsStatus(ev Event) bool {
	for _, t := range Lifecycle {
		if t.On == ev && t.From != t.To {
			return false
		}
	}
	return true
}

// activeStatus maps a provider's non-terminal state onto a generation
// status: the one place provider states meet generation statuses (the
// terminal ones are events: complete, fail, cancelled).
func activeStatus(s provider.State) Status {
	if s == provider.StateRunning {
		return StatusRunning
	}
	return StatusQueued
}
