-- Per-owner create-rate token buckets, decided inside the creating
-- transaction (generation.Service.Create): exact however many replicas
-- share the database. No row: a full bucket.
CREATE TABLE create_buckets (
    owner      TEXT PRIMARY KEY,
    tokens     REAL NOT NULL,
    updated_at INTEGER NOT NULL -- unix ms of the last refill
);
