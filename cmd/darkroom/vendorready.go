package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/server"
)

// vendorPingTTL is how long a vendor's answer stands: /readyz is probed
// every few seconds, and each probe should not cost a vendor request.
const vendorPingTTL = 15 * time.Second

// vendorChecks are the advisory readiness checks of the providers that
// can be pinged (google, openai): /readyz names a vendor that is down or
// refuses our key, and stays 200 for it.
func (a *app) vendorChecks() []server.Check {
	var out []server.Check
	for _, p := range a.providers {
		if pg, ok := provider.As[provider.Pinger](p); ok {
			c := &pingCache{ping: pg.Ping}
			out = append(out, server.Check{Name: "provider:" + p.Name(), Advisory: true, Probe: c.probe})
		}
	}
	return out
}

type pingCache struct {
	ping func(context.Context) error
	mu   sync.Mutex
	at   time.Time
	err  error
}

func (c *pingCache) probe(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) > vendorPingTTL {
		c.err, c.at = c.ping(ctx), time.Now()
	}
	var perm *provider.PermanentError
	switch {
	case c.err == nil:
		return nil
	case errors.As(c.err, &perm):
		return &server.NotReady{Category: "credentials refused", Err: c.err}
	default:
		return &server.NotReady{Category: "unreachable", Err: c.err}
	}
}
