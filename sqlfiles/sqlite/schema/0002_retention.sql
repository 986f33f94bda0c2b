-- Outputs live for a retention period; then their blobs are deleted and
-- the generation says so.
ALTER TABLE generations ADD COLUMN outputs_expired INTEGER NOT NULL DEFAULT 0;
CREATE INDEX generations_retention ON generations (updated_at)
    WHERE status = 'completed' AND outputs_expired = 0;
