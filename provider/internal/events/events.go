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
