-- The latest preview frame of a running generation (issue 40: ComfyUI's
-- websocket previews; issue 39: OpenAI's partial images), so that every
-- replica shows it, not only the lease holder's process that received it.
-- A table of its own rather than a column of generations: a frame written
-- every second must not bump generations.version (the read caches would
-- drop the row each time) nor be announced as a generation change, and a
-- row here is written in place, never appended. Not the blob store: the
-- write is conditional on the generation still running, in one statement,
-- and the terminal transition deletes it in its own transaction.
-- At most one row a generation, a JPEG of at most 64 KB (package preview).
CREATE TABLE live_previews (
    generation_id TEXT PRIMARY KEY REFERENCES generations (id) ON DELETE CASCADE,
    jpeg          BYTEA NOT NULL,
    frames        BIGINT NOT NULL, -- how many frames the provider sent so far
    updated_at    BIGINT NOT NULL  -- unix ms
);
