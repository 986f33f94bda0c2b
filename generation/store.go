package generation

import (
	"context"
	"errors"
	"time"
)

// Store is the persistence generation needs. Engines (storage/sqlite)
// implement it; generation knows no SQL and no driver.
//
// Update is the one way to write. Its transaction must serialize what fn
// decides: two transactions that read the same owner's rows after
// LockOwner (budget, idempotency, in-flight cap) never interleave.
type Store interface {
	// Update runs fn in one write transaction and returns once it is
	// durably committed, or fn's error (nothing of fn's is then kept). fn
	// may run more than once (an engine may batch and rerun), so it must
	// act only through tx and set anything it captures afresh on each run.
	// The tx also satisfies the task store's transaction (tasks.Tx): a
	// generation and its task change in one unit of work.
	Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// UpdateOwner is Update for a write that takes owner's lock
	// (LockOwner) first: an engine may run several of one owner's writes
	// waiting at once in one transaction, one after the other, so that the
	// lock is taken and the commit flushed once for all of them.
	UpdateOwner(ctx context.Context, owner string, fn func(ctx context.Context, tx Tx) error) error

	Generation(ctx context.Context, id string) (Row, error) // ErrNotFound
	OwnedGeneration(ctx context.Context, owner, id string) (Row, error)
	GenerationByKey(ctx context.Context, owner, key string) (Row, error)
	GenerationByJob(ctx context.Context, provider, jobID string) (Row, error)
	ListGenerations(ctx context.Context, q ListQuery) ([]Row, error)
	SpentSince(ctx context.Context, owner string, since time.Time) (int64, error)
	// NextDueAt is the earliest next check of an unleased generation
	// (zero: none).
	NextDueAt(ctx context.Context) (time.Time, error)
	// OutputsToExpire lists completed generations (ID and Outputs only)
	// whose outputs are older than before and not yet expired.
	OutputsToExpire(ctx context.Context, before time.Time, limit int) ([]Row, error)
	// GenerationsToPurge lists ended generations (ID and Params only)
	// last changed before before whose outputs are gone (none, or
	// expired), oldest first.
	GenerationsToPurge(ctx context.Context, before time.Time, limit int) ([]Row, error)
	// ReservationsToExpire lists the ids of generations still reserved
	// that were created before before, oldest first.
	ReservationsToExpire(ctx context.Context, before time.Time, limit int) ([]string, error)
	// LastPendingDelivery is the Seq of the newest unconsumed webhook
	// delivery (0: none); PendingDeliveries lists them in arrival order.
	LastPendingDelivery(ctx context.Context, genID string) (int64, error)
	PendingDeliveries(ctx context.Context, genID string) ([]Delivery, error)
	// LivePreview is the stored preview frame of a generation and how many
	// frames its provider sent (ErrNotFound: none). See livepreview.go.
	LivePreview(ctx context.Context, genID string) (jpeg []byte, frames int64, err error)
}

// Tx is a write transaction.
type Tx interface {
	// LockOwner serializes this transaction with every other that locks
	// the same owner, before decisions that read the owner's rows.
	LockOwner(ctx context.Context, owner string) error
	Generation(ctx context.Context, id string) (Row, error)
	GenerationByKey(ctx context.Context, owner, key string) (Row, error)
	SpentSince(ctx context.Context, owner string, since time.Time) (int64, error)
	// SpentAndKey is SpentSince and the id of the owner's generation of
	// key ("" when none), read together: one statement.
	SpentAndKey(ctx context.Context, owner, key string, since time.Time) (spent int64, earlier string, err error)
	// CountInFlight counts the owner's outputs at the provider (a
	// generation of several counts each).
	CountInFlight(ctx context.Context, owner string) (int64, error)
	// TakeCreateToken takes one token from the owner's create-rate bucket
	// (Rate.Take at now, after LockOwner): 0 when taken, else the wait
	// until one is there, and then nothing changed.
	TakeCreateToken(ctx context.Context, owner string, r Rate, now time.Time) (time.Duration, error)
	// PruneCreateBuckets deletes the buckets full again by now (see
	// Rate.FullAt) and reports how many.
	PruneCreateBuckets(ctx context.Context, now time.Time) (int64, error)

	// InsertGeneration inserts a new row; ErrDuplicateKey when the owner
	// already used its idempotency key, from it or (an engine that sends
	// the insert with a later statement) from Update.
	InsertGeneration(ctx context.Context, r Row) error
	// Apply makes one status change, as a compare-and-set on c.From (the
	// lifecycle table's sources for c.Event): false when the row is in no
	// status of c.From and nothing changed.
	Apply(ctx context.Context, c Change) (bool, error)

	// The runner's durable queue.
	Claim(ctx context.Context, runner string, leaseUntil, now time.Time) (Row, bool, error)
	Reschedule(ctx context.Context, id, runner string, next, now time.Time, cancelSeen bool) error
	WakeNow(ctx context.Context, id string, now time.Time) error
	WakeOwnerQueued(ctx context.Context, owner string, now time.Time) error
	MarkCancelSent(ctx context.Context, id string) error
	ResetSubmitting(ctx context.Context, id string) error
	MarkOutputsExpired(ctx context.Context, id string) (bool, error)
	// DeleteGeneration deletes a row GenerationsToPurge would list (false
	// for any other, and nothing changed).
	DeleteGeneration(ctx context.Context, id string) (bool, error)
	// PurgeDeliveries deletes up to limit webhook deliveries received
	// before before whose generation ended or is gone, and reports how
	// many.
	PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int64, error)
	// ReleaseLeases drops the leases a killed process may have left, where
	// the engine knows its runner is the only one (the embedded engine);
	// an engine that several replicas' runners share releases nothing, and
	// their leases are taken over as they expire.
	ReleaseLeases(ctx context.Context) error
	// RenewLease extends runner's lease on id to until, only while the
	// lease is still the one its claim took (claim: the Attempts that
	// Claim returned); false when it was lost (expired and claimed again,
	// or released) and nothing changed.
	RenewLease(ctx context.Context, id, runner string, claim int64, until time.Time) (bool, error)
	// ReleaseRunnerLeases hands back the leases runner holds (a runner
	// that stops).
	ReleaseRunnerLeases(ctx context.Context, runner string) error

	// The running generation's latest preview frame (livepreview.go):
	// PutLivePreview replaces it, only while the generation runs (false:
	// it does not, and nothing was written); LivePreviewFrames counts its
	// frames (0: none); DeleteLivePreview drops it.
	PutLivePreview(ctx context.Context, genID string, jpeg []byte, frames int64, now time.Time) (bool, error)
	LivePreviewFrames(ctx context.Context, genID string) (int64, error)
	DeleteLivePreview(ctx context.Context, genID string) error

	// Webhook intake: stored before the delivery is acknowledged.
	InsertDelivery(ctx context.Context, d Delivery) (bool, error)
	LastPendingDelivery(ctx context.Context, genID string) (int64, error)
	ConsumeDeliveries(ctx context.Context, genID string, upto int64, now time.Time) error
}

// ErrDuplicateKey is InsertGeneration's answer to a reused idempotency key.
var ErrDuplicateKey = errors.New("idempotency key already used")

// Row is a generation as stored, engine-neutral: JSON columns stay
// encoded (generation decodes them), a zero time is "none" (NULL, or 0
// where the column is NOT NULL).
type Row struct {
	ID, Owner, ModelID, Provider, Kind, Prompt string
	Params                                     string // JSON Params
	ArgsHash                                   string // digest of the creating arguments
	Credits, Charged                           int64
	Status                                     Status
	StatusMessage                              string
	Progress                                   float64
	SubmitState                                string // "" | submitting | submitted
	ProviderJob                                string // JSON provider.Job
	ProviderJobID                              string
	Outputs                                    string // JSON []Output
	OutputsExpired                             bool
	ErrorKind                                  ErrorKind
	ErrorMessage                               string
	IdempotencyKey                             string
	// CancelRequested: 0 none, 1 asked, 2 sent to the provider.
	CancelRequested int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
	SubmittedAt     time.Time
	NextCheckAt     time.Time
	Attempts        int64
	LeaseOwner      string
	LeaseUntil      time.Time
	// Version only grows: the database bumps it on every update (a
	// shared engine's read cache never replaces a row by an older one).
	Version int64
}

// rowOverhead approximates a Row's fixed size (fields, a map slot).
const rowOverhead = 320

// Size approximates the memory a Row holds, for the read caches' bounds.
func (r *Row) Size() int {
	return rowOverhead + len(r.ID) + len(r.Owner) + len(r.ModelID) + len(r.Provider) + len(r.Kind) +
		len(r.Prompt) + len(r.Params) + len(r.ArgsHash) + len(r.StatusMessage) + len(r.SubmitState) +
		len(r.ProviderJob) + len(r.ProviderJobID) + len(r.Outputs) + len(r.ErrorMessage) +
		len(r.IdempotencyKey) + len(r.LeaseOwner) + len(r.ErrorKind) + len(r.Status)
}

// ListQuery pages an owner's generations, newest first.
type ListQuery struct {
	Owner         string
	Status        Status // "" for all
	BeforeCreated int64  // unix ms of the cursor; 0 from the newest
	BeforeID      string
	Limit         int
}

// Change is one status change (see Lifecycle). Fields beyond Event,
// From, To and At are read only by the events that set them.
type Change struct {
	ID    string
	Event Event
	From  []Status // filled from the lifecycle table by Service
	To    Status   // for events with more than one target
	At    time.Time

	Message      string
	Progress     float64
	Params       string    // EventHold, EventQueue
	Outputs      string    // EventComplete
	ErrorKind    ErrorKind // EventFail
	ErrorMessage string    // EventFail
	Job, JobID   string    // EventSubmitted
}

// Delivery is a verified webhook delivery, stored until the runner
// applies it.
type Delivery struct {
	Seq          int64
	Provider     string
	DeliveryID   string
	GenerationID string
	Event        string // JSON provider.WebhookEvent
	ReceivedAt   time.Time
}
