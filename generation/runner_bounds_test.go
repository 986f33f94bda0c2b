package generation

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
)

// hostileProvider is the local provider answering as a hostile vendor
// may: each completed job's outputs repeated copies times, or every
// output's bytes made by body. read counts the bytes the runner took.
type hostileProvider struct {
	provider.Provider
	copies int
	body   func() io.Reader
	read   atomic.Int64
}

func (h *hostileProvider) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	st, err := h.Provider.Status(ctx, job)
	if st.State == provider.StateCompleted && h.copies > 1 {
		var outs []provider.Output
		for range h.copies {
			outs = append(outs, st.Outputs...)
		}
		st.Outputs = outs
	}
	return st, err
}

func (h *hostileProvider) OpenOutput(ctx context.Context, job provider.Job, out provider.Output) (io.ReadCloser, error) {
	if h.body == nil {
		return h.Provider.OpenOutput(ctx, job, out)
	}
	return io.NopCloser(&countReader{r: h.body(), n: &h.read}), nil
}

type countReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// zeros reads as zero bytes without end.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestRunnerStoresWhatWasCharged: a provider that returns more outputs
// than were charged (the probe saw 8–60 for one) has only the charged
// ones stored, and the record says so; an output that is no image (1 GiB
// of zeros, with or without a PNG signature) or that does not end is
// refused from its first bytes or at its bound, nothing is stored, and
// the caller is refunded.
func TestRunnerStoresWhatWasCharged(t *testing.T) {
	const limit = 8 << 20 // RunnerConfig.MaxOutputBytes: the rule, cheaper
	png := pngHeader(64, 64, 8, 6)
	cases := []struct {
		name      string
		count     int
		copies    int
		body      func() io.Reader
		wantOuts  int    // 0: failed, refunded
		wantMsg   string // in the status message
		wantError string // in the error message
		maxRead   int64
	}{
		{name: "60 outputs for one", copies: 60, wantOuts: 1, wantMsg: "returned 59 more than the 1 charged for"},
		{name: "60 outputs for each of two", count: 2, copies: 60, wantOuts: 2, wantMsg: "returned 118 more than the 2 charged for"},
		{name: "1 GiB of zeros", body: func() io.Reader { return io.LimitReader(zeros{}, 1<<30) },
			wantError: "not an image or a video", maxRead: 1 << 20},
		{name: "a PNG signature, then 1 GiB of zeros", body: func() io.Reader {
			return io.MultiReader(strings.NewReader("\x89PNG\r\n\x1a\n"), io.LimitReader(zeros{}, 1<<30))
		}, wantError: "not a readable image/png", maxRead: 2 << 20},
		{name: "an image without end", body: func() io.Reader { return io.MultiReader(strings.NewReader(string(png)), zeros{}) },
			wantError: "larger than the 8 MiB", maxRead: limit + 2<<20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &hostileProvider{copies: c.copies, body: c.body}
			e := newEnv(t, func(cfg *Config) {
				h.Provider = cfg.Providers[0]
				cfg.Providers = []provider.Provider{h}
			})
			startRunnerWith(t, e, RunnerConfig{MaxOutputBytes: limit})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			g := e.waitDone(e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "a heron", Count: c.count}).ID)
			runtime.ReadMemStats(&after)
			stored := dirSize(t, filepath.Join(e.dir, "files"))
			t.Logf("%s (%s): %d outputs, charged %d of %d; read %.1f MiB, stored %d bytes; allocated %.1f MiB, heap in use %.1f MiB after",
				g.Status, g.StatusMessage, len(g.Outputs), g.Charged, g.Credits, float64(h.read.Load())/(1<<20), stored,
				float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), float64(after.HeapInuse)/(1<<20))
			if c.wantOuts > 0 {
				if g.Status != StatusCompleted || len(g.Outputs) != c.wantOuts || g.Charged != g.Credits || !strings.Contains(g.StatusMessage, c.wantMsg) {
					t.Fatalf("ended %s (%q) with %d outputs, charged %d of %d; want completed with %d, saying %q",
						g.Status, g.StatusMessage, len(g.Outputs), g.Charged, g.Credits, c.wantOuts, c.wantMsg)
				}
				return
			}
			if g.Status != StatusFailed || g.Charged != 0 || len(g.Outputs) != 0 || !strings.Contains(g.ErrorMessage, c.wantError) {
				t.Fatalf("ended %s (%q), charged %d of %d, %d outputs; want failed, refunded, saying %q",
					g.Status, g.ErrorMessage, g.Charged, g.Credits, len(g.Outputs), c.wantError)
			}
			if stored != 0 {
				t.Fatalf("%d bytes stored for a refused output", stored)
			}
			if r := h.read.Load(); r > c.maxRead {
				t.Fatalf("read %d bytes of the output, want at most %d", r, c.maxRead)
			}
		})
	}
}

// TestOutputBoundByKind: without a configured bound an output is bounded
// by its kind's (provider.MaxOutputBytes).
func TestOutputBoundByKind(t *testing.T) {
	r := &Runner{}
	for _, k := range []provider.Kind{provider.KindImage, provider.KindVideo} {
		if got, want := r.maxOutputBytes(k), provider.MaxOutputBytes(k); got != want || got <= 0 {
			t.Errorf("%s: %d, want %d", k, got, want)
		}
	}
}

func dirSize(t *testing.T, dir string) (n int64) {
	t.Helper()
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
