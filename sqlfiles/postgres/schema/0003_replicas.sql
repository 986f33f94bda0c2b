-- Live replicas: each heartbeats its row (database time, so replica
-- clocks do not matter); the ones seen lately share the per-caller rate
-- limits (server/limit.Split).
CREATE TABLE replicas (
    id      TEXT PRIMARY KEY,
    seen_at BIGINT NOT NULL -- unix ms, the database's clock
);
