package provider

import (
	"context"
	"errors"
	"net/http"
	"net/url"
)

// WebhookKeyParam is the query parameter that adapters add to the webhook
// URL they hand a provider, carrying the request's IdempotencyKey
// (darkroom's generation id). A query parameter is not covered by any
// provider's signature, so it is never trusted by itself: see
// WebhookEvent.Key for when an adapter may pass it on.
const WebhookKeyParam = "darkroom_key"

// WebhookEvent is what one verified webhook delivery says.
//
// Binding rule: a delivery changes only the generation that already holds
// the job the delivery's signed content names (JobID), or, when Key is
// set, the generation Key names while its submit's outcome is unknown
// (it has no job yet), after a Status call confirms the job. Nothing
// taken from the URL binds on its own.
type WebhookEvent struct {
	// DeliveryID identifies the delivery (Replicate: webhook-id; fal:
	// request_id), for deduplication and logs.
	DeliveryID string `json:"DeliveryID"`
	// Duplicate is set when this verified delivery was seen before (a
	// retry or a replay): answer 2xx and do nothing else.
	Duplicate bool `json:"Duplicate,omitempty"`
	// JobID is the provider's job id (Job.ID), from the signed content
	// when Trusted. On an event returned with ErrWebhookUnverifiable it is
	// only a claim, good for nothing but waking the generation that
	// already holds that job so it re-reads it.
	JobID string `json:"JobID"`
	// Key is the generation id the delivery may be bound to when no
	// generation holds JobID yet (a submit whose reply was lost). Adapters
	// set it only on a Trusted event and only when the signed content ties
	// the job to darkroom's own account (fal: the signed user id); never
	// from an unverified delivery.
	Key string `json:"Key,omitempty"`
	// Status is the job's state as the signed delivery states it; nil when
	// the adapter does not read it (the runner then calls Status).
	Status *Status `json:"Status,omitempty"`
	// Trusted reports that the delivery's signature verified. Only
	// trusted events are stored, deduplicated or bound.
	Trusted bool `json:"Trusted"`
}

// WebhookParser is implemented by providers that accept webhooks. The
// server mounts one route per provider (/webhooks/replicate,
// /webhooks/fal), reads the body with a size limit (1 MiB is plenty) and
// calls ParseWebhook:
//
//   - ErrWebhookUnauthenticated (bad or missing signature, stale
//     timestamp): answer 401, change nothing.
//   - ErrWebhookUnverifiable (the keys to check it cannot be had now):
//     answer 503 so the provider retries; at most wake the generation
//     that already holds the claimed JobID so it re-reads its job.
//   - any other error (malformed body): answer 400.
//   - Duplicate: answer 200, do nothing.
//   - otherwise: store the event durably, answer 200, wake the generation
//     it binds to (see WebhookEvent).
//
// Deduplication happens only after verification, so an unverified
// delivery can never make a genuine one look like a replay.
type WebhookParser interface {
	ParseWebhook(ctx context.Context, header http.Header, query url.Values, body []byte) (WebhookEvent, error)
}

// WebhookForgetter is implemented by parsers that remember verified
// deliveries to answer replays: a delivery that could not be stored is
// forgotten, so the provider's retry of it is taken, not dropped as a
// duplicate.
type WebhookForgetter interface {
	ForgetWebhook(deliveryID string)
}

// JobRebuilder is implemented by providers that can build a complete job
// handle from a job id and the model it was submitted for (fal: the queue
// URLs of the request). The runner uses it to bind the job a trusted
// delivery names to the generation whose submit reply was lost; the model
// is the generation's own, never one a delivery names.
type JobRebuilder interface {
	RebuildJob(model Model, jobID string) (Job, error)
}

// ErrWebhookUnauthenticated is returned by ParseWebhook when a delivery's
// signature does not verify or its timestamp is outside the tolerance.
var ErrWebhookUnauthenticated = errors.New("provider: webhook signature does not verify")

// ErrWebhookUnverifiable is returned by ParseWebhook when a delivery
// cannot be checked now (no signing secret, or the provider's public keys
// cannot be fetched). It is not a verdict on the delivery: the provider
// should retry it later.
var ErrWebhookUnverifiable = errors.New("provider: webhook cannot be verified now")
