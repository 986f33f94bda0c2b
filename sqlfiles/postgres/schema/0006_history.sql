-- The history retention deletes ended generations after a period
-- (GenerationsToPurge) and the webhook deliveries that can dedupe
-- nothing any more (PurgeDeliveries): both look rows up by age.
CREATE INDEX generations_history ON generations (updated_at)
    WHERE status IN ('completed', 'failed', 'cancelled');
CREATE INDEX webhook_deliveries_received ON webhook_deliveries (received_at);
