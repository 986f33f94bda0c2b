package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgdb"
	"github.com/darkroom-mcp/darkroom/storage/rows"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Generations is the generation store on this database.
func (d *DB) Generations() generation.Store { return genStore{d, reads{d.queries}} }

type genStore struct {
	d *DB
	reads
}

// reads are the reads a store and its transactions answer alike: on the
// pool or inside the transaction.
type reads struct{ q *pgdb.Queries }

// read turns this engine's generated rows (storage/rows' types) into
// the domain's.
var read = rows.Reader{NoRows: pgx.ErrNoRows}

var _ generation.Tx = (*Tx)(nil)

func (s genStore) Update(ctx context.Context, fn func(ctx context.Context, tx generation.Tx) error) error {
	return s.d.Write(ctx, func(ctx context.Context, tx *Tx) error { return fn(ctx, tx) })
}

func (s genStore) UpdateOwner(ctx context.Context, owner string, fn func(ctx context.Context, tx generation.Tx) error) error {
	return s.d.WriteOwned(ctx, owner, func(ctx context.Context, tx *Tx) error { return fn(ctx, tx) })
}

// OwnedGeneration answers the owner from the generation cache
// (gencache.go) when it may. Another owner's id misses the cache as an
// unknown one does and costs the same one query, which finds nothing: a
// foreign id looks exactly like an unknown one.
func (s genStore) OwnedGeneration(ctx context.Context, owner, id string) (generation.Row, error) {
	if r, ok := s.d.gens.GetOwned(owner, id); ok {
		return r, nil
	}
	e := s.d.gens.Epoch(id)
	r, err := read.Generation(s.q.GetOwnedGeneration(ctx, pgdb.GetOwnedGenerationParams{ID: id, Owner: owner}))
	if err == nil {
		s.d.gens.Put(id, r, e)
	}
	return r, err
}

func (s genStore) GenerationByJob(ctx context.Context, provider, jobID string) (generation.Row, error) {
	return read.Generation(s.q.GetByProviderJob(ctx, pgdb.GetByProviderJobParams{Provider: provider, ProviderJobID: jobID}))
}

func (s genStore) ListGenerations(ctx context.Context, q generation.ListQuery) ([]generation.Row, error) {
	return rows.Generations(s.q.ListGenerations(ctx, rows.ListGenerations(q)))
}

func (s genStore) NextDueAt(ctx context.Context) (time.Time, error) {
	return rows.Due(s.q.NextDueAt(ctx))
}

func (s genStore) OutputsToExpire(ctx context.Context, before time.Time, limit int) ([]generation.Row, error) {
	return rows.OutputsToExpire(s.q.OutputsToExpire(ctx, pgdb.OutputsToExpireParams{Before: before.UnixMilli(), Lim: int64(limit)}))
}

func (s genStore) PendingDeliveries(ctx context.Context, genID string) ([]generation.Delivery, error) {
	rs, err := s.q.PendingDeliveries(ctx, genID)
	return rows.Deliveries(genID, rs, err)
}

// LockOwner takes a transaction-scoped advisory lock on the owner: the
// decisions on one owner's rows (budget, idempotency, in-flight cap) are
// serialized across every replica until commit.
// The lock is queued: it goes with the next statement (pipe).
func (t *Tx) LockOwner(ctx context.Context, owner string) error {
	return t.p.deferred(func() error { return t.q.LockOwner(ctx, owner) })
}

func (t *Tx) CountInFlight(ctx context.Context, owner string) (int64, error) {
	return t.q.CountInFlight(ctx, owner)
}

// TakeCreateToken takes a token in one statement (the query does
// generation.Rate.Take's arithmetic); only a refusal reads the bucket, to
// compute the wait with Rate.Take itself.
func (t *Tx) TakeCreateToken(ctx context.Context, owner string, r generation.Rate, now time.Time) (time.Duration, error) {
	ms := now.UnixMilli()
	_, err := t.q.TakeCreateToken(ctx, pgdb.TakeCreateTokenParams{Owner: owner, Burst: float64(max(r.Burst, 1)), Now: ms, Rate: max(r.PerSecond, 0)})
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, err
	}
	b, err := t.q.GetCreateBucket(ctx, owner)
	if err != nil {
		return 0, err
	}
	_, _, wait := r.Take(b.Tokens, time.UnixMilli(b.UpdatedAt), true, time.UnixMilli(ms))
	// The statement refused: never report a token that was not taken,
	// whatever the last bit of floating point says.
	return max(wait, time.Millisecond), nil
}

func (t *Tx) PruneCreateBuckets(ctx context.Context, now time.Time) (int64, error) {
	return t.q.PruneCreateBuckets(ctx, now.UnixMilli())
}

// InsertGeneration is queued (pipe): a reused key is reported by the
// statement that carries it, at the latest by the commit (Write).
func (t *Tx) InsertGeneration(ctx context.Context, r generation.Row) error {
	return t.p.deferred(func() error { return t.q.InsertGeneration(ctx, rows.InsertGeneration(r)) })
}

// duplicateKey is the error InsertGeneration's statement fails with when
// the owner already used its idempotency key.
func duplicateKey(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "generations_idempotency" {
		return fmt.Errorf("%w: %w", generation.ErrDuplicateKey, err)
	}
	return err
}

// fromSet is an event's source statuses for the guard
// status = ANY(@from_set).
func fromSet(from []generation.Status) []string {
	out := make([]string, len(from))
	for i, s := range from {
		out[i] = string(s)
	}
	return out
}

func (t *Tx) Apply(ctx context.Context, c generation.Change) (bool, error) {
	from, now := fromSet(c.From), c.At.UnixMilli()
	var n int64
	var err error
	switch c.Event {
	case generation.EventHold:
		n, err = t.q.SetReservedParams(ctx, pgdb.SetReservedParamsParams{ID: c.ID, FromSet: from, Params: c.Params, StatusMessage: c.Message, Now: now})
	case generation.EventQueue:
		n, err = t.q.Approve(ctx, pgdb.ApproveParams{ID: c.ID, FromSet: from, Params: c.Params, StatusMessage: c.Message, Now: now})
	case generation.EventSubmit:
		n, err = t.q.MarkSubmitting(ctx, pgdb.MarkSubmittingParams{ID: c.ID, FromSet: from, Now: now})
	case generation.EventSubmitted:
		n, err = t.q.MarkSubmitted(ctx, pgdb.MarkSubmittedParams{ID: c.ID, FromSet: from, ProviderJob: c.Job, ProviderJobID: c.JobID,
			Status: string(c.To), StatusMessage: c.Message, Progress: c.Progress, Now: now})
	case generation.EventProgress:
		n, err = t.q.UpdateProgress(ctx, pgdb.UpdateProgressParams{ID: c.ID, FromSet: from, Status: string(c.To), StatusMessage: c.Message, Progress: c.Progress, Now: now})
	case generation.EventComplete:
		n, err = t.q.Complete(ctx, pgdb.CompleteParams{ID: c.ID, FromSet: from, StatusMessage: c.Message, Outputs: c.Outputs, Now: now})
	case generation.EventFail:
		n, err = t.q.Fail(ctx, pgdb.FailParams{ID: c.ID, FromSet: from, StatusMessage: c.Message, ErrorKind: string(c.ErrorKind), ErrorMessage: c.ErrorMessage, Now: now})
	case generation.EventAbandon, generation.EventExpire: // both fail refunded; c.From tells them apart
		n, err = t.q.Abandon(ctx, pgdb.AbandonParams{ID: c.ID, FromSet: from, StatusMessage: c.Message, ErrorKind: string(c.ErrorKind), ErrorMessage: c.ErrorMessage, Now: now})
	case generation.EventCancel:
		n, err = t.q.CancelUnsubmitted(ctx, pgdb.CancelUnsubmittedParams{ID: c.ID, FromSet: from, StatusMessage: c.Message, Now: now})
	case generation.EventCancelAsk:
		n, err = t.q.RequestCancel(ctx, pgdb.RequestCancelParams{ID: c.ID, FromSet: from, Now: now})
	case generation.EventCancelled:
		n, err = t.q.CancelConfirmed(ctx, pgdb.CancelConfirmedParams{ID: c.ID, FromSet: from, StatusMessage: c.Message, Now: now})
	default:
		return false, fmt.Errorf("postgres: no statement for event %q", c.Event)
	}
	return t.noted(chanGeneration, c.ID, n, err)
}

func (t *Tx) Claim(ctx context.Context, runner string, leaseUntil, now time.Time) (generation.Row, bool, error) {
	return read.Claim(t.q.ClaimDue(ctx, pgdb.ClaimDueParams{LeaseOwner: runner, LeaseUntil: leaseUntil.UnixMilli(), Now: now.UnixMilli()}))
}

func (t *Tx) Reschedule(ctx context.Context, id, runner string, next, now time.Time, cancelSeen bool) error {
	return t.q.Reschedule(ctx, pgdb.RescheduleParams{ID: id, LeaseOwner: runner, NextCheckAt: rows.NullTime(next), Now: now.UnixMilli(), CancelSeen: rows.Flag(cancelSeen)})
}

func (t *Tx) WakeNow(ctx context.Context, id string, now time.Time) error {
	return t.q.WakeNow(ctx, pgdb.WakeNowParams{ID: id, Now: now.UnixMilli()})
}

func (t *Tx) WakeOwnerQueued(ctx context.Context, owner string, now time.Time) error {
	return t.q.WakeOwnerQueued(ctx, pgdb.WakeOwnerQueuedParams{Owner: owner, Now: now.UnixMilli()})
}

func (t *Tx) MarkCancelSent(ctx context.Context, id string) error { return t.q.MarkCancelSent(ctx, id) }

func (t *Tx) ResetSubmitting(ctx context.Context, id string) error {
	return t.q.ResetSubmitting(ctx, id)
}

func (t *Tx) MarkOutputsExpired(ctx context.Context, id string) (bool, error) {
	n, err := t.q.MarkOutputsExpired(ctx, id)
	return t.noted(chanGeneration, id, n, err)
}

// ReleaseLeases releases nothing: several replicas' runners share this
// database, and a killed replica's leases are taken over when they
// expire.
func (t *Tx) ReleaseLeases(context.Context) error { return nil }

// RenewLease extends the lease runner took with the claim that left
// attempts at claim; false when that lease is no longer held.
func (t *Tx) RenewLease(ctx context.Context, id, runner string, claim int64, until time.Time) (bool, error) {
	return rows.Changed(t.q.RenewLease(ctx, pgdb.RenewLeaseParams{ID: id, LeaseOwner: runner, Claim: claim, LeaseUntil: until.UnixMilli()}))
}

func (t *Tx) ReleaseRunnerLeases(ctx context.Context, runner string) error {
	return t.q.ReleaseRunnerLeases(ctx, runner)
}

func (t *Tx) InsertDelivery(ctx context.Context, d generation.Delivery) (bool, error) {
	return rows.Changed(t.q.InsertDelivery(ctx, rows.InsertDelivery(d)))
}

func (t *Tx) ConsumeDeliveries(ctx context.Context, genID string, upto int64, now time.Time) error {
	return t.q.ConsumeDeliveries(ctx, pgdb.ConsumeDeliveriesParams{GenerationID: genID, Upto: upto, Now: now.UnixMilli()})
}

func (s genStore) ReservationsToExpire(ctx context.Context, before time.Time, limit int) ([]string, error) {
	return s.q.ReservationsToExpire(ctx, pgdb.ReservationsToExpireParams{Before: before.UnixMilli(), Lim: int64(limit)})
}

func (s genStore) GenerationsToPurge(ctx context.Context, before time.Time, limit int) ([]generation.Row, error) {
	return rows.ToPurge(s.q.GenerationsToPurge(ctx, pgdb.GenerationsToPurgeParams{Before: before.UnixMilli(), Lim: int64(limit)}))
}

// DeleteGeneration is noted: the replicas' caches drop the purged row.
func (t *Tx) DeleteGeneration(ctx context.Context, id string) (bool, error) {
	n, err := t.q.DeleteGeneration(ctx, id)
	return t.noted(chanGeneration, id, n, err)
}

func (t *Tx) PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int64, error) {
	return t.q.PurgeDeliveries(ctx, pgdb.PurgeDeliveriesParams{Before: before.UnixMilli(), Lim: int64(limit)})
}

func (r reads) Generation(ctx context.Context, id string) (generation.Row, error) {
	return read.Generation(r.q.GetGeneration(ctx, id))
}

func (r reads) GenerationByKey(ctx context.Context, owner, key string) (generation.Row, error) {
	return read.Generation(r.q.GetByIdempotencyKey(ctx, pgdb.GetByIdempotencyKeyParams{Owner: owner, IdempotencyKey: sql.NullString{String: key, Valid: true}}))
}

func (r reads) SpentSince(ctx context.Context, owner string, since time.Time) (int64, error) {
	return r.q.SpentSince(ctx, pgdb.SpentSinceParams{Owner: owner, Since: since.UnixMilli()})
}

func (r reads) SpentAndKey(ctx context.Context, owner, key string, since time.Time) (int64, string, error) {
	row, err := r.q.SpentAndKey(ctx, pgdb.SpentAndKeyParams{Owner: owner, Since: since.UnixMilli(), IdempotencyKey: sql.NullString{String: key, Valid: true}})
	return row.Spent, row.Earlier, err
}

func (r reads) LastPendingDelivery(ctx context.Context, genID string) (int64, error) {
	return r.q.LastPendingDelivery(ctx, genID)
}
