package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/rows"
	"github.com/darkroom-mcp/darkroom/storage/sqlite/sqlitedb"
)

// Generations is the generation store on this database.
func (d *DB) Generations() generation.Store { return genStore{d, reads{d.Queries}} }

type genStore struct {
	d *DB
	reads
}

// reads are the reads a store and its transactions answer alike: on the
// read pool or inside the transaction.
type reads struct{ q *sqlitedb.Queries }

// read turns this engine's generated rows (storage/rows' types) into
// the domain's.
var read = rows.Reader{NoRows: sql.ErrNoRows}

var _ generation.Tx = (*Tx)(nil)

func (s genStore) Update(ctx context.Context, fn func(ctx context.Context, tx generation.Tx) error) error {
	return s.d.Write(ctx, func(ctx context.Context, tx *Tx) error { return fn(ctx, tx) })
}

// UpdateOwner is Update: the writer batches every write waiting at once.
func (s genStore) UpdateOwner(ctx context.Context, _ string, fn func(ctx context.Context, tx generation.Tx) error) error {
	return s.Update(ctx, fn)
}

func (s genStore) Generation(ctx context.Context, id string) (generation.Row, error) {
	return s.d.cachedGeneration(ctx, id)
}

// OwnedGeneration answers a cached row only to its owner. Anyone else's
// id costs a query, as an unknown one does, and answers the same
// ErrNotFound: a foreign id looks exactly like an unknown one.
func (s genStore) OwnedGeneration(ctx context.Context, owner, id string) (generation.Row, error) {
	r, ok, epoch := s.d.cache.lookup(id)
	if ok {
		if r.Owner == owner {
			return r, nil
		}
		return read.Generation(s.q.GetOwnedGeneration(ctx, sqlitedb.GetOwnedGenerationParams{ID: id, Owner: owner}))
	}
	r, err := read.Generation(s.q.GetGeneration(ctx, id))
	if err != nil {
		return r, err
	}
	s.d.cache.put(r, epoch)
	if r.Owner != owner {
		return generation.Row{}, generation.ErrNotFound
	}
	return r, nil
}

func (s genStore) GenerationByJob(ctx context.Context, provider, jobID string) (generation.Row, error) {
	return read.Generation(s.q.GetByProviderJob(ctx, sqlitedb.GetByProviderJobParams{Provider: provider, ProviderJobID: jobID}))
}

func (s genStore) ListGenerations(ctx context.Context, q generation.ListQuery) ([]generation.Row, error) {
	return rows.Generations(s.q.ListGenerations(ctx, rows.ListGenerations(q)))
}

func (s genStore) NextDueAt(ctx context.Context) (time.Time, error) {
	return rows.Due(s.q.NextDueAt(ctx))
}

func (s genStore) OutputsToExpire(ctx context.Context, before time.Time, limit int) ([]generation.Row, error) {
	return rows.OutputsToExpire(s.q.OutputsToExpire(ctx, sqlitedb.OutputsToExpireParams{Before: before.UnixMilli(), Lim: int64(limit)}))
}

func (s genStore) PendingDeliveries(ctx context.Context, genID string) ([]generation.Delivery, error) {
	rs, err := s.q.PendingDeliveries(ctx, genID)
	return rows.Deliveries(genID, rs, err)
}

// LockOwner needs no lock here: the single writer runs one transaction
// at a time.
func (t *Tx) LockOwner(context.Context, string) error { return nil }

func (t *Tx) Generation(ctx context.Context, id string) (generation.Row, error) {
	return read.Generation(t.q.GetGeneration(ctx, id))
}

func (t *Tx) CountInFlight(ctx context.Context, owner string) (int64, error) {
	return t.q.CountInFlight(ctx, owner)
}

// TakeCreateToken reads the owner's bucket, takes a token by
// generation.Rate.Take and writes it back; a refusal writes nothing.
func (t *Tx) TakeCreateToken(ctx context.Context, owner string, r generation.Rate, now time.Time) (time.Duration, error) {
	b, err := t.q.GetCreateBucket(ctx, owner)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, err
	}
	left, at, wait := r.Take(b.Tokens, time.UnixMilli(b.UpdatedAt), found, now)
	if wait > 0 {
		return wait, nil
	}
	return 0, t.q.PutCreateBucket(ctx, sqlitedb.PutCreateBucketParams{
		Owner: owner, Tokens: left, UpdatedAt: at.UnixMilli(), FullAt: r.FullAt(left, at).UnixMilli(),
	})
}

func (t *Tx) PruneCreateBuckets(ctx context.Context, now time.Time) (int64, error) {
	return t.q.PruneCreateBuckets(ctx, now.UnixMilli())
}

func (t *Tx) InsertGeneration(ctx context.Context, r generation.Row) error {
	err := t.q.InsertGeneration(ctx, rows.InsertGeneration(r))
	if err != nil && r.IdempotencyKey != "" && strings.Contains(err.Error(), "UNIQUE") && strings.Contains(err.Error(), "idempotency") {
		return generation.ErrDuplicateKey
	}
	return err
}

// fromSet encodes an event's source statuses for the guard
// instr(@from_set, '|' || status || '|').
func fromSet(from []generation.Status) string {
	var b strings.Builder
	b.WriteByte('|')
	for _, s := range from {
		b.WriteString(string(s))
		b.WriteByte('|')
	}
	return b.String()
}

func (t *Tx) Apply(ctx context.Context, c generation.Change) (bool, error) {
	from, now := fromSet(c.From), c.At.UnixMilli()
	var n int64
	var err error
	switch c.Event {
	case generation.EventHold:
		n, err = t.q.SetReservedParams(ctx, sqlitedb.SetReservedParamsParams{ID: c.ID, FromSet: from, Params: c.Params, StatusMessage: c.Message, Now: now})
	case generation.EventQueue:
		n, err = t.q.Approve(ctx, sqlitedb.ApproveParams{ID: c.ID, FromSet: from, Params: c.Params, StatusMessage: c.Message, Now: now})
	case generation.EventSubmit:
		n, err = t.q.MarkSubmitting(ctx, sqlitedb.MarkSubmittingParams{ID: c.ID, FromSet: from, Now: now})
	case generation.EventSubmitted:
		n, err = t.q.MarkSubmitted(ctx, sqlitedb.MarkSubmittedParams{ID: c.ID, FromSet: from, ProviderJob: c.Job, ProviderJobID: c.JobID,
			Status: string(c.To), StatusMessage: c.Message, Progress: c.Progress, Now: now})
	case generation.EventProgress:
		n, err = t.q.UpdateProgress(ctx, sqlitedb.UpdateProgressParams{ID: c.ID, FromSet: from, Status: string(c.To), StatusMessage: c.Message, Progress: c.Progress, Now: now})
	case generation.EventComplete:
		n, err = t.q.Complete(ctx, sqlitedb.CompleteParams{ID: c.ID, FromSet: from, StatusMessage: c.Message, Outputs: c.Outputs, Now: now})
	case generation.EventFail:
		n, err = t.q.Fail(ctx, sqlitedb.FailParams{ID: c.ID, FromSet: from, StatusMessage: c.Message, ErrorKind: string(c.ErrorKind), ErrorMessage: c.ErrorMessage, Now: now})
	case generation.EventAbandon, generation.EventExpire: // both fail refunded; c.From tells them apart
		n, err = t.q.Abandon(ctx, sqlitedb.AbandonParams{ID: c.ID, FromSet: from, StatusMessage: c.Message, ErrorKind: string(c.ErrorKind), ErrorMessage: c.ErrorMessage, Now: now})
	case generation.EventCancel:
		n, err = t.q.CancelUnsubmitted(ctx, sqlitedb.CancelUnsubmittedParams{ID: c.ID, FromSet: from, StatusMessage: c.Message, Now: now})
	case generation.EventCancelAsk:
		n, err = t.q.RequestCancel(ctx, sqlitedb.RequestCancelParams{ID: c.ID, FromSet: from, Now: now})
	case generation.EventCancelled:
		n, err = t.q.CancelConfirmed(ctx, sqlitedb.CancelConfirmedParams{ID: c.ID, FromSet: from, StatusMessage: c.Message, Now: now})
	default:
		return false, fmt.Errorf("sqlite: no statement for event %q", c.Event)
	}
	return rows.Changed(n, err)
}

func (t *Tx) Claim(ctx context.Context, runner string, leaseUntil, now time.Time) (generation.Row, bool, error) {
	return read.Claim(t.q.ClaimDue(ctx, sqlitedb.ClaimDueParams{LeaseOwner: runner, LeaseUntil: leaseUntil.UnixMilli(), Now: now.UnixMilli()}))
}

func (t *Tx) Reschedule(ctx context.Context, id, runner string, next, now time.Time, cancelSeen bool) error {
	return t.q.Reschedule(ctx, sqlitedb.RescheduleParams{ID: id, LeaseOwner: runner, NextCheckAt: rows.NullTime(next), Now: now.UnixMilli(), CancelSeen: rows.Flag(cancelSeen)})
}

func (t *Tx) WakeNow(ctx context.Context, id string, now time.Time) error {
	return t.q.WakeNow(ctx, sqlitedb.WakeNowParams{ID: id, Now: now.UnixMilli()})
}

func (t *Tx) WakeOwnerQueued(ctx context.Context, owner string, now time.Time) error {
	return t.q.WakeOwnerQueued(ctx, sqlitedb.WakeOwnerQueuedParams{Owner: owner, Now: now.UnixMilli()})
}

func (t *Tx) MarkCancelSent(ctx context.Context, id string) error { return t.q.MarkCancelSent(ctx, id) }

func (t *Tx) ResetSubmitting(ctx context.Context, id string) error {
	return t.q.ResetSubmitting(ctx, id)
}

func (t *Tx) MarkOutputsExpired(ctx context.Context, id string) (bool, error) {
	return rows.Changed(t.q.MarkOutputsExpired(ctx, id))
}

func (t *Tx) ReleaseLeases(ctx context.Context) error { return t.q.ReleaseLeases(ctx) }

// RenewLease extends the lease runner took with the claim that left
// attempts at claim; false when that lease is no longer held.
func (t *Tx) RenewLease(ctx context.Context, id, runner string, claim int64, until time.Time) (bool, error) {
	return rows.Changed(t.q.RenewLease(ctx, sqlitedb.RenewLeaseParams{ID: id, LeaseOwner: runner, Claim: claim, LeaseUntil: until.UnixMilli()}))
}

func (t *Tx) ReleaseRunnerLeases(ctx context.Context, runner string) error {
	return t.q.ReleaseRunnerLeases(ctx, runner)
}

func (t *Tx) InsertDelivery(ctx context.Context, d generation.Delivery) (bool, error) {
	return rows.Changed(t.q.InsertDelivery(ctx, rows.InsertDelivery(d)))
}

func (t *Tx) ConsumeDeliveries(ctx context.Context, genID string, upto int64, now time.Time) error {
	return t.q.ConsumeDeliveries(ctx, sqlitedb.ConsumeDeliveriesParams{GenerationID: genID, Upto: upto, Now: now.UnixMilli()})
}

func (s genStore) ReservationsToExpire(ctx context.Context, before time.Time, limit int) ([]string, error) {
	return s.q.ReservationsToExpire(ctx, sqlitedb.ReservationsToExpireParams{Before: before.UnixMilli(), Lim: int64(limit)})
}

func (s genStore) GenerationsToPurge(ctx context.Context, before time.Time, limit int) ([]generation.Row, error) {
	return rows.ToPurge(s.q.GenerationsToPurge(ctx, sqlitedb.GenerationsToPurgeParams{Before: before.UnixMilli(), Lim: int64(limit)}))
}

func (t *Tx) DeleteGeneration(ctx context.Context, id string) (bool, error) {
	return rows.Changed(t.q.DeleteGeneration(ctx, id))
}

func (t *Tx) PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int64, error) {
	return t.q.PurgeDeliveries(ctx, sqlitedb.PurgeDeliveriesParams{Before: before.UnixMilli(), Lim: int64(limit)})
}

func (r reads) GenerationByKey(ctx context.Context, owner, key string) (generation.Row, error) {
	return read.Generation(r.q.GetByIdempotencyKey(ctx, sqlitedb.GetByIdempotencyKeyParams{Owner: owner, IdempotencyKey: sql.NullString{String: key, Valid: true}}))
}

func (r reads) SpentSince(ctx context.Context, owner string, since time.Time) (int64, error) {
	return r.q.SpentSince(ctx, sqlitedb.SpentSinceParams{Owner: owner, Since: since.UnixMilli()})
}

func (r reads) SpentAndKey(ctx context.Context, owner, key string, since time.Time) (int64, string, error) {
	row, err := r.q.SpentAndKey(ctx, sqlitedb.SpentAndKeyParams{Owner: owner, Since: since.UnixMilli(), IdempotencyKey: sql.NullString{String: key, Valid: true}})
	return row.Spent, row.Earlier, err
}

func (r reads) LastPendingDelivery(ctx context.Context, genID string) (int64, error) {
	return r.q.LastPendingDelivery(ctx, genID)
}
