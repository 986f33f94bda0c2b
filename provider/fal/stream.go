package fal

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/internal/events"
)

// fal's status stream, as fal-js reads it (fal-ai/fal-js 381105e,
// 2026-08-02: libs/client/src/queue.ts streamStatus, streaming.ts
// FalStream):
//
//   - GET {queue}/{owner}/{alias}/requests/{id}/status/stream?logs=1 with
//     Accept: text/event-stream and the key;
//   - a 2xx text/event-stream whose events' data are the status objects
//     the status endpoint answers (IN_QUEUE with queue_position,
//     IN_PROGRESS with logs, COMPLETED), the stream ending after the
//     COMPLETED one (FalStream emits "done" with the last data);
//   - fal-js gives up on a stream after 15 s without a chunk
//     (EVENT_STREAM_TIMEOUT: "The maximum time interval in milliseconds
//     between stream chunks. Defaults to 15s"). fal documents no
//     keep-alive; a stream that sends nothing for StreamStall is dropped
//     here and the request polled.
//
// fal-js still defaults to polling ("Streaming is currently experimental
// and once stable, it will be the default mode"), so every failure of the
// stream, from its opening to its last event, ends in a poll at once: the
// request is never lost or made twice by it.

// DefaultStreamStall is how long a status stream may stay silent before
// it is dropped: fal-js's EVENT_STREAM_TIMEOUT.
const DefaultStreamStall = 15 * time.Second

// Signal implements provider.Signaller: fal's webhook where darkroom can
// be called back, else the status stream.
func (p *Provider) Signal(m provider.Model, webhook bool) provider.Signal {
	if webhook {
		return provider.SignalWebhook
	}
	return provider.SignalStream
}

// streamURL is the request's status stream: its status URL's path and
// "/stream".
func streamURL(statusURL string) string {
	u, err := url.Parse(statusURL)
	if err != nil {
		return statusURL + "/stream"
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/stream"
	u.RawPath = ""
	q := u.Query()
	q.Set("logs", "1")
	u.RawQuery = q.Encode()
	return u.String()
}

// Watch implements provider.Watcher: it holds the request's status
// stream until COMPLETED, then reads the result as Status does. Each
// status before that goes to progress.
func (p *Provider) Watch(ctx context.Context, job provider.Job, progress func(provider.Status)) (provider.Status, error) {
	d, e, err := p.data(ctx, job)
	if err != nil {
		return provider.Status{}, err
	}
	open := func(ctx context.Context) (io.ReadCloser, error) {
		return events.Open(ctx, p.stream, "fal", streamURL(d.StatusURL), p.http.Err)
	}
	st, err := events.Watch(ctx, "fal", p.cfg.StreamStall, p.cfg.StreamFor, open, func(ctx context.Context, data []byte) (provider.Status, bool, error) {
		var ev statusReply
		if json.Unmarshal(data, &ev) != nil || ev.Status == "" {
			return provider.Status{}, false, nil // not a status: not ours to read
		}
		st, err := p.fromReply(ctx, d, e, ev)
		return st, true, err
	}, progress)
	if err == nil {
		p.release(d.RequestID) // ended
	}
	return st, err
}
