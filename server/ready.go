package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/server/limit"
)

// Check is one condition of readiness: Probe answers nil when it holds.
type Check struct {
	Name  string
	Probe func(ctx context.Context) error
}

// Readiness answers /readyz: 200 when every check passes within timeout,
// else 503; the JSON body names each check and what is wrong.
func Readiness(timeout time.Duration, checks ...Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		res := make(map[string]string, len(checks))
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range checks {
			wg.Go(func() {
				msg := "ok"
				if err := c.Probe(ctx); err != nil {
					msg = err.Error()
				}
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
		for _, v := range res {
			if v != "ok" {
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
	if token == "" {
		return checkHost(next)
	}
	var throttle func(http.ResponseWriter, *http.Request) bool
	if limits != nil {
		throttle = newGuessGuard(limits.PreAuth, proxies).throttle
	}
	return checkHost(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			if throttle != nil && throttle(w, r) {
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="darkroom metrics"`)
			http.Error(w, "metrics need their bearer token (DARKROOM_METRICS_TOKEN)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	}))
}
