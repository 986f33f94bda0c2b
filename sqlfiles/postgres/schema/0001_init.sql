-- darkroom on PostgreSQL: the same records as the SQLite engine (times
-- are unix milliseconds, JSON columns hold small documents as text, so
-- both engines map rows the same way).

CREATE TABLE generations (
    id               TEXT    PRIMARY KEY,          -- hex: 48-bit creation ms + 128 random bits (internal/ids)
    owner            TEXT    NOT NULL,             -- principal id
    model_id         TEXT    NOT NULL,
    provider         TEXT    NOT NULL,
    kind             TEXT    NOT NULL,             -- image | video
    prompt           TEXT    NOT NULL,
    params           TEXT    NOT NULL,             -- JSON: aspect ratio, seed, duration, input image
    args_hash        TEXT    NOT NULL DEFAULT '',  -- digest of the creating arguments
    credits          BIGINT  NOT NULL,             -- cost of the model
    charged          BIGINT  NOT NULL,             -- credits charged (0 after a refund)
    status           TEXT    NOT NULL,             -- reserved|queued|running|completed|failed|cancelled
    status_message   TEXT    NOT NULL DEFAULT '',
    progress         DOUBLE PRECISION NOT NULL DEFAULT 0,
    submit_state     TEXT    NOT NULL DEFAULT '',  -- '' | submitting | submitted
    provider_job     TEXT    NOT NULL DEFAULT '',  -- JSON provider.Job, persisted at submit
    provider_job_id  TEXT    NOT NULL DEFAULT '',
    submitted_at     BIGINT  NOT NULL DEFAULT 0,
    outputs          TEXT    NOT NULL DEFAULT '[]',-- JSON []Output
    outputs_expired  BIGINT  NOT NULL DEFAULT 0,
    error_kind       TEXT    NOT NULL DEFAULT '',  -- '' | provider | internal
    error_message    TEXT    NOT NULL DEFAULT '',
    idempotency_key  TEXT,
    cancel_requested BIGINT  NOT NULL DEFAULT 0,   -- 0 none, 1 asked, 2 sent
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    -- the runner's durable queue
    next_check_at    BIGINT,                       -- NULL: nothing for the runner to do
    attempts         BIGINT  NOT NULL DEFAULT 0,
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_until      BIGINT  NOT NULL DEFAULT 0
);

CREATE UNIQUE INDEX generations_idempotency
    ON generations (owner, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX generations_owner_created ON generations (owner, created_at DESC, id DESC);
CREATE INDEX generations_due ON generations (next_check_at) WHERE next_check_at IS NOT NULL;
CREATE INDEX generations_retention ON generations (updated_at)
    WHERE status = 'completed' AND outputs_expired = 0;
CREATE INDEX generations_provider_job ON generations (provider, provider_job_id)
    WHERE provider_job_id != '';

-- Tasks (io.modelcontextprotocol/tasks): media-agnostic; ref points at the
-- work the task follows (a generation id here).
CREATE TABLE tasks (
    task_id           TEXT    PRIMARY KEY,         -- hex: 48-bit creation ms + 128 random bits
    owner             TEXT    NOT NULL,
    ref               TEXT    NOT NULL,
    status            TEXT    NOT NULL,            -- working|input_required|completed|failed|cancelled
    status_message    TEXT    NOT NULL DEFAULT '',
    created_at        BIGINT  NOT NULL,
    last_updated_at   BIGINT  NOT NULL,
    ttl_ms            BIGINT,                      -- NULL: unlimited
    poll_interval_ms  BIGINT  NOT NULL,
    expires_at        BIGINT,                      -- created_at + ttl_ms
    input_requests    TEXT    NOT NULL DEFAULT '{}',
    answered_keys     TEXT    NOT NULL DEFAULT '[]',
    input_responses   TEXT    NOT NULL DEFAULT '{}',
    key_seq           BIGINT  NOT NULL DEFAULT 0,
    result            TEXT,
    error             TEXT,
    client_caps       TEXT    NOT NULL DEFAULT '{}'
);

CREATE INDEX tasks_ref ON tasks (ref);
-- tasks/get looks a task up by id and owner at once: a foreign id misses
-- in the index exactly as an unknown one does (no existence tell).
CREATE UNIQUE INDEX tasks_id_owner ON tasks (task_id, owner);
CREATE INDEX tasks_expires ON tasks (expires_at) WHERE expires_at IS NOT NULL;

-- Verified webhook deliveries, stored before darkroom answers 2xx and
-- consumed by whichever runner steps the generation, in arrival order.
CREATE TABLE webhook_deliveries (
    seq           BIGSERIAL PRIMARY KEY,
    provider      TEXT    NOT NULL,
    delivery_id   TEXT    NOT NULL,
    generation_id TEXT    NOT NULL,
    event         TEXT    NOT NULL,   -- JSON provider.WebhookEvent
    received_at   BIGINT  NOT NULL,
    consumed_at   BIGINT
);

CREATE UNIQUE INDEX webhook_deliveries_dedup ON webhook_deliveries (provider, delivery_id);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (generation_id, seq)
    WHERE consumed_at IS NULL;
