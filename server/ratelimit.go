package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/limit"
)

// PollInterval raises a task's suggested poll interval to what the
// caller's poll budget sustains, so a client that honours it never meets
// a 429.
func PollInterval(c *limit.Classes) func(ctx context.Context, owner string, base time.Duration) time.Duration {
	return func(ctx context.Context, owner string, base time.Duration) time.Duration {
		p, _ := auth.FromContext(ctx)
		rate, _ := c.Poll.Effective(p.Limits.PollRate, p.Limits.PollBurst)
		return limit.SuggestPollInterval(rate, base)
	}
}

// guessGuard throttles failed authentication per client IP: only
// requests answered 401 draw from the IP's bucket, so a caller with a
// valid key is never slowed by its neighbours on the same address, while
// token guessing is.
type guessGuard struct {
	c       limit.Class
	mu      sync.Mutex
	blocked map[string]time.Time
}

func newGuessGuard(c limit.Class) *guessGuard {
	return &guessGuard{c: c, blocked: map[string]time.Time{}}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (g *guessGuard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip := limit.IPKey(limit.ClientIP(r))
		now := time.Now()
		g.mu.Lock()
		until, isBlocked := g.blocked[ip]
		if isBlocked && !now.Before(until) {
			delete(g.blocked, ip)
			isBlocked = false
		}
		g.mu.Unlock()
		if isBlocked {
			limit.WriteHTTP(w, nil, until.Sub(now))
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status != http.StatusUnauthorized {
			return
		}
		if ok, d := g.c.Allow(ip, g.c.Rate, g.c.Burst); !ok {
			g.mu.Lock()
			if len(g.blocked) > 100_000 {
				clear(g.blocked) // bounded: at worst an attacker gets a fresh burst
			}
			g.blocked[ip] = now.Add(d)
			g.mu.Unlock()
		}
	})
}
