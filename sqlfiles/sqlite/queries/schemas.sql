-- name: ModelSchema :one
SELECT model_id, info, fetched_at FROM model_schemas WHERE model_id = ?;

-- name: PutModelSchema :exec
-- A later fetch replaces an earlier one; an older one (a slow refresh
-- racing a newer) does not.
INSERT INTO model_schemas (model_id, info, fetched_at) VALUES (?, ?, ?)
ON CONFLICT (model_id) DO UPDATE SET info = excluded.info, fetched_at = excluded.fetched_at
WHERE excluded.fetched_at >= model_schemas.fetched_at;
