-- name: InsertGeneration :exec
INSERT INTO generations (
    id, owner, model_id, provider, kind, prompt, params, args_hash, credits, charged,
    status, status_message, idempotency_key, created_at, updated_at, next_check_at
) VALUES (
    @id, @owner, @model_id, @provider, @kind, @prompt, @params, @args_hash, @credits, @charged,
    @status, @status_message, @idempotency_key, @created_at, @updated_at, @next_check_at
);

-- name: GetGeneration :one
SELECT * FROM generations WHERE id = @id;

-- name: GetOwnedGeneration :one
SELECT * FROM generations WHERE id = @id AND owner = @owner;

-- name: GetByIdempotencyKey :one
SELECT * FROM generations WHERE owner = @owner AND idempotency_key = @idempotency_key;

-- name: ListGenerations :many
SELECT * FROM generations
WHERE owner = @owner
  AND (@status::text = '' OR status = @status)
  AND (@before_created::bigint = 0 OR created_at < @before_created
       OR (created_at = @before_created AND id < @before_id))
ORDER BY created_at DESC, id DESC
LIMIT @lim::bigint;

-- name: SpentSince :one
SELECT COALESCE(SUM(charged), 0)::bigint AS spent
FROM generations WHERE owner = @owner AND created_at >= @since;

-- name: SpentAndKey :one
-- SpentSince and the id of the owner's generation of an idempotency key
-- (empty when none) in one statement: a keyed create with a budget reads both
-- under the owner's lock in one round trip.
SELECT (SELECT COALESCE(SUM(charged), 0) FROM generations s WHERE s.owner = sqlc.arg(owner) AND s.created_at >= sqlc.arg(since))::bigint AS spent,
       COALESCE((SELECT k.id FROM generations k WHERE k.owner = sqlc.arg(owner) AND k.idempotency_key = sqlc.arg(idempotency_key)), '')::text AS earlier;

-- name: CountInFlight :one
-- Counts the outputs the owner has at the provider: a generation of
-- several outputs counts each (params.count, absent for one).
SELECT COALESCE(SUM(COALESCE((params::jsonb->>'count')::bigint, 1)), 0)::bigint FROM generations
WHERE owner = @owner AND status IN ('queued', 'running') AND submit_state != '';

-- name: ClaimDue :one
-- Takes the lease on the next due generation. Runners on every replica
-- claim; SKIP LOCKED lets them pass each other's claims, and an expired
-- lease (a killed replica) makes the row due again.
UPDATE generations
SET lease_owner = @lease_owner, lease_until = @lease_until, attempts = attempts + 1
WHERE id = (
    SELECT due.id FROM generations AS due
    WHERE due.next_check_at IS NOT NULL AND due.lease_until < @now AND due.next_check_at <= @now
    ORDER BY due.next_check_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING *;

-- name: NextDueAt :one
-- A leased row is due again when its lease expires (a killed replica's
-- work is taken over then); the replica stepping it reschedules it
-- before that.
SELECT COALESCE(MIN(CASE WHEN lease_until = 0 THEN next_check_at
                         ELSE GREATEST(next_check_at, lease_until + 1) END), 0)::bigint AS due
FROM generations WHERE next_check_at IS NOT NULL;

-- name: RenewLease :execrows
-- Extends a lease while its step runs. The claim is the row's attempts
-- as that claim left it (each claim adds one), so a renewal by a runner
-- whose lease expired and was taken over, even by itself, changes nothing.
UPDATE generations SET lease_until = @lease_until
WHERE id = @id AND lease_owner = @lease_owner AND attempts = @claim AND lease_until > 0;

-- name: MarkCancelSent :exec
UPDATE generations SET cancel_requested = 2 WHERE id = @id AND cancel_requested = 1;

-- name: Reschedule :exec
-- A cancel asked while the step ran (the step began without one) is
-- acted on at once, not at the step's planned next look; a cancel the
-- step already tried and failed backs off like any other retry.
UPDATE generations
SET next_check_at = CASE WHEN cancel_requested = 1 AND @cancel_seen::bigint = 0
                         THEN @now::bigint ELSE @next_check_at END,
    lease_owner = '', lease_until = 0
WHERE id = @id AND lease_owner = @lease_owner;

-- name: Approve :execrows
-- reserved -> queued, once the input image or the spend approval is in.
-- Every status change takes @from_set, the statuses it may leave, from
-- generation's lifecycle table.
UPDATE generations
SET status = 'queued', status_message = @status_message, params = @params,
    updated_at = @now, next_check_at = @now
WHERE id = @id AND status = ANY(@from_set::text[]);

-- name: MarkSubmitting :execrows
-- Recorded before the provider is called, so that after a crash the runner
-- knows a job may exist and reconciles instead of submitting twice.
UPDATE generations
SET submit_state = 'submitting', updated_at = @now
WHERE id = @id AND status = ANY(@from_set::text[]) AND submit_state = '' AND cancel_requested = 0;

-- Only a submit in progress takes a job: a recorded job is never replaced
-- (a late record of a submit loses to whatever another claim bound).
-- name: MarkSubmitted :execrows
UPDATE generations
SET submit_state = 'submitted', provider_job = @provider_job, provider_job_id = @provider_job_id,
    submitted_at = @now, status = @status,
    status_message = @status_message, progress = @progress, updated_at = @now
WHERE id = @id AND status = ANY(@from_set::text[])
  AND submit_state = 'submitting';

-- name: UpdateProgress :execrows
UPDATE generations
SET status = @status, status_message = @status_message, progress = @progress, updated_at = @now
WHERE id = @id AND status = ANY(@from_set::text[])
  AND (status != @status OR status_message != @status_message OR progress != @progress);

-- name: Complete :execrows
UPDATE generations
SET status = 'completed', status_message = @status_message, progress = 1, outputs = @outputs,
    updated_at = @now, next_check_at = NULL, lease_owner = '', lease_until = 0
WHERE id = @id AND status = ANY(@from_set::text[]);

-- name: Fail :execrows
UPDATE generations
SET status = 'failed', status_message = @status_message, error_kind = @error_kind,
    error_message = @error_message, updated_at = @now, next_check_at = NULL,
    lease_owner = '', lease_until = 0
WHERE id = @id AND status = ANY(@from_set::text[]);

-- name: Abandon :execrows
-- darkroom gives up on a live generation (its maximum lifetime passed, or
-- its step crashed): it fails and its credits are refunded.
UPDATE generations
SET status = 'failed', status_message = @status_message, error_kind = @error_kind,
    error_message = @error_message, charged = 0, updated_at = @now, next_check_at = NULL,
    lease_owner = '', lease_until = 0
WHERE id = @id AND status = ANY(@from_set::text[]);

-- name: CancelUnsubmitted :execrows
-- A reserved generation, or a queued one not yet handed to the provider,
-- ends cancelled at once and its credits are refunded.
UPDATE generations
SET status = 'cancelled', status_message = @status_message, charged = 0, updated_at = @now,
    next_check_at = NULL, lease_owner = '', lease_until = 0
WHERE id = @id AND status = ANY(@from_set::text[]) AND submit_state = '';

-- name: RequestCancel :execrows
UPDATE generations
SET cancel_requested = 1, updated_at = @now, next_check_at = @now
WHERE id = @id AND status = ANY(@from_set::text[]) AND cancel_requested = 0;

-- name: CancelConfirmed :execrows
-- The provider confirmed the cancel: nothing was delivered, so the credits
-- are refunded.
UPDATE generations
SET status = 'cancelled', status_message = @status_message, charged = 0, updated_at = @now,
    next_check_at = NULL, lease_owner = '', lease_until = 0
WHERE id = @id AND status = ANY(@from_set::text[]);

-- name: OutputsToExpire :many
SELECT id, outputs FROM generations
WHERE status = 'completed' AND outputs_expired = 0 AND updated_at < @before
ORDER BY updated_at
LIMIT @lim::bigint;

-- name: MarkOutputsExpired :execrows
UPDATE generations SET outputs_expired = 1
WHERE id = @id AND status = 'completed' AND outputs_expired = 0;

-- name: ResetSubmitting :exec
-- The provider surely made no job (throttled before creating one): the
-- next attempt submits afresh.
UPDATE generations SET submit_state = ''
WHERE id = @id AND submit_state = 'submitting' AND status = 'queued';

-- name: GetByProviderJob :one
SELECT * FROM generations WHERE provider = @provider AND provider_job_id = @provider_job_id;

-- name: WakeNow :exec
-- A webhook arrived: look at the generation now.
UPDATE generations SET next_check_at = @now::bigint
WHERE id = @id AND status IN ('queued', 'running') AND lease_until = 0;

-- name: SetReservedParams :execrows
-- A reserved generation got one of the things it waits for, not all.
UPDATE generations SET params = @params, status_message = @status_message, updated_at = @now
WHERE id = @id AND status = ANY(@from_set::text[]);

-- name: WakeOwnerQueued :exec
-- One of the owner's generations left the provider: those held back by
-- the in-flight cap may start now.
UPDATE generations SET next_check_at = @now::bigint
WHERE owner = @owner AND status = 'queued' AND submit_state = '' AND lease_until = 0
  AND next_check_at > @now::bigint;

-- name: LockOwner :exec
-- Serializes the transactions that decide on one owner's rows (budget,
-- idempotency, in-flight cap) until commit.
SELECT pg_advisory_xact_lock(hashtextextended(@owner::text, 0));

-- name: InsertDelivery :execrows
-- A verified webhook delivery; a repeat of its delivery id is ignored.
INSERT INTO webhook_deliveries (provider, delivery_id, generation_id, event, received_at)
VALUES (@provider, @delivery_id, @generation_id, @event, @received_at)
ON CONFLICT (provider, delivery_id) DO NOTHING;

-- name: PendingDeliveries :many
SELECT seq, event FROM webhook_deliveries
WHERE generation_id = @generation_id AND consumed_at IS NULL
ORDER BY seq;

-- name: ConsumeDeliveries :exec
UPDATE webhook_deliveries SET consumed_at = @now::bigint
WHERE generation_id = @generation_id AND consumed_at IS NULL AND seq <= @upto;

-- name: LastPendingDelivery :one
SELECT COALESCE(MAX(seq), 0)::bigint AS seq FROM webhook_deliveries
WHERE generation_id = @generation_id AND consumed_at IS NULL;

-- name: ReleaseRunnerLeases :exec
-- A stopping runner hands back what it holds: due again at once, for the
-- restart or another replica.
UPDATE generations SET lease_owner = '', lease_until = 0
WHERE lease_owner = @lease_owner AND lease_until > 0;

-- name: GetCreateBucket :one
-- Read after LockOwner: the owner's creating transactions are serialized.
SELECT tokens, updated_at FROM create_buckets WHERE owner = @owner;

-- name: PutCreateBucket :exec
INSERT INTO create_buckets (owner, tokens, updated_at) VALUES (@owner, @tokens, @updated_at)
ON CONFLICT (owner) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at;

-- name: TakeCreateToken :one
-- One round trip for a taken token: generation.Rate.Take's refill (ms
-- elapsed × rate, capped at burst; a clock behind the stored time refills
-- nothing and never moves it back) and take, only when a whole token is
-- there; no row returned: refused, nothing changed. full_at is
-- Rate.FullAt of what is written (full_in: ms from the new updated_at).
INSERT INTO create_buckets AS b (owner, tokens, updated_at, full_at)
VALUES (sqlc.arg(owner), sqlc.arg(burst)::float8 - 1, sqlc.arg(now)::bigint,
    CASE WHEN sqlc.arg(rate)::float8 > 0
        THEN sqlc.arg(now)::bigint + LEAST(CEIL(1000.0 / sqlc.arg(rate)::float8), 9e12)::bigint
        ELSE 9223372036854775807 END)
ON CONFLICT (owner) DO UPDATE
SET tokens = LEAST(sqlc.arg(burst)::float8, b.tokens + GREATEST(sqlc.arg(now)::bigint - b.updated_at, 0) * sqlc.arg(rate)::float8 / 1000.0) - 1,
    updated_at = GREATEST(sqlc.arg(now)::bigint, b.updated_at),
    full_at = CASE WHEN sqlc.arg(rate)::float8 > 0
        THEN GREATEST(sqlc.arg(now)::bigint, b.updated_at) + LEAST(CEIL((sqlc.arg(burst)::float8
            - (LEAST(sqlc.arg(burst)::float8, b.tokens + GREATEST(sqlc.arg(now)::bigint - b.updated_at, 0) * sqlc.arg(rate)::float8 / 1000.0) - 1))
            * 1000.0 / sqlc.arg(rate)::float8), 9e12)::bigint
        ELSE 9223372036854775807 END
WHERE LEAST(sqlc.arg(burst)::float8, b.tokens + GREATEST(sqlc.arg(now)::bigint - b.updated_at, 0) * sqlc.arg(rate)::float8 / 1000.0) >= 1
RETURNING tokens;

-- name: PruneCreateBuckets :execrows
-- Buckets full again by now: no row says the same.
DELETE FROM create_buckets WHERE full_at <= @now;

-- name: GenerationsToPurge :many
-- Ended generations last changed before @before whose outputs are gone
-- (never any, or expired): the history retention deletes them.
SELECT id, params FROM generations
WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < @before
  AND (status <> 'completed' OR outputs_expired = 1)
ORDER BY updated_at
LIMIT @lim::bigint;

-- name: DeleteGeneration :execrows
-- GenerationsToPurge's guard again, in the deleting transaction.
DELETE FROM generations
WHERE id = @id AND status IN ('completed', 'failed', 'cancelled')
  AND (status <> 'completed' OR outputs_expired = 1);

-- name: PurgeDeliveries :execrows
-- Deliveries that can dedupe nothing any more: received before @before,
-- for a generation that ended or is gone.
DELETE FROM webhook_deliveries WHERE seq IN (
    SELECT d.seq FROM webhook_deliveries AS d
    LEFT JOIN generations AS g ON g.id = d.generation_id
    WHERE d.received_at < @before::bigint
      AND (g.id IS NULL OR g.status IN ('completed', 'failed', 'cancelled'))
    ORDER BY d.received_at
    LIMIT @lim::bigint
);

-- name: GenerationVersions :many
-- The versions of the given generations in one query (the read cache's
-- resync: an entry whose row moved on, or is gone, is dropped).
SELECT id, version FROM generations WHERE id = ANY(@ids::text[]);

-- name: ReservationsToExpire :many
-- Generations still reserved (waiting for an upload or an approval) that
-- were created before @before: the reservation retention fails them.
SELECT id FROM generations
WHERE status = 'reserved' AND created_at < @before
ORDER BY created_at
LIMIT @lim::bigint;
