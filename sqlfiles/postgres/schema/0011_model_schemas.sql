-- Model schemas fetched from a provider (provider/modelschema): the
-- document as fetched (bounded to 256 KiB before it gets here) with when,
-- so it is fetched once, refreshed when old, and served while the
-- provider is down. Keyed by the qualified model id.
CREATE TABLE model_schemas (
    model_id   TEXT PRIMARY KEY,
    info       BYTEA NOT NULL,
    fetched_at BIGINT NOT NULL -- unix ms
);
