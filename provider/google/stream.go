package google

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	ia "google.golang.org/genai/interactions/models/interactions"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/internal/events"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
)

// The Interactions API streams an interaction's events, as go-genai
// v1.79.1 (2026-11-18) reads them:
//
//   - GET /v1beta/interactions/{id}?stream=true (interactions.go
//     Interactions.Get; models/operations/getinteractionbyid.go
//     GetInteractionByIDRequest.Stream, "If true, streams the interaction
//     events as Server-Sent Events", and LastEventID, which resumes after
//     an event) answers text/event-stream;
//   - each event's data is one InteractionSSEEvent
//     (models/interactions/interactionsseevent.go), told apart by
//     event_type: interaction.created, interaction.status_update (with
//     the status), step.start, step.delta, step.stop, interaction.completed
//     and error; interaction.completed's interaction "may omit fields that
//     are only available on full non-streaming Interaction responses"
//     (interactionsseeventinteraction.go);
//   - the stream ends with "data: [DONE]" (the sentinel Interactions.Get
//     passes to stream.NewEventStream), which is no event: ignored here;
//   - nothing in the SDK restricts the stream to interactions created
//     with stream=true: a background one (darkroom's) is read the same way
//     (the SDK's own continuation leaves background=true out only because
//     the server continues it, continuation.go).
//
// So an Omni interaction is watched, not polled: its stream is held until
// interaction.completed or a status that ends it, then one ordinary get
// reads the video (the lifecycle payload may lack it). A stream is
// started afresh, never resumed: only its end matters here. The SDK says
// nothing of keep-alives; a stream silent for StreamStall is cut and the
// interaction polled (the runner's fallback).

// DefaultStreamStall is how long an interaction stream may send nothing
// before it is dropped (assumed: Google documents no keep-alive).
const DefaultStreamStall = time.Minute

// Signal implements provider.Signaller: a Gemini image call answers with
// the image; a Gemini Omni interaction (background) streams its events;
// a Veo operation is polled (go-genai's Operations.GetVideosOperation
// offers nothing else).
func (p *Provider) Signal(m provider.Model, _ bool) provider.Signal {
	e, _ := p.models.Get(m.ID)
	switch e.API {
	case "gemini":
		return provider.SignalSynchronous
	case "interactions":
		return provider.SignalStream
	}
	return provider.SignalPoll
}

// Watch implements provider.Watcher for an interaction (any other job is
// looked at once, as Status does).
func (p *Provider) Watch(ctx context.Context, job provider.Job, progress func(provider.Status)) (provider.Status, error) {
	d, err := p.data(job)
	if err != nil || d.Interaction == "" {
		return p.Status(ctx, job)
	}
	open := func(ctx context.Context) (io.ReadCloser, error) {
		url := p.base + interactionsPath + "/" + d.Interaction + "?stream=true"
		return events.Open(ctx, p.stream, "google", url, func(r *httpx.Response) error { return statusErr(p.http, r) })
	}
	st, err := events.Watch(ctx, "google", p.cfg.StreamStall, p.cfg.StreamFor, open, func(_ context.Context, data []byte) (provider.Status, bool, error) {
		var ev ia.InteractionSSEEvent
		if json.Unmarshal(data, &ev) != nil {
			return provider.Status{}, false, nil // not an event the SDK knows: not ours to read
		}
		var status ia.InteractionStatus
		switch {
		case ev.InteractionCompletedEvent != nil:
			status = ia.InteractionStatusCompleted // whatever its payload holds, it ended
		case ev.ErrorEvent != nil:
			return provider.Status{}, false, fmt.Errorf("google: %w: an error event", provider.ErrStreamEnded)
		case ev.InteractionStatusUpdate != nil:
			status = ia.InteractionStatus(ev.InteractionStatusUpdate.Status)
		case ev.InteractionCreatedEvent != nil:
			status = ia.InteractionStatus(ev.InteractionCreatedEvent.Interaction.Status)
		default:
			return provider.Status{}, false, nil // steps: the video is read once it ends
		}
		return interactionState(&ia.Interaction{Status: status}), true, nil
	}, progress)
	if err != nil {
		return st, err
	}
	// Ended: the lifecycle payloads may lack the outputs, a get has them.
	return p.Status(ctx, job)
}
