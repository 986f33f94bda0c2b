package server

import (
	"net/http"
	"time"
)

// Timeouts bound how long a connection may hold the server without
// progress, authenticated or not.
type Timeouts struct {
	// ReadHeader bounds the request line and headers.
	ReadHeader time.Duration
	// Read bounds a request body, counted from the end of the headers;
	// once the body is read the connection has no read deadline, so a
	// long response (SSE) is not cut.
	Read time.Duration
	// Write bounds each write of a response: a stream lives as long as its
	// writes progress (listen streams send keep-alives), and a client that
	// stops reading is dropped this long after the write it blocked.
	Write time.Duration
	// Idle bounds a keep-alive connection between requests.
	Idle time.Duration
}

// Default timeouts.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
)

// HTTPServer returns the http.Server that serves h with t: net/http's own
// header and idle timeouts, and per-request body-read and per-write
// deadlines set through http.ResponseController (http.Server's
// ReadTimeout and WriteTimeout would end long SSE responses).
func HTTPServer(h http.Handler, t Timeouts) *http.Server {
	return &http.Server{
		Handler:           deadlines(h, t),
		ReadHeaderTimeout: t.ReadHeader,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    64 << 10,
	}
}

func deadlines(next http.Handler, t Timeouts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// A request without a body already has net/http's background read
		// running: a deadline now would cancel its context. With a body,
		// net/http clears the deadline when the body is read to its end
		// (to start that background read); until then, and while it
		// discards an unread body after the handler, it bounds the reads.
		if t.Read > 0 && r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(t.Read))
		}
		if t.Write > 0 {
			dw := &deadlineWriter{ResponseWriter: w, rc: rc, d: t.Write}
			w = dw
			defer dw.extend() // net/http flushes what is buffered after the handler returns
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineWriter moves the write deadline to d from now before a write
// whenever less than 7/8 of d is left.
type deadlineWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	d    time.Duration
	last time.Time
}

func (w *deadlineWriter) extend() {
	if now := time.Now(); now.Sub(w.last) >= w.d/8 {
		w.last = now
		_ = w.rc.SetWriteDeadline(now.Add(w.d))
	}
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() { _ = w.FlushError() }

func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
