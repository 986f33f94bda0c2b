package google

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
		hdr := http.Header{}
		hdr.Set("Accept", "text/event-stream")
		resp, r, err := p.stream.Open(ctx, httpx.Other, http.MethodGet, p.base+interactionsPath+"/"+d.Interaction+"?stream=true", nil, "", hdr)
		if err != nil {
			return nil, err
		}
		if r != nil {
			if err := statusErr(p.http, r); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("google: interaction stream answered %d", r.Status)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			resp.Body.Close()
			return nil, fmt.Errorf("google: interaction stream answered %q, not server-sent events", ct)
		}
		return resp.Body, nil
	}
	var last provider.Status
	ended := false
	err = events.Hold(ctx, "google", p.cfg.StreamStall, p.cfg.StreamFor, open, func(_ context.Context, data []byte) (bool, error) {
		var ev ia.InteractionSSEEvent
		if json.Unmarshal(data, &ev) != nil {
			return false, nil // not an event the SDK knows: not ours to read
		}
		var status string
		switch {
		case ev.InteractionCompletedEvent != nil:
			ended = true
			return true, nil
		case ev.ErrorEvent != nil:
			return true, fmt.Errorf("google: %w: an error event", provider.ErrStreamEnded)
		case ev.InteractionStatusUpdate != nil:
			status = string(ev.InteractionStatusUpdate.Status)
		case ev.InteractionCreatedEvent != nil:
			status = string(ev.InteractionCreatedEvent.Interaction.Status)
		default:
			return false, nil // steps: the video is read once it ends
		}
		st := interactionState(&ia.Interaction{Status: ia.InteractionStatus(status)})
		if st.State.Terminal() {
			ended = true
			return true, nil
		}
		last = st
		if progress != nil {
			progress(st)
		}
		return false, nil
	})
	if err != nil {
		return last, err
	}
	if !ended {
		return last, fmt.Errorf("google: %w", provider.ErrStreamEnded)
	}
	return p.Status(ctx, job)
}
