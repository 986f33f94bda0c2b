package replicate

import (
	"context"
	"net/http"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// MaxWait is the longest Replicate holds a create under Prefer: wait:
// "Set to `wait=n` where n is a number of seconds between 1 and 60"
// (parameters_prefer_header in Replicate's OpenAPI document, as mirrored
// in tryAGI/Replicate at 6c8ab8e, 2026-04-09); "The request will wait up
// to 60 seconds for the model to run. If this time is exceeded the
// prediction will be returned in a "starting" state and need to be
// retrieved using the predictions.get endpoint" (predictions.create).
const MaxWait = 60 * time.Second

// Signal implements provider.Signaller: Replicate's webhook where
// darkroom can be called back; else, for a model expected to finish
// within Config.WaitBelow (MaxWait), the create held open (Prefer: wait);
// else polling.
func (p *Provider) Signal(m provider.Model, webhook bool) provider.Signal {
	switch {
	case webhook:
		return provider.SignalWebhook
	case m.ExpectedDuration > 0 && m.ExpectedDuration < p.cfg.WaitBelow:
		return provider.SignalWaitOnCreate
	}
	return provider.SignalPoll
}

// SubmitWait implements provider.SubmitWaiter: Submit with Prefer:
// wait=n, n the wait in whole seconds within 1–MaxWait. The status is the
// prediction the reply carried: its end when it ended within the wait.
func (p *Provider) SubmitWait(ctx context.Context, req provider.Request, wait time.Duration) (provider.Job, provider.Status, error) {
	wait = min(max(wait, time.Second), MaxWait).Truncate(time.Second)
	job, pr, e, err := p.create(ctx, req, wait)
	if err != nil {
		return job, provider.Status{}, err
	}
	return job, toStatus(pr, e), nil
}

// timeout is one ordinary request's bound (Config.RequestTimeout, or
// httpx's 30 s).
func (p *Provider) timeout() time.Duration {
	if p.cfg.RequestTimeout > 0 {
		return p.cfg.RequestTimeout
	}
	return 30 * time.Second
}

// waitClient is c without its whole-request timeout: a held create is
// bounded by its context (the wait and timeout after it); nil: the
// default transport.
func waitClient(c *http.Client) *http.Client {
	if c == nil {
		return &http.Client{}
	}
	cc := *c
	cc.Timeout = 0
	return &cc
}
