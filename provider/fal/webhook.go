package fal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/darkroom-mcp/darkroom/provider"
)

// webhookBody is fal's webhook delivery; field names beyond request_id
// and status are partly UNCONFIRMED, and nothing in it is trusted.
type webhookBody struct {
	RequestID        string `json:"request_id"`
	GatewayRequestID string `json:"gateway_request_id"`
	Status           string `json:"status"` // OK | ERROR
}

// ParseWebhook implements provider.WebhookParser. fal deliveries are not
// authenticated here, so the event is never Trusted: it names the job
// (request_id, plus the key and model we put in the webhook URL, from
// which Job is rebuilt) and the runner must call Status to learn its
// state. Deliveries are deduplicated on request_id (fal retries up to 10
// times over 2 hours).
func (p *Provider) ParseWebhook(h http.Header, q url.Values, body []byte) (provider.WebhookEvent, error) {
	var b webhookBody
	if err := json.Unmarshal(body, &b); err != nil || b.RequestID == "" {
		return provider.WebhookEvent{}, fmt.Errorf("fal: webhook body lacks request_id")
	}
	ev := provider.WebhookEvent{DeliveryID: b.RequestID, JobID: b.RequestID, Key: q.Get(provider.WebhookKeyParam)}
	if p.hooks.Add(b.RequestID) {
		ev.Duplicate = true
		return ev, nil
	}
	if model := q.Get(ModelParam); model != "" {
		if job, err := p.JobFor(model, b.RequestID); err == nil {
			ev.Job = &job
		}
	}
	return ev, nil
}
