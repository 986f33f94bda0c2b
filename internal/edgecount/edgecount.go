// Package edgecount counts the work the MCP edge does per request: its
// admissions (the door that reads and checks a body), its Host checks
// (DNS rebinding), its parses of a request and its handler runs. Each
// should happen once a request whichever path serves it; the counts are
// the test hook that holds every path to it (cmd/darkroom's
// TestOneAdmission, which sends one request at a time and compares the
// counts before and after).
package edgecount

import "sync/atomic"

// The counters, process-wide.
var (
	// Admissions counts the door's admissions of an HTTP POST
	// (server/edge's Admit) and of a message on another transport
	// (envelope.ParseRequest's first read).
	Admissions atomic.Int64
	// HostChecks counts the DNS-rebinding checks of a request's Host.
	HostChecks atomic.Int64
	// Parses counts the parses of a request: each body parsed, each
	// message of another transport parsed, each later decode of a
	// request's params.
	Parses atomic.Int64
	// Handlers counts handler runs: a method's handler on go-sdk's path
	// (server's innermost receiving middleware), a tool's or resource's
	// on the lean path, the dispatcher's tasks/* and listen.
	Handlers atomic.Int64
)

// Counts is a snapshot of the counters.
type Counts struct {
	Admissions, HostChecks, Parses, Handlers int64
}

// Now returns the counters as they are.
func Now() Counts {
	return Counts{Admissions.Load(), HostChecks.Load(), Parses.Load(), Handlers.Load()}
}

// Since is what was counted between c and now.
func (c Counts) Since() Counts {
	n := Now()
	return Counts{n.Admissions - c.Admissions, n.HostChecks - c.HostChecks, n.Parses - c.Parses, n.Handlers - c.Handlers}
}

// Handler counts one handler run (Handlers) and runs the probe, if a
// test set one (SetProbe): at that point the goroutine's stack is the
// request's way from the listener to its handler.
func Handler() {
	Handlers.Add(1)
	if p := probe.Load(); p != nil {
		(*p)()
	}
}

var probe atomic.Pointer[func()]

// SetProbe makes fn run at every handler run, on the handler's goroutine
// (nil: none). Tests only.
func SetProbe(fn func()) {
	if fn == nil {
		probe.Store(nil)
		return
	}
	probe.Store(&fn)
}
