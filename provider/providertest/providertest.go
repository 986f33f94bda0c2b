// Package providertest is the contract every provider adapter passes, as
// storage/storetest is for storage engines: one vendor-agnostic suite
// over provider.Provider (and the optional interfaces it declares),
// driven against a scripted vendor (the emulator, or a fake).
//
// An adapter runs it from its own tests:
//
//	func TestContract(t *testing.T) {
//		providertest.Run(t, providertest.Harness{
//			New: func(t *testing.T) providertest.Env {
//				em := emulator.New(emulator.Options{})
//				t.Cleanup(em.Close)
//				newP := func() provider.Provider { p, _ := acme.New(acme.Config{BaseURL: em.Acme.URL}); return p }
//				p := newP()
//				return providertest.Env{
//					Provider: p, Model: p.Models()[0], VendorModel: "acme/fast",
//					Restart: newP,
//					Vendor:  providertest.Emulated(em, "acme", em.Acme),
//				}
//			},
//			Lacks: map[providertest.Capability]string{
//				providertest.CapQuota: "Acme has no quota refusal of its own (a 429)",
//			},
//			NotBilled: []providertest.Outcome{providertest.OutcomeSafety},
//		})
//	}
//
// A provider with no emulator builds its Vendor from funcs over its own
// fake vendor: TestFake (fake_test.go) is a whole provider so tested, in
// a test package, passing every check. The emulator's Vendor is
// Emulated. Harness.New is called once a subtest; Env.Restart builds a
// second adapter on the same vendor and state, as a restarted process.
//
// What it pins down (one subtest each, a fresh vendor and adapter each):
//
//   - Complete: a submitted job is observed queued → running → completed,
//     never backwards (its progress neither, while running), and its
//     outputs open and read.
//   - Count: a model whose MaxCount is 2 or more makes two outputs when
//     asked for two (skipped for Env.Model otherwise: its own declaration).
//   - StatusAfterRestart: the Job Submit returned, stored as JSON, is
//     followed to its end and its outputs read by a restarted adapter.
//   - FindAfterRestart / LostSubmitReply: after a crash (a new adapter on
//     the same vendor) or a lost submit reply, the job is found again with
//     Find, or a second Submit with the same key makes no second job, or
//     the adapter declares provider.DuplicateRisk (the runner then does
//     not resubmit). A lost reply is never reported as ErrNotCreated.
//   - DroppedSubmit: a connection dropped before the vendor did anything
//     is an unknown outcome (never ErrNotCreated); reconciling it (Find,
//     then Submit) makes exactly one job.
//   - Failed, Safety, Quota, AppError: each ends the generation failed (a
//     PermanentError from Submit, or StateFailed with a message), and is
//     refunded exactly when the harness says the vendor bills nothing
//     (NotBilled): provider.RefundsFailures, or Status.NotBilled for a
//     failure seen in Status.
//   - Cancel, CancelAfterCompletion: a cancelled job ends StateCancelled,
//     without outputs; cancelling a finished job changes nothing.
//   - Throttled, ServerError, Outage: a 429 is a RetryableError carrying
//     the vendor's hint and ErrNotCreated, and made no job; a 5xx is a
//     RetryableError (ErrNotCreated only if no job was made); an
//     unreachable vendor is a RetryableError with ErrNotCreated on submit,
//     a RetryableError (never a failed job) on status, and an error from
//     provider.Pinger and provider.Lister (never an empty listing).
//   - ForeignOutputHost, RedirectToForeignHost: OpenOutput never reaches
//     a host outside the adapter's allowlist, directly or by redirect.
//   - LargeOutputMemory: taking an output of LargeOutputBytes allocates at
//     most MaxOutputAlloc (runtime.MemStats.TotalAlloc, emulator included).
//   - Listing: provider.Lister lists the model, and stops listing it once
//     the vendor withdraws it.
//
// One allowance follows the runner: an adapter whose Find answers
// provider.ErrResubmitOnce after a lost reply (its submit journal saw one
// call cut off) may be submitted once more, and the vendor may bill
// both; a second lost reply must leave Find answering ErrUnsupported,
// with DuplicateRisk declared: never a third call.
//
// A check needing a capability in Harness.Lacks is skipped, naming the
// reason; a capability the adapter does not implement and the harness
// does not declare fails the suite, so nothing is skipped silently.
// Time is the vendor's clock (Vendor.Advance): nothing sleeps.
package providertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Capability is something an adapter or its vendor may lack.
type Capability string

const (
	// CapAsync: jobs run at the vendor after Submit returns, so Status,
	// Cancel and status faults reach it (a synchronous adapter's Submit
	// returns the finished outputs).
	CapAsync Capability = "async"
	// CapQueued: the vendor reports a queued phase before running.
	CapQueued Capability = "queued"
	// CapCancel: the vendor can stop a running job.
	CapCancel Capability = "cancel"
	// CapLostReply: the vendor can be scripted to make a job and lose the
	// submit's reply (FaultLoseReply), or to drop the connection having
	// done nothing (FaultDrop).
	CapLostReply Capability = "lost-reply"
	// CapFail, CapSafety, CapQuota: the vendor can be scripted to fail a
	// job, refuse it for safety, refuse it for quota (Vendor.Prompt).
	CapFail   Capability = "fail"
	CapSafety Capability = "safety"
	CapQuota  Capability = "quota"
	// CapAppError: the vendor can be scripted to end a job failed by a
	// server error of its own (Vendor.Prompt(OutcomeAppError)).
	CapAppError Capability = "app-error"
	// CapThrottle, CapServerError: the vendor can answer 429 with a hint,
	// 5xx (Vendor.Fault).
	CapThrottle    Capability = "throttle"
	CapServerError Capability = "server-error"
	// CapOutage: the vendor can be made unreachable (Vendor.Down).
	CapOutage Capability = "outage"
	// CapRedirect: the vendor's file host can redirect (Vendor.Redirect).
	CapRedirect Capability = "redirect"
	// CapLargeOutput: the vendor can return an output of
	// LargeOutputBytes (Vendor.Prompt(OutcomeLarge)).
	CapLargeOutput Capability = "large-output"
	// CapListing: the adapter implements provider.Lister.
	CapListing Capability = "listing"
	// CapPing: the adapter's provider.Pinger (where it has one) asks the
	// vendor each time.
	CapPing Capability = "ping"
)

var capabilities = []Capability{CapAsync, CapQueued, CapCancel, CapLostReply, CapFail, CapSafety, CapQuota, CapAppError,
	CapThrottle, CapServerError, CapOutage, CapRedirect, CapLargeOutput, CapListing, CapPing}

// Outcome is how a scripted vendor ends a job (Vendor.Prompt).
type Outcome string

const (
	OutcomeFail   Outcome = "fail"   // the job fails at the vendor
	OutcomeSafety Outcome = "safety" // the vendor's safety system refuses it
	OutcomeQuota  Outcome = "quota"  // the account's quota or credit is spent
	// OutcomeAppError: the job ends failed by the vendor's own server
	// error (fal: a COMPLETED request whose result is a 5xx request error).
	OutcomeAppError Outcome = "app-error"
	OutcomeLarge    Outcome = "large" // one output of LargeOutputBytes bytes
)

// Op is a vendor operation a fault is injected into.
type Op string

const (
	OpSubmit Op = "submit"
	OpStatus Op = "status"
)

// Fault is an injected vendor answer.
type Fault string

const (
	FaultThrottle  Fault = "429"        // 429 with the given retry hint
	FaultServer    Fault = "5xx"        // a server error, nothing done
	FaultLoseReply Fault = "lose-reply" // the work done, the reply lost
	FaultDrop      Fault = "drop"       // the connection closed, nothing done
)

// Bounds of the memory check: taking one output of LargeOutputBytes
// (submit and read, polling aside) may allocate at most MaxOutputAlloc,
// so no adapter holds an output whole.
const (
	LargeOutputBytes = 16 << 20
	MaxOutputAlloc   = 4 << 20
)

// ThrottleHint is the retry hint a scripted 429 carries.
const ThrottleHint = 7 * time.Second

// Harness describes one adapter to the suite.
type Harness struct {
	// New starts a fresh vendor and the adapter pointed at it, for one
	// subtest; it registers their cleanup with t.
	New func(t *testing.T) Env
	// Lacks names each capability the adapter or its vendor does not
	// have, with why; the checks needing it are skipped with that reason.
	Lacks map[Capability]string
	// NotBilled are the outcomes the vendor does not bill: the adapter
	// must refund them (and only them).
	NotBilled []Outcome
}

// Env is one vendor and the adapter pointed at it.
type Env struct {
	Provider provider.Provider
	// Model is the model the checks run (a cheap one).
	Model provider.Model
	// VendorModel is Model's id on the vendor's wire (for Listing and
	// Vendor.Unlist).
	VendorModel string
	// Restart builds a new adapter on the same vendor and the same
	// persistent state, as a restarted process would.
	Restart func() provider.Provider
	Vendor
}

// Vendor scripts the vendor behind an adapter. A func whose capability
// the harness declares lacking may be nil.
type Vendor struct {
	// Prompt returns a prompt that makes the vendor end a job with o.
	Prompt func(o Outcome) string
	// Fault makes the vendor's next call of op answer f (a 429 hinting
	// after).
	Fault func(op Op, f Fault, after time.Duration)
	// Down makes the vendor unreachable (connections refused) for the
	// rest of the subtest.
	Down func()
	// Advance moves the vendor's clock (and the adapter's) on by d.
	Advance func(d time.Duration)
	// Jobs counts the jobs the vendor has made (each one billed).
	Jobs func() int
	// Unlist takes a vendor model out of the vendor's model list.
	Unlist func(vendorModel string)
	// Redirect returns a URL on the vendor's file host that redirects
	// to to.
	Redirect func(to string) string
}

// Run runs the contract against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("providertest: Harness.New is nil")
	}
	for cap := range h.Lacks {
		if !slices.Contains(capabilities, cap) {
			t.Fatalf("providertest: Lacks names %q, not a Capability", cap)
		}
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			for _, cap := range c.needs {
				if why, ok := h.Lacks[cap]; ok {
					if why == "" {
						t.Fatalf("providertest: Lacks[%s] gives no reason", cap)
					}
					t.Skipf("lacks %s: %s", cap, why)
				}
			}
			e := h.New(t)
			if e.Provider == nil || e.Restart == nil || e.Advance == nil || e.Jobs == nil {
				t.Fatal("providertest: Env needs Provider, Restart, Vendor.Advance and Vendor.Jobs")
			}
			c.fn(t, &suite{h: h, e: e})
		})
	}
}

type check struct {
	name  string
	needs []Capability
	fn    func(t *testing.T, s *suite)
}

// suite is one subtest's harness and environment.
type suite struct {
	h Harness
	e Env
}

func (s *suite) lacks(c Capability) bool {
	_, ok := s.h.Lacks[c]
	return ok
}

func (s *suite) notBilled(o Outcome) bool { return slices.Contains(s.h.NotBilled, o) }

// need fails when the harness's vendor cannot do what a check asks.
func need(t *testing.T, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Fatalf("providertest: the harness neither provides %s nor declares its capability lacking", what)
	}
}

func describe(st provider.Status) string {
	return fmt.Sprintf("{State:%s Error:%q Outputs:%d NotBilled:%v}", st.State, st.Error, len(st.Outputs), st.NotBilled)
}
