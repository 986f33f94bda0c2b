package server

import (
	"context"
	"net/http"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
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

// guessThrottle is auth.MiddlewareOptions.Throttle: it throttles token
// guessing per client address (IPKey of the address proxies give, so a
// forged X-Forwarded-For from anyone but a trusted proxy changes
// nothing). auth.Middleware asks it only after a presented token was
// checked and failed: only failures draw from the address's bucket c, so
// a caller with a valid key is never refused or delayed by a guesser on
// its address, while the guesser's failures beyond the bucket are
// answered 429 with Retry-After (and true returned). (A valid guess is
// served like any valid key: the guard rations failures, the secret's
// length is what makes guessing hopeless.)
func guessThrottle(c limit.Class, proxies limit.TrustedProxies) func(http.ResponseWriter, *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		ok, d := c.Allow(limit.IPKey(proxies.ClientIP(r)), c.Rate, c.Burst)
		if !ok {
			limitedAs(w, "preauth")
			ratelimited.WriteHTTP(w, nil, d)
		}
		return !ok
	}
}
