-- Every generations row carries a version that only grows (PostgreSQL's
-- 0013_generation_version.sql; one row mapping for both engines). SQLite
-- has no BEFORE UPDATE assignment to NEW, so an AFTER UPDATE trigger sets
-- it (recursive triggers are off, and the WHEN clause stops it anyway).
ALTER TABLE generations ADD COLUMN version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER generations_version AFTER UPDATE ON generations
    FOR EACH ROW WHEN NEW.version = OLD.version
BEGIN
    UPDATE generations SET version = OLD.version + 1 WHERE id = OLD.id;
END;
