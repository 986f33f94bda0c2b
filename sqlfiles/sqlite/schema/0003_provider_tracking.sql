-- What adaptive polling and webhooks need: when the job was handed to the
-- provider, and the provider's job id to find a generation from a webhook.
ALTER TABLE generations ADD COLUMN submitted_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE generations ADD COLUMN provider_job_id TEXT NOT NULL DEFAULT '';
CREATE INDEX generations_provider_job ON generations (provider, provider_job_id)
    WHERE provider_job_id != '';
