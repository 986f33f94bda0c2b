-- When each create-rate bucket is full again (unix ms), written with it:
-- a full bucket's row says no more than no row, so rows past that time
-- are deleted (Tx.PruneCreateBuckets) without knowing the owner's rate,
-- and the table holds only the callers who created lately. Rows written
-- before this column are given a day.
ALTER TABLE create_buckets ADD COLUMN full_at BIGINT NOT NULL DEFAULT 0;
UPDATE create_buckets SET full_at = updated_at + 86400000;
