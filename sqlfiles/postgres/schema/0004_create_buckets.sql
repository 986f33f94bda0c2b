-- Per-owner create-rate token buckets, decided inside the creating
-- transaction after LockOwner (generation.Service.Create): exact across
-- replicas. No row: a full bucket.
CREATE TABLE create_buckets (
    owner      TEXT PRIMARY KEY,
    tokens     DOUBLE PRECISION NOT NULL,
    updated_at BIGINT NOT NULL -- unix ms of the last refill
);
