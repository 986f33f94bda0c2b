-- name: PutLivePreview :execrows
-- Replaces the generation's frame, only while it is queued (a synchronous
-- call, OpenAI's, is held while queued) or running (0 rows: it is not,
-- and nothing was written).
INSERT INTO live_previews (generation_id, jpeg, frames, updated_at)
SELECT id, CAST(@jpeg AS BLOB), CAST(@frames AS INTEGER), CAST(@now AS INTEGER) FROM generations WHERE id = @id AND status IN ('queued', 'running')
ON CONFLICT (generation_id) DO UPDATE SET jpeg = excluded.jpeg, frames = excluded.frames, updated_at = excluded.updated_at;

-- name: LivePreview :one
SELECT jpeg, frames FROM live_previews WHERE generation_id = @generation_id;

-- name: LivePreviewFrames :one
SELECT CAST(COALESCE(MAX(frames), 0) AS INTEGER) AS frames FROM live_previews WHERE generation_id = @generation_id;

-- name: DeleteLivePreview :exec
DELETE FROM live_previews WHERE generation_id = @generation_id;
