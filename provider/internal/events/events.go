// Package events reads a vendor's server-sent events (the WHATWG
// EventSource format): fal's status stream, the Gemini Interactions
// API's interaction stream.
package events

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
)

// Each reads events from r until fn stops it or r ends. line runs at
// every line read, comments (keep-alives) included, so a caller can time
// the stream's silences; fn gets each event's data (its data lines
// joined by "\n"; events without data are skipped) and says whether to
// stop. stopped tells whether fn stopped it; err is fn's error then, else
// the reader's (nil: r ended cleanly).
func Each(r io.Reader, line func(), fn func(data []byte) (stop bool, err error)) (stopped bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), httpx.MaxBody)
	var data strings.Builder
	for sc.Scan() {
		line()
		l := sc.Text()
		if v, ok := strings.CutPrefix(l, "data:"); ok {
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(v, " "))
			continue
		}
		if l != "" || data.Len() == 0 {
			continue // another field, a comment (a keep-alive), or nothing yet
		}
		b := []byte(data.String())
		data.Reset()
		if stop, err := fn(b); stop {
			return true, err
		}
	}
	return false, sc.Err()
}

// Open sends GET url through c asking for server-sent events and
// returns the stream's body. A reply that is not 2xx is refused's error
// for it (or one naming its status); one that is not text/event-stream is
// an error.
func Open(ctx context.Context, c *httpx.Client, name, url string, refused func(*httpx.Response) error) (io.ReadCloser, error) {
	hdr := http.Header{}
	hdr.Set("Accept", "text/event-stream")
	resp, r, err := c.Open(ctx, httpx.Other, http.MethodGet, url, nil, "", hdr)
	if err != nil {
		return nil, err
	}
	if r != nil {
		if err := refused(r); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: event stream answered %d", name, r.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: event stream answered %q, not server-sent events", name, ct)
	}
	return resp.Body, nil
}

// Client is c without its whole-request timeout (a stream lives as long
// as its request; Hold bounds it); nil: the default transport.
func Client(c *http.Client) *http.Client {
	if c == nil {
		return &http.Client{}
	}
	cc := *c
	cc.Timeout = 0
	return &cc
}

// Hold holds one stream: open opens it (on a context that ends with ctx,
// after max, or once the stream has sent nothing for stall, the opening
// included) and fn reads each event's data, with the stall timer paused
// while fn runs (fn may make requests of its own, bounded as any other).
// It returns nil when fn stopped the stream with no error, fn's error
// when it stopped with one, and otherwise why the stream ended first:
// provider.ErrStreamStalled (wrapped with name), ctx's error, or
// provider.ErrStreamEnded.
func Hold(ctx context.Context, name string, stall, max time.Duration, open func(context.Context) (io.ReadCloser, error), fn func(ctx context.Context, data []byte) (stop bool, err error)) error {
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	// Cancelling the context ends the wait for headers or the read.
	var stalled atomic.Bool
	timer := time.AfterFunc(stall, func() { stalled.Store(true); cancel() })
	defer timer.Stop()
	ended := func(err error) error {
		switch {
		case stalled.Load() && outer.Err() == nil:
			return fmt.Errorf("%s: %w: nothing for %s", name, provider.ErrStreamStalled, stall)
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !errors.Is(err, context.Canceled):
			return fmt.Errorf("%s: %w: %v", name, provider.ErrStreamEnded, err)
		}
		return fmt.Errorf("%s: %w", name, provider.ErrStreamEnded)
	}
	body, err := open(ctx)
	if err != nil {
		if stalled.Load() && outer.Err() == nil {
			return ended(nil)
		}
		return err
	}
	defer body.Close()
	stopped, err := Each(body, func() { timer.Reset(stall) }, func(data []byte) (bool, error) {
		timer.Stop()
		defer timer.Reset(stall)
		return fn(ctx, data)
	})
	if stopped {
		return err
	}
	return ended(err)
}

// Watch holds one stream (Hold) carrying a job's statuses: read maps an
// event's data to the status it carries (ok false: none, skipped); each
// one before the job's end goes to progress (nil: none), and the first
// terminal one ends the watch and is returned. Otherwise it returns the
// last status seen and why the stream ended (Hold's errors, or read's).
func Watch(ctx context.Context, name string, stall, max time.Duration, open func(context.Context) (io.ReadCloser, error),
	read func(ctx context.Context, data []byte) (st provider.Status, ok bool, err error), progress func(provider.Status)) (provider.Status, error) {
	var last, end provider.Status
	err := Hold(ctx, name, stall, max, open, func(ctx context.Context, data []byte) (bool, error) {
		st, ok, err := read(ctx, data)
		switch {
		case err != nil:
			return true, err
		case !ok:
			return false, nil
		case st.State.Terminal():
			end = st
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
	return end, nil
}
