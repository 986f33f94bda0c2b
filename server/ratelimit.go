package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
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

// guessGuard throttles token guessing per client address (IPKey of the
// address proxies give, so a forged X-Forwarded-For from anyone but a
// trusted proxy changes nothing). auth.Middleware asks it only after a
// presented token was checked and failed: the credential is checked
// first and only failures draw from the address's bucket, so a caller
// with a valid key is never refused or delayed by a guesser on its
// address, while the guesser's failures beyond the bucket are answered
// 429 with Retry-After. (A valid guess is served like any valid key:
// the guard rations failures, the secret's length is what makes guessing
// hopeless.)
type guessGuard struct {
	c       limit.Class
	proxies limit.TrustedProxies
}

func newGuessGuard(c limit.Class, proxies limit.TrustedProxies) guessGuard {
	return guessGuard{c: c, proxies: proxies}
}

// throttle is auth.MiddlewareOptions.Throttle: one failure drawn from the
// client's bucket; when empty, the 429 is written and true returned.
func (g guessGuard) throttle(w http.ResponseWriter, r *http.Request) bool {
	ok, d := g.c.Allow(limit.IPKey(g.proxies.ClientIP(r)), g.c.Rate, g.c.Burst)
	if ok {
		return false
	}
	limit.WriteHTTP(w, nil, d)
	return true
}
