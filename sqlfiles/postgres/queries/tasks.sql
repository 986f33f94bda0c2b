-- name: InsertTask :exec
INSERT INTO tasks (
    task_id, owner, ref, status, status_message, created_at, last_updated_at,
    ttl_ms, poll_interval_ms, expires_at, input_requests, key_seq, result, error, client_caps
) VALUES (
    @task_id, @owner, @ref, @status, @status_message, @created_at, @last_updated_at,
    @ttl_ms, @poll_interval_ms, @expires_at, @input_requests, @key_seq, @result, @error, @client_caps
);

-- name: GetTask :one
SELECT * FROM tasks WHERE task_id = @task_id;

-- name: GetOwnedTask :one
-- The task if owner owns it: a foreign id finds no row, as an unknown one.
SELECT * FROM tasks WHERE task_id = @task_id AND owner = @owner;

-- name: GetTaskByRef :one
SELECT * FROM tasks WHERE ref = @ref;

-- name: SetTaskActive :execrows
-- working <-> input_required, with the outstanding input requests. Only a
-- non-terminal task moves: terminal states never change.
UPDATE tasks
SET status = @status, status_message = @status_message, input_requests = @input_requests,
    key_seq = @key_seq, poll_interval_ms = @poll_interval_ms, last_updated_at = @now
WHERE task_id = @task_id AND status IN ('working', 'input_required');

-- name: SetTaskAnswers :execrows
UPDATE tasks
SET input_requests = @input_requests, answered_keys = @answered_keys,
    input_responses = @input_responses, last_updated_at = @now
WHERE task_id = @task_id AND status = 'input_required';

-- name: FinishTask :execrows
-- The one way into a terminal state: compare-and-set on a live status.
UPDATE tasks
SET status = @status, status_message = @status_message, result = @result, error = @error,
    input_requests = '{}', last_updated_at = @now
WHERE task_id = @task_id AND status IN ('working', 'input_required');

-- name: ExpiredLiveTasks :many
SELECT task_id, ref FROM tasks
WHERE expires_at IS NOT NULL AND expires_at <= @now::bigint AND status IN ('working', 'input_required')
LIMIT @lim::bigint;

-- name: PurgeTasks :execrows
DELETE FROM tasks WHERE task_id IN (
    SELECT old.task_id FROM tasks AS old
    WHERE old.expires_at IS NOT NULL AND old.expires_at <= @cutoff::bigint
    LIMIT @lim::bigint
);

-- name: TaskVersions :many
-- The versions of the given tasks in one query (the read cache's resync:
-- an entry whose row moved on, or is gone, is dropped).
SELECT task_id, version FROM tasks WHERE task_id = ANY(@ids::text[]);
