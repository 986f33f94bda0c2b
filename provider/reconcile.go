package provider

import (
	"context"
	"errors"
	"time"
)

// ErrNotCreated marks a Submit failure after which the provider surely
// made no job: the request was never sent (a local rate or concurrency
// limit, a refused connection) or the provider throttled it (429).
// Adapters wrap it in the RetryableError they return (a refusal for good
// is a PermanentError, which ends the generation anyway); test it with
// errors.Is. After it the runner may submit again without calling Find.
// Any other Submit failure (timeout, dropped connection, 5xx) leaves the
// outcome unknown.
var ErrNotCreated = errors.New("provider: no job was created")

// ErrAtCapacity marks a Submit refused by the adapter's own bound on
// calls or jobs at once (nothing was sent; it wraps ErrNotCreated too).
// It is not a failure: the runner keeps the generation queued and tries
// again after the RetryableError's After, without spending an attempt,
// however long the calls in flight take.
var ErrAtCapacity = errors.New("provider: at its own limit of calls at once")

// DuplicateRisk is implemented by providers whose Submit is not
// idempotent and whose Find cannot tell whether an earlier submit made a
// job (Find returns ErrUnsupported). For them, resubmitting after an
// unknown outcome may run, and bill, the job twice.
//
// A runner that sees Find → ErrUnsupported from a provider whose
// ResubmitMayDuplicate is true must not resubmit blindly. It should wait
// for a trusted webhook whose WebhookEvent.Key is the generation id and
// bind the job it names (rebuilt with JobRebuilder from the generation's
// own model, after one Status call confirms it), and when none
// arrives within a bounded time (a few times the expected duration) fail
// the generation with a message saying the submit's outcome is unknown,
// unless the operator opted into at-least-once resubmits.
type DuplicateRisk interface {
	ResubmitMayDuplicate() bool
}

// RefundsFailures is implemented by providers whose vendor bills no
// refused or failed request (a safety refusal, a quota error, an
// operation that ends in error): the runner then refunds a generation
// that fails at the provider, as it does one darkroom gives up on.
type RefundsFailures interface {
	RefundsFailures() bool
}

// Pinger is implemented by providers that can tell cheaply whether
// their vendor answers with our credential (readiness reports it).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Lister is implemented by providers that can say which vendor models
// their curated models may run the vendor lists for our credential now
// (darkroom models check, and the refresh that withdraws and retargets).
type Lister interface {
	// Listed answers for each vendor model (each entry's Endpoint, pinned
	// Version and Targets) what the vendor says of it; one it cannot
	// ask about is left out. The error is for a vendor it could not ask
	// at all (unreachable, credential refused: a PermanentError).
	Listed(ctx context.Context) (Listing, error)
}

// Listing is what a vendor's model list says, by vendor model.
type Listing map[string]VendorModel

// VendorModel is what a vendor's model list says of one model.
type VendorModel struct {
	Listed bool `json:"listed"`
	// ShutdownDate is the day the vendor says it stops serving the model
	// (OpenAI's shutdown_date); zero when none is announced.
	ShutdownDate time.Time `json:"shutdownDate,omitzero"`
	// Reason says why a model is not listed, when the provider knows
	// (ComfyUI: the node a workflow needs that no backend has).
	Reason string `json:"reason,omitempty"`
}

// Retargeter is implemented by providers whose curated ids may run
// another of their targets (catalog.Entry.Targets): runs maps an id to
// the target it runs now; an id not in it runs its Endpoint.
type Retargeter interface {
	Retarget(runs map[string]string)
}

// StoredListing is a provider's last Listing as a ListingStore keeps it.
type StoredListing struct {
	Provider string
	Listing  []byte // the Listing as JSON
	ReadAt   time.Time
}

// ListingStore keeps each provider's last Listing with when it was read
// (the engines' model_listings table), so an outage or a restart keeps
// the last one, and the replicas on one database ask each vendor once
// per refresh between them: the one whose claim succeeds asks, the
// others read what it stored.
type ListingStore interface {
	// ModelListing is the provider's stored listing (ErrNotFound: none).
	ModelListing(ctx context.Context, provider string) (StoredListing, error)
	// ClaimModelListing makes the caller the one that asks the
	// provider's vendor, until `until`, when the stored listing was read
	// at or before staleBefore and no other claim holds at now; false when
	// another replica holds one or the listing is fresh.
	ClaimModelListing(ctx context.Context, provider string, staleBefore, now, until time.Time) (bool, error)
	// PutModelListing stores a listing read later than the stored one,
	// and ends the claim.
	PutModelListing(ctx context.Context, l StoredListing) error
}
