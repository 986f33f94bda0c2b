-- name: ReplicaHeartbeat :one
-- Records this replica as live now, forgets replicas silent for an hour,
-- and counts those seen within @live_ms (this one included).
WITH now_ms AS (
    SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint AS ms
), beat AS (
    INSERT INTO replicas (id, seen_at) SELECT @id, ms FROM now_ms
    ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at
    RETURNING id
), gone AS (
    DELETE FROM replicas WHERE seen_at < (SELECT ms FROM now_ms) - 3600000
)
SELECT 1 + COUNT(*) FROM replicas, now_ms
WHERE replicas.id <> @id AND replicas.seen_at >= now_ms.ms - @live_ms::bigint;

-- name: ReplicaGone :exec
-- A replica that stops says so, so the others' shares grow at once.
DELETE FROM replicas WHERE id = @id;
