package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/compat"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// class names the bucket a request draws from ("" for none): tasks/get
// polls; a tool call draws what its definition says (compat.RateClass).
func class(env *tasks.Envelope, toolClass func(string) string) string {
	switch env.Method {
	case "tasks/get":
		return compat.ClassPoll
	case "tools/call":
		return toolClass(env.Name)
	}
	return ""
}

// rateLimit charges each poll and each creation to its caller's bucket
// (per-caller overrides from the key file apply) and answers 429 with
// Retry-After and a JSON-RPC error carrying retryAfterMs when it is empty.
// A wait_generation is one call however long it waits.
func rateLimit(c *limit.Classes, maxBody int64, toolClass func(string) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		env, r, err := tasks.Peek(w, r, maxBody)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		p, _ := auth.FromContext(r.Context())
		key := Owner(r.Context())
		var ok bool
		var wait time.Duration
		switch class(env, toolClass) {
		case compat.ClassPoll:
			ok, wait = c.Poll.AllowFor(key, p.Limits.PollRate, p.Limits.PollBurst)
		case compat.ClassCreate:
			ok, wait = c.Create.AllowFor(key, p.Limits.CreateRate, p.Limits.CreateBurst)
		default:
			ok = true
		}
		if !ok {
			limit.WriteHTTP(w, requestID(env, r, maxBody), wait)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requestID finds the JSON-RPC id for an error reply, reading the body
// only on this (rejecting) path.
func requestID(env *tasks.Envelope, r *http.Request, maxBody int64) json.RawMessage {
	if env.Req != nil {
		return env.Req.ID
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(b, &m)
	return m.ID
}

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
