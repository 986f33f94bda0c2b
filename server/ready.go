package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/darkroom-mcp/darkroom/server/limit"
)

// Check is one condition of readiness: Probe answers nil when it holds.
type Check struct {
	Name  string
	Probe func(ctx context.Context) error
	// Advisory checks are reported (and logged) but do not make the
	// server unavailable: a vendor every replica shares being down is no
	// reason to take this one out of rotation.
	Advisory bool
}

// NotReady is a probe's failure with the category /readyz names for it.
type NotReady struct {
	Category string
	Err      error
}

func (e *NotReady) Error() string { return e.Err.Error() }
func (e *NotReady) Unwrap() error { return e.Err }

// category names what is wrong in words that carry no path, host, DSN or
// error text (those are for the log): /readyz is outside authentication.
func category(err error) string {
	var nr *NotReady
	var ne net.Error
	switch {
	case errors.As(err, &nr):
		return nr.Category
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, fs.ErrNotExist):
		return "missing"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENOSPC):
		return "not writable"
	case errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF):
		return "unreachable"
	}
	return "failing"
}

// Readiness answers /readyz: 200 when every check passes within timeout,
// else 503; the JSON body names each check and, for a failing one, its
// category ({"checks":{"blobs":"unreachable",...}}). The error itself goes
// to log, at warn when a check starts failing or changes category, at
// info when it passes again, at debug while it stays as it was.
func Readiness(log *slog.Logger, timeout time.Duration, checks ...Check) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var lastMu sync.Mutex
	last := map[string]string{} // check name → its last answer
	report := func(ctx context.Context, name, answer string, err error) {
		lastMu.Lock()
		was, seen := last[name]
		last[name] = answer
		lastMu.Unlock()
		switch {
		case err == nil && seen && was != "ok":
			log.Info("readiness check passes again", "check", name)
		case err != nil && was != answer:
			log.Warn("readiness check failing", "check", name, "category", answer, "err", err)
		case err != nil:
			log.Log(ctx, slog.LevelDebug, "readiness check failing", "check", name, "category", answer, "err", err)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		res := make(map[string]string, len(checks))
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range checks {
			wg.Go(func() {
				msg := "ok"
				err := c.Probe(ctx)
				if err != nil {
					msg = category(err)
				}
				report(ctx, c.Name, msg, err)
				mu.Lock()
				res[c.Name] = msg
				mu.Unlock()
			})
		}
		wg.Wait()
		body := struct {
			Status string            `json:"status"`
			Checks map[string]string `json:"checks"`
		}{"ready", res}
		code := http.StatusOK
		for _, c := range checks {
			if res[c.Name] != "ok" && !c.Advisory {
				body.Status, code = "unavailable", http.StatusServiceUnavailable
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}

// MetricsOnly serves /metrics behind /mcp's Host check (a DNS-rebinding
// page cannot read it from a loopback listener) and, with token set, only
// to requests bearing it (compared in constant time); others get 401,
// each failure drawn from the same per-address guess budget as a failed
// token on /mcp (limits.PreAuth; nil: none), 429 once it is spent. An
// empty token serves everyone the Host check lets through.
func MetricsOnly(token string, limits *limit.Classes, proxies limit.TrustedProxies, next http.Handler) http.Handler {
	throttle := func(http.ResponseWriter, *http.Request) bool { return false }
	if limits != nil {
		throttle = guessThrottle(limits.PreAuth, proxies)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refusedHost(w, r) {
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if token != "" && (!ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1) {
			if !throttle(w, r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="darkroom metrics"`)
				http.Error(w, "metrics need their bearer token (DARKROOM_METRICS_TOKEN)", http.StatusUnauthorized)
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}
