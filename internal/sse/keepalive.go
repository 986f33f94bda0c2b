// Package sse keeps idle server-sent-event responses alive through
// proxies that cut a connection after a quiet spell: a handler that is
// about to hold a response open (a wait) calls Hold, and while it holds,
// the response writer KeepAlive put in front of go-sdk's streamable
// handler writes an SSE comment every interval, once the response is an
// event stream.
//
// go-sdk (v1.8.0, streamable.go servePOST) sets Content-Type
// text/event-stream on a POST's response, then hands the calls to the
// session and parks in hangResponse; it writes the headers only with its
// first event (writeEvent: one Write, then a Flush), from the session's
// goroutine. So a wait without progress writes nothing for up to 55 s.
// Hold is called from the tool handler, after servePOST set the headers
// (the calls reach the handler through a channel), and returns before
// the handler's result is written: between the two, only KeepAlive's
// own ticks and go-sdk's progress events touch the response, and both go
// through one mutex. A comment forces the headers out (200); should
// go-sdk then answer with a protocol-level error status of its own
// (WriteHeader with another status, raw JSON body), the body is framed
// as one SSE message instead, since the stream has begun.
package sse

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Comment is the keep-alive line, as listen streams send it.
const Comment = ":\r\n\r\n"

type holdKey struct{}

// Hold starts the keep-alive of the response ctx's request is written to,
// if it has one (HTTP through KeepAlive); release stops it. Safe to call
// on any context: without one it does nothing.
func Hold(ctx context.Context) (release func()) {
	w, _ := ctx.Value(holdKey{}).(*writer)
	if w == nil {
		return func() {}
	}
	return w.hold()
}

// KeepAlive wraps next (go-sdk's streamable handler) so that Hold works
// on its requests' contexts, with a comment every interval (none if
// interval <= 0).
func KeepAlive(interval time.Duration, next http.Handler) http.Handler {
	if interval <= 0 {
		return next
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &writer{rw: rw, every: interval}
		defer w.finish()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), holdKey{}, w)))
	})
}

// writer serializes every write of the response with the keep-alive's.
type writer struct {
	rw    http.ResponseWriter
	every time.Duration

	mu      sync.Mutex
	wrote   bool // headers written
	forced  bool // by a comment, not by the handler
	reframe bool // a later non-200 status: its body goes out as an SSE message
	done    bool // the handler returned: nothing more may be written
	holds   int
	stop    chan struct{} // closes the running ticker (nil: none)
	ticker  sync.WaitGroup
}

func (w *writer) Header() http.Header { return w.rw.Header() }

func (w *writer) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wrote {
		if w.forced && code != http.StatusOK {
			w.reframe = true
		}
		return
	}
	w.wrote = true
	w.rw.WriteHeader(code)
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wrote = true
	if w.reframe {
		if _, err := io.WriteString(w.rw, "event: message\ndata: "); err != nil {
			return 0, err
		}
		n, err := w.rw.Write(p)
		if err == nil {
			_, err = io.WriteString(w.rw, "\n\n")
		}
		return n, err
	}
	return w.rw.Write(p)
}

func (w *writer) Flush() { _ = w.FlushError() }

func (w *writer) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wrote = true
	return http.NewResponseController(w.rw).Flush()
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (w *writer) Unwrap() http.ResponseWriter { return w.rw }

func (w *writer) hold() func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return func() {}
	}
	w.holds++
	if w.stop == nil {
		w.stop = make(chan struct{})
		w.ticker.Add(1)
		go w.tick(w.stop)
	}
	var once sync.Once
	return func() { once.Do(w.unhold) }
}

func (w *writer) unhold() {
	w.mu.Lock()
	w.holds--
	stop := w.stop
	if w.holds > 0 || stop == nil {
		w.mu.Unlock()
		return
	}
	w.stop = nil
	close(stop)
	w.mu.Unlock()
	w.ticker.Wait() // no tick after release: go-sdk writes the result next
}

func (w *writer) tick(stop chan struct{}) {
	defer w.ticker.Done()
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if !w.comment(stop) {
				return
			}
		}
	}
}

// comment writes one keep-alive comment, unless the response is not an
// event stream (a JSON answer gets none); false ends the ticker.
func (w *writer) comment(stop chan struct{}) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-stop:
		return false
	default:
	}
	if w.done {
		return false
	}
	if !strings.HasPrefix(w.rw.Header().Get("Content-Type"), "text/event-stream") {
		return true // not (yet) a stream
	}
	if !w.wrote {
		w.wrote, w.forced = true, true
		w.rw.WriteHeader(http.StatusOK)
	}
	if _, err := io.WriteString(w.rw, Comment); err != nil {
		return false
	}
	return http.NewResponseController(w.rw).Flush() == nil
}

// finish runs when the handler returns: the ticker, if any, is stopped
// and waited for.
func (w *writer) finish() {
	w.mu.Lock()
	w.done = true
	stop := w.stop
	w.stop = nil
	if stop != nil {
		close(stop)
	}
	w.mu.Unlock()
	w.ticker.Wait()
}
