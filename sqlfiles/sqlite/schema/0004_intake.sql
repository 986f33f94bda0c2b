-- Webhook deliveries are stored, after verification and before darkroom
-- answers 2xx, so a crash between intake and the runner's next step loses
-- none. The runner consumes a generation's deliveries in arrival order.
CREATE TABLE webhook_deliveries (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    provider      TEXT    NOT NULL,
    delivery_id   TEXT    NOT NULL,   -- the provider's delivery id (dedup key)
    generation_id TEXT    NOT NULL,
    event         TEXT    NOT NULL,   -- JSON provider.WebhookEvent
    received_at   INTEGER NOT NULL,
    consumed_at   INTEGER             -- NULL until the runner applied it
);

CREATE UNIQUE INDEX webhook_deliveries_dedup ON webhook_deliveries (provider, delivery_id);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (generation_id, seq)
    WHERE consumed_at IS NULL;

-- A digest of the creating arguments: an idempotency key repeated with
-- other arguments is refused ('' on rows from before: not checked).
ALTER TABLE generations ADD COLUMN args_hash TEXT NOT NULL DEFAULT '';
