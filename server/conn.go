package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
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
		cw := &connWriter{ResponseWriter: w, rc: rc, d: t.Write}
		// A request without a body already has net/http's background read
		// running: a deadline now would cancel its context. With a body,
		// net/http clears the deadline when the body is read to its end
		// (to start that background read); until then it bounds the reads.
		if r.Body != nil && r.Body != http.NoBody {
			if t.Read > 0 {
				_ = rc.SetReadDeadline(time.Now().Add(t.Read))
			}
			cw.body = &bodyWatch{ReadCloser: r.Body, left: r.ContentLength}
			r.Body = cw.body
			// Answered with its body unread (refused before it was needed:
			// 401, 429, 413, /healthz): the response closes the connection
			// and the unread rest is never waited for. net/http would
			// otherwise read up to 256 KiB of it after the handler, to reuse
			// the connection, for as long as the read timeout allows.
			defer func() {
				if !cw.body.eof.Load() {
					_ = rc.SetReadDeadline(time.Now())
				}
			}()
		}
		if t.Write > 0 {
			defer cw.extend() // net/http flushes what is buffered after the handler returns
		}
		next.ServeHTTP(cw, r)
	})
}

// bodyWatch notes whether a request body was read to its end.
type bodyWatch struct {
	io.ReadCloser
	left int64 // bytes of the declared length still unread (-1: unknown)
	eof  atomic.Bool
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left >= 0 {
		if b.left -= int64(n); b.left <= 0 {
			b.eof.Store(true)
		}
	}
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// connWriter moves the write deadline to d from now (d > 0) before a
// write whenever less than 7/8 of d is left, and makes a response begun
// before its request body was read to the end close the connection.
type connWriter struct {
	http.ResponseWriter
	rc          *http.ResponseController
	d           time.Duration
	last        time.Time
	body        *bodyWatch // nil without a body
	wroteHeader bool
}

func (w *connWriter) extend() {
	if w.d <= 0 {
		return
	}
	if now := time.Now(); now.Sub(w.last) >= w.d/8 {
		w.last = now
		_ = w.rc.SetWriteDeadline(now.Add(w.d))
	}
}

func (w *connWriter) header() {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	if w.body != nil && !w.body.eof.Load() {
		w.Header().Set("Connection", "close")
	}
}

func (w *connWriter) WriteHeader(code int) {
	w.extend()
	if code >= 200 { // 1xx informational headers are not the response
		w.header()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *connWriter) Write(p []byte) (int, error) {
	w.extend()
	w.header()
	return w.ResponseWriter.Write(p)
}

func (w *connWriter) Flush() { _ = w.FlushError() }

func (w *connWriter) FlushError() error {
	w.extend()
	w.header()
	return w.rc.Flush()
}

func (w *connWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// AcceptErrors wraps a listener so that a failed accept is counted
// (failed, e.g. metrics' AcceptFailed) and said in one clear log line
// (at most one every 10 s, with the count since the last), then handed
// on: net/http retries a temporary one (EMFILE, ENFILE) with backoff up
// to 1 s, so the server goes on serving the connections it holds and
// accepts again once a descriptor is free. Each open connection (a
// listen stream, a held wait) is one descriptor.
func AcceptErrors(ln net.Listener, log *slog.Logger, failed func()) net.Listener {
	return &acceptWatch{Listener: ln, log: log, failed: failed}
}

type acceptWatch struct {
	net.Listener
	log    *slog.Logger
	failed func()
	mu     sync.Mutex
	last   time.Time
	since  int
}

func (l *acceptWatch) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil || errors.Is(err, net.ErrClosed) {
		return c, err
	}
	if l.failed != nil {
		l.failed()
	}
	l.mu.Lock()
	l.since++
	now := time.Now()
	if now.Sub(l.last) >= 10*time.Second {
		n := l.since
		l.last, l.since = now, 0
		l.mu.Unlock()
		msg := "accept failed: new connections wait until it succeeds"
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			msg = "accept failed: out of file descriptors (each open stream or held wait is one); raise the open-files limit (ulimit -n, systemd LimitNOFILE, a container's nofile); new connections wait"
		}
		l.log.Error(msg, "err", err.Error(), "failures", n)
		return nil, err
	}
	l.mu.Unlock()
	return nil, err
}
