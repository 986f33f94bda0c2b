package compat

import (
	"context"
	"fmt"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wait is the wait behind wait_generation and generate with wait:true.
// A request with a progressToken waits up to d and hears
// notifications/progress on every change and at least every
// ProgressEvery, so a client's request timeout (reset by progress) never
// cuts it; one without waits at most QuietWaitCap and then answers the
// latest state with timedOut:true.
func (t *Tools) wait(ctx context.Context, req *mcp.CallToolRequest, owner, id string, d time.Duration) (*generation.Generation, bool, error) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return t.svc.Wait(ctx, owner, id, min(d, t.cfg.QuietWaitCap))
	}
	p := &progress{session: req.Session, token: token}
	return t.svc.WaitWith(ctx, owner, id, d, generation.WaitOptions{
		Every:   t.cfg.ProgressEvery,
		OnState: func(g *generation.Generation, tick bool) { p.report(ctx, g, tick) },
	})
}

// progress sends one request's notifications/progress. Progress is the
// percentage (total 100); it must increase, so a notification that would
// repeat the last value (a keep-alive, a change of message only) is nudged
// up by a thousandth.
type progress struct {
	session *mcp.ServerSession
	token   any
	sent    bool
	last    float64
	state   string // what the last notification said, to send changes only
}

func (p *progress) report(ctx context.Context, g *generation.Generation, tick bool) {
	state := fmt.Sprintf("%s\x00%s\x00%g", g.Status, g.StatusMessage, g.Progress)
	if p.sent && !tick && state == p.state {
		return // woken by a change that shows no difference
	}
	pct := g.Progress * 100
	if p.sent && pct <= p.last {
		pct = p.last + 0.001
	}
	p.sent, p.last, p.state = true, pct, state
	n := &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: pct, Message: progressMessage(g)}
	if pct < 100 {
		n.Total = 100
	}
	// A failed send (client gone) ends nothing here: ctx does.
	_ = p.session.NotifyProgress(ctx, n)
}

func progressMessage(g *generation.Generation) string {
	msg := fmt.Sprintf("%s %s", g.ID, g.Status)
	if g.StatusMessage != "" && g.StatusMessage != string(g.Status) {
		msg += ": " + g.StatusMessage
	}
	if g.Status == generation.StatusQueued || g.Status == generation.StatusRunning {
		msg += fmt.Sprintf(" (%.0f%%)", g.Progress*100)
	}
	return msg
}
