-- Every generations row carries a version that only grows, as tasks rows
-- do (0012): a replica's generation read cache replaces an entry only by
-- a higher version, and a notification names the version it announces.
ALTER TABLE generations ADD COLUMN version BIGINT NOT NULL DEFAULT 0;

CREATE TRIGGER generations_version BEFORE UPDATE ON generations
    FOR EACH ROW EXECUTE FUNCTION darkroom_bump_version();
