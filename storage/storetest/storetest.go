// Package storetest is the contract every storage engine passes: one
// engine-agnostic suite over generation.Store / generation.Tx and
// tasks.Backend / tasks.Tx, used only through those interfaces. An engine
// runs it from its own tests:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Engine { ... })
//	}
//
// What it pins down: every status change is a compare-and-set on the
// lifecycle table's sources (generation.Lifecycle), terminal statuses
// never change, reads and idempotency keys, a failing unit of work leaves
// nothing, LockOwner serializes an owner's decisions, the runner's durable
// queue (claim, lease, reschedule, wake), webhook intake, output retention,
// the task state machine, and that a generation and its task commit
// together. Times are fixed (no sleeps, no wall clock).
//
// One file a topic: generations.go (lifecycle, reads, keys), units.go
// (units of work, the owner's budget), runner.go (queue, webhooks,
// retention), history.go and tasks.go; helpers.go holds their helpers.
package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// Engine is one freshly opened, empty database: its generation store and
// its task backend (one database, so a generation Update's tx is also a
// tasks.Tx).
type Engine struct {
	Generations generation.Store
	Tasks       tasks.Backend
	// Shared marks an engine whose database several runners share (one
	// per replica): ReleaseLeases must then release nothing, since the
	// other runners' leases are live; an embedded engine's single runner
	// releases every lease a killed process left.
	Shared bool
	// Rows counts a table's rows (nil: the history test is skipped).
	Rows func(t *testing.T, table string) int64
	// Schemas is the engine's model schema store (nil: its test is
	// skipped).
	Schemas modelschema.Store
	// Listings is the engine's model listing store (nil: its test is
	// skipped).
	Listings provider.ListingStore
}

// Run runs the contract. open returns a fresh, empty engine for each
// subtest and registers its cleanup with t.
func Run(t *testing.T, open func(t *testing.T) Engine) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, e Engine)
	}{
		{"LifecycleGuards", testLifecycleGuards},
		{"GuardIsFrom", testGuardIsFrom},
		{"TerminalNeverChanges", testTerminalNeverChanges},
		{"SubmitStateGuards", testSubmitStateGuards},
		{"ProgressNoop", testProgressNoop},
		{"LivePreview", testLivePreview},
		{"ApplyUnknownID", testApplyUnknownID},
		{"InsertRead", testInsertRead},
		{"IdempotencyKey", testIdempotencyKey},
		{"GenerationByJob", testGenerationByJob},
		{"ListGenerations", testListGenerations},
		{"SpentSince", testSpentSince},
		{"FailedUpdateLeavesNothing", testFailedUpdate},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"LockOwnerSerializes", testLockOwner},
		{"CreateBucket", testCreateBucket},
		{"CreateBucketRace", testCreateBucketRace},
		{"CreateBucketPrune", testCreateBucketPrune},
		{"RunnerQueue", testRunnerQueue},
		{"LeaseRenewal", testLeaseRenewal},
		{"WakeOwnerQueued", testWakeOwnerQueued},
		{"CancelAndSubmitMarks", testCancelAndSubmitMarks},
		{"CountInFlight", testCountInFlight},
		{"WebhookDeliveries", testDeliveries},
		{"OutputsExpiry", testOutputsExpiry},
		{"HistoryPurge", testHistoryPurge},
		{"ReservationsToExpire", testReservationsToExpire},
		{"TaskInsertRead", testTaskInsertRead},
		{"OwnedTask", testOwnedTask},
		{"TaskTransitions", testTaskTransitions},
		{"TaskTerminalNeverChanges", testTaskTerminal},
		{"TaskExpiryAndPurge", testTaskExpiry},
		{"OneUnitOfWork", testOneUnitOfWork},
		{"ModelSchemas", testModelSchemas},
		{"ModelListings", testModelListings},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

// t0 is the suite's fixed epoch; at(ms) is t0 plus ms milliseconds.
var t0 = time.UnixMilli(1_700_000_000_000)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

var errBoom = errors.New("storetest: fn failed on purpose")
