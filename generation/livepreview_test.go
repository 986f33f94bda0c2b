package generation

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// framesProvider is a provider whose running job has a live preview: each
// LivePreview call may bring a new frame (next decides).
type framesProvider struct {
	provider.Provider
	mu     sync.Mutex
	frames int
	size   int
	next   bool // every call is a new frame
}

func (p *framesProvider) LivePreview(string) ([]byte, int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next || p.frames == 0 {
		p.frames++
	}
	return bytes.Repeat([]byte{byte(p.frames)}, p.size), p.frames, true
}

// TestLivePreviewWrites: the runner stores a running generation's frames
// at most once a second whatever the provider sends, only new ones,
// nothing larger than 64 KB, nothing for a generation that does not run;
// the Observer sees each stored frame's count; every reader gets the last
// one through Service.LivePreview, and none once the generation ended.
func TestLivePreviewWrites(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status Status
		next   bool
		size   int
		calls  int           // savePreview calls...
		every  time.Duration // ...this far apart
		writes int
	}{
		{"a new frame every 10 ms for 3 s", StatusRunning, true, 1000, 300, 10 * time.Millisecond, 3}, // at 0, 1 and 2 s
		{"a new frame every 2 s", StatusRunning, true, 1000, 5, 2 * time.Second, 5},
		{"the same frame", StatusRunning, false, 1000, 300, 10 * time.Millisecond, 1},
		{"a frame above 64 KB", StatusRunning, true, 64<<10 + 1, 10, 2 * time.Second, 0},
		{"queued (a held synchronous call)", StatusQueued, true, 1000, 5, 2 * time.Second, 5},
		{"reserved", StatusReserved, true, 1000, 10, 2 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clock sync.Mutex
			now := time.Unix(1_800_000_000, 0)
			fp := &framesProvider{next: tc.next, size: tc.size}
			e := newEnv(t, func(c *Config) {
				fp.Provider = c.Providers[0]
				c.Providers = []provider.Provider{fp}
				c.Now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
			})
			g := e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "a heron"})
			e.exec("UPDATE generations SET status = ? WHERE id = ?", string(tc.status), g.ID)
			before := len(e.changesFor(g.ID))
			var seen []int
			e.hookErr = func(g *Generation) error { seen = append(seen, g.PreviewFrames); return nil }
			r := NewRunner(e.svc, RunnerConfig{})
			for range tc.calls {
				r.savePreview(context.Background(), fp, g.ID)
				clock.Lock()
				now = now.Add(tc.every)
				clock.Unlock()
			}
			if n := len(e.changesFor(g.ID)) - before; n != tc.writes {
				t.Fatalf("%d calls %v apart stored %d frames, want %d", tc.calls, tc.every, n, tc.writes)
			}
			g.Status = tc.status
			b, frames, ok := e.svc.LivePreview(context.Background(), g)
			if tc.writes == 0 {
				if ok {
					t.Fatalf("a preview was stored: %d frames", frames)
				}
				return
			}
			if !ok || frames != seen[len(seen)-1] || len(b) != tc.size || b[0] != byte(frames) {
				t.Fatalf("LivePreview = %d bytes, %d frames, %v; the Observer saw %v", len(b), frames, ok, seen)
			}
			end := change(g.ID, EventComplete, StatusCompleted)
			end.Outputs = "[]"
			if _, err := e.svc.apply(context.Background(), end); err != nil {
				t.Fatal(err)
			}
			done, err := e.svc.Get(context.Background(), "alice", g.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, ok := e.svc.LivePreview(context.Background(), done); ok {
				t.Fatal("a completed generation has a live preview")
			}
			if _, _, err := e.svc.store.LivePreview(context.Background(), g.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the completed generation's frame is still stored: %v", err)
			}
		})
	}
}
