-- Generations: one row per request to make an image or a video.
-- Times are unix milliseconds. JSON columns hold small documents.
CREATE TABLE generations (
    id               TEXT    PRIMARY KEY,          -- hex: 48-bit creation ms + 128 random bits (internal/ids)
    owner            TEXT    NOT NULL,             -- principal id
    model_id         TEXT    NOT NULL,
    provider         TEXT    NOT NULL,
    kind             TEXT    NOT NULL,             -- image | video
    prompt           TEXT    NOT NULL,
    params           TEXT    NOT NULL,             -- JSON: aspect ratio, seed, duration, input image
    credits          INTEGER NOT NULL,             -- cost of the model
    charged          INTEGER NOT NULL,             -- credits charged (0 after a refund)
    status           TEXT    NOT NULL,             -- reserved|queued|running|completed|failed|cancelled
    status_message   TEXT    NOT NULL DEFAULT '',
    progress         REAL    NOT NULL DEFAULT 0,
    submit_state     TEXT    NOT NULL DEFAULT '',  -- '' | submitting | submitted
    provider_job     TEXT    NOT NULL DEFAULT '',  -- JSON provider.Job, persisted at submit
    outputs          TEXT    NOT NULL DEFAULT '[]',-- JSON []Output
    error_kind       TEXT    NOT NULL DEFAULT '',  -- '' | provider | internal
    error_message    TEXT    NOT NULL DEFAULT '',
    idempotency_key  TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    -- the runner's durable queue
    next_check_at    INTEGER,                      -- NULL: nothing for the runner to do
    attempts         INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_until      INTEGER NOT NULL DEFAULT 0
);

CREATE UNIQUE INDEX generations_idempotency
    ON generations (owner, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX generations_owner_created ON generations (owner, created_at DESC, id DESC);
CREATE INDEX generations_due ON generations (next_check_at) WHERE next_check_at IS NOT NULL;

-- Tasks (io.modelcontextprotocol/tasks): media-agnostic; ref points at the
-- work the task follows (a generation id here).
CREATE TABLE tasks (
    task_id           TEXT    PRIMARY KEY,         -- hex: 48-bit creation ms + 128 random bits (internal/ids)
    owner             TEXT    NOT NULL,
    ref               TEXT    NOT NULL,
    status            TEXT    NOT NULL,            -- working|input_required|completed|failed|cancelled
    status_message    TEXT    NOT NULL DEFAULT '',
    created_at        INTEGER NOT NULL,
    last_updated_at   INTEGER NOT NULL,
    ttl_ms            INTEGER,                     -- NULL: unlimited
    poll_interval_ms  INTEGER NOT NULL,
    expires_at        INTEGER,                     -- created_at + ttl_ms
    input_requests    TEXT    NOT NULL DEFAULT '{}', -- JSON: outstanding key -> request
    answered_keys     TEXT    NOT NULL DEFAULT '[]', -- JSON: keys already answered
    input_responses   TEXT    NOT NULL DEFAULT '{}', -- JSON: key -> response, until consumed
    key_seq           INTEGER NOT NULL DEFAULT 0,  -- makes input keys unique for the task's life
    result            TEXT,                        -- JSON CallToolResult when completed
    error             TEXT,                        -- JSON JSON-RPC error when failed
    client_caps       TEXT    NOT NULL DEFAULT '{}' -- creating request's client capabilities
);

CREATE INDEX tasks_ref ON tasks (ref);
CREATE INDEX tasks_expires ON tasks (expires_at) WHERE expires_at IS NOT NULL;
