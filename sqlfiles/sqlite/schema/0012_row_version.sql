-- Every tasks row carries a version that only grows (PostgreSQL's
-- 0012_row_version.sql; one row mapping for both engines). A replica's
-- read cache replaces an entry only by a higher version. SQLite has no
-- BEFORE UPDATE assignment to NEW, so an AFTER UPDATE trigger sets it
-- (recursive triggers are off, and the WHEN clause stops it anyway).
ALTER TABLE tasks ADD COLUMN version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER tasks_version AFTER UPDATE ON tasks
    FOR EACH ROW WHEN NEW.version = OLD.version
BEGIN
    UPDATE tasks SET version = OLD.version + 1 WHERE task_id = OLD.task_id;
END;
