-- Every tasks row carries a version that only grows: a replica's read
-- cache replaces an entry only by a higher version, and a notification
-- names the version it announces. The trigger keeps it, so no update
-- query can forget to (the database, not a replica's clock, decides).
ALTER TABLE tasks ADD COLUMN version BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION darkroom_bump_version() RETURNS trigger AS $$
BEGIN
    NEW.version := OLD.version + 1;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER tasks_version BEFORE UPDATE ON tasks
    FOR EACH ROW EXECUTE FUNCTION darkroom_bump_version();
