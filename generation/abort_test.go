package generation

import (
	"context"
	"testing"
)

// TestAbortCreates: the generations created under a tracked context end
// failed, refunded, whatever they waited for; one that ended meanwhile
// keeps its end; an untracked create is not touched.
func TestAbortCreates(t *testing.T) {
	e := newEnv(t)
	ctx, creates := TrackCreates(context.Background())
	for _, c := range []struct {
		name string
		req  CreateRequest
		want Status
	}{
		{"reserved for its image", CreateRequest{ModelID: "local-animate", Prompt: "ripples"}, StatusReserved},
		{"queued", CreateRequest{ModelID: "local-sketch", Prompt: "a heron"}, StatusQueued},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, _, err := e.svc.Create(ctx, "alice", c.req)
			if err != nil || g.Status != c.want {
				t.Fatalf("create: %v %v", g, err)
			}
			ended := e.svc.AbortCreates(ctx, creates)
			after, err := e.svc.Get(ctx, "alice", g.ID)
			if err != nil || len(ended) != 1 || ended[0] != g.ID || after.Status != StatusFailed || after.Charged != 0 ||
				after.ErrorKind != ErrorInternal {
				t.Fatalf("after the abort: %v %+v, ended %v", err, after, ended)
			}
			if again := e.svc.AbortCreates(ctx, creates); len(again) != 0 {
				t.Fatalf("a second abort ended %v", again)
			}
		})
	}
	other := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "untracked"})
	if ended := e.svc.AbortCreates(ctx, creates); len(ended) != 0 {
		t.Fatalf("ended %v", ended)
	}
	if g, _ := e.svc.Get(ctx, "alice", other.ID); g.Status != StatusQueued {
		t.Fatalf("untracked create: %s", g.Status)
	}
}
