package gentools

import (
	"context"
	"fmt"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/sse"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wait is the wait behind wait_generation and generate with wait:true. It
// waits at most MaxWait, whatever secs asks, and then answers the latest
// state with timedOut:true: several clients cut a request at 60 s even
// while progress arrives. A request with a progressToken also hears
// notifications/progress on every change and at least every
// ProgressEvery.
func (t *Tools) wait(ctx context.Context, req *mcp.CallToolRequest, owner, id string, secs int) (*generation.Generation, bool, error) {
	d := min(time.Duration(secs)*time.Second, t.cfg.MaxWait)
	// Over HTTP, an SSE comment every DARKROOM_STREAM_KEEPALIVE while the
	// wait holds, so a proxy's idle timeout does not cut it.
	defer sse.Hold(ctx)()
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return t.svc.Wait(ctx, owner, id, d)
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
	n := &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: pct, Message: g.Headline()}
	if pct < 100 {
		n.Total = 100
	}
	// A failed send (client gone) ends nothing here: ctx does.
	_ = p.session.NotifyProgress(ctx, n)
}
