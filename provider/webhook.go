package provider

import (
	"errors"
	"net/http"
	"net/url"
)

// WebhookKeyParam is the query parameter that adapters add to the webhook
// URL they hand a provider, carrying the request's IdempotencyKey
// (darkroom's generation id). It lets the runner tie a delivery to a
// generation even when the submit reply was lost.
const WebhookKeyParam = "darkroom_key"

// WebhookEvent is what one webhook delivery says, after verification.
//
// A webhook is a hint, not a record: the runner should act on it by
// stepping the generation now (re-reading Status unless Status is set
// here and Trusted).
type WebhookEvent struct {
	// DeliveryID identifies the delivery (Replicate: webhook-id; fal:
	// request_id), for logs.
	DeliveryID string
	// Duplicate is set when this delivery was seen before (a retry or a
	// replay): answer 2xx and do nothing else.
	Duplicate bool
	// JobID is the provider's job id (Job.ID).
	JobID string
	// Key is the IdempotencyKey carried in the webhook URL (see
	// WebhookKeyParam), "" when absent. It is only as trustworthy as the
	// delivery: for unsigned providers (fal) anyone who knows a
	// generation id could send it, so use it to find the generation, never
	// to decide its outcome.
	Key string
	// Job is a complete handle for the job when the adapter can rebuild
	// one from the delivery (fal: status/response/cancel URLs from the
	// request id). The runner may bind it to a generation whose submit
	// outcome is unknown (see DuplicateRisk), after a Status call confirms
	// the job exists.
	Job *Job
	// Status is the job's state as the delivery states it; set only when
	// Trusted.
	Status *Status
	// Trusted reports that the delivery was authenticated (Replicate's
	// Standard Webhooks signature), so Status may be applied without
	// another Status call. Untrusted deliveries (fal) only say which job
	// to look at.
	Trusted bool
}

// WebhookParser is implemented by providers that accept webhooks. The
// server mounts one route per provider (/webhooks/replicate,
// /webhooks/fal), reads the body with a size limit (1 MiB is plenty) and
// calls ParseWebhook:
//
//   - ErrWebhookUnauthenticated (bad or missing signature, stale
//     timestamp): answer 401, change nothing.
//   - any other error (malformed body): answer 400.
//   - Duplicate: answer 200, do nothing.
//   - otherwise: answer 200 at once (providers retry slow receivers), then
//     wake the generation for Key (or the one holding JobID).
type WebhookParser interface {
	ParseWebhook(header http.Header, query url.Values, body []byte) (WebhookEvent, error)
}

// ErrWebhookUnauthenticated is returned by ParseWebhook when a delivery's
// signature does not verify or its timestamp is outside the tolerance.
var ErrWebhookUnauthenticated = errors.New("provider: webhook signature does not verify")
