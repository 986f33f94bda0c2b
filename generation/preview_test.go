package generation

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/preview"
)

// countingBlobs counts Puts and Opens per key; failPreviews refuses to
// store previews.
type countingBlobs struct {
	blob.Store
	mu           sync.Mutex
	puts, opens  map[string]int
	failPreviews bool
}

func (c *countingBlobs) Put(ctx context.Context, key string, r io.Reader, ct string, max int64) (blob.Object, error) {
	c.mu.Lock()
	c.puts[key]++
	fail := c.failPreviews && strings.HasSuffix(key, previewSuffix)
	c.mu.Unlock()
	if fail {
		return blob.Object{}, errors.New("injected: preview store refused")
	}
	return c.Store.Put(ctx, key, r, ct, max)
}

func (c *countingBlobs) Open(ctx context.Context, key string) (io.ReadCloser, blob.Object, error) {
	c.mu.Lock()
	c.opens[key]++
	c.mu.Unlock()
	return c.Store.Open(ctx, key)
}

func (c *countingBlobs) count(m map[string]int, key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[key]
}

func previewEnv(t *testing.T, on, fail bool) (*testEnv, *countingBlobs, *atomic.Int64) {
	var cb *countingBlobs
	skew := &atomic.Int64{}
	e := newEnv(t, func(c *Config) {
		cb = &countingBlobs{Store: c.Blobs, puts: map[string]int{}, opens: map[string]int{}, failPreviews: fail}
		c.Blobs, c.InlinePreview = cb, on
		c.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	startRunner(t, e)
	return e, cb, skew
}

// TestInlinePreviewMadeOnce: each image output (and the local provider's
// GIF video) gets one preview when stored, within its bounds; reading it
// for rendering costs one blob read in all; retention deletes it too.
func TestInlinePreviewMadeOnce(t *testing.T) {
	e, cb, skew := previewEnv(t, true, false)
	ctx := context.Background()
	for _, c := range []struct{ model, mime string }{{"local-sketch", "image/png"}, {"local-motion", "image/gif"}} {
		t.Run(c.model, func(t *testing.T) {
			g := e.waitDone(e.create("alice", CreateRequest{ModelID: c.model, Prompt: "a heron", AspectRatio: "16:9"}).ID)
			o := g.Outputs[0]
			p := o.Preview
			if o.MimeType != c.mime || p == nil || p.Key != o.Key+previewSuffix || p.MimeType != "image/jpeg" ||
				p.Bytes == 0 || p.Bytes > preview.MaxBytes || max(p.Width, p.Height) != min(max(o.Width, o.Height), preview.MaxSide) {
				t.Fatalf("output %+v, preview %+v", o, p)
			}
			obj, err := e.blobs.Stat(ctx, p.Key)
			if err != nil || obj.Size != p.Bytes {
				t.Fatalf("stored preview: %+v, %v", obj, err)
			}
			for range 3 {
				if _, err := e.svc.Get(ctx, "alice", g.ID); err != nil {
					t.Fatal(err)
				}
				b, err := e.svc.Preview(ctx, p)
				if err != nil || int64(len(b)) != p.Bytes {
					t.Fatalf("Preview: %d bytes, %v", len(b), err)
				}
			}
			if n := cb.count(cb.puts, p.Key); n != 1 {
				t.Fatalf("preview stored %d times, want once", n)
			}
			if n := cb.count(cb.opens, p.Key); n != 1 {
				t.Fatalf("preview read from the store %d times, want once (then memory)", n)
			}
			t.Logf("%s %dx%d: preview %dx%d, %d bytes", c.model, o.Width, o.Height, p.Width, p.Height, p.Bytes)
		})
	}
	skew.Store(int64(8 * 24 * time.Hour))
	if n, err := e.svc.ExpireOutputs(ctx); err != nil || n != 2 {
		t.Fatalf("ExpireOutputs = %d, %v", n, err)
	}
	cb.mu.Lock()
	var keys []string
	for k := range cb.puts {
		keys = append(keys, k)
	}
	cb.mu.Unlock()
	for _, k := range keys {
		if _, err := e.blobs.Stat(ctx, k); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("%s still stored after retention: %v", k, err)
		}
	}
}

// TestInlinePreviewOffOrFailing: with previews off none is made; a preview
// that cannot be stored leaves the generation completed without one.
func TestInlinePreviewOffOrFailing(t *testing.T) {
	for _, c := range []struct {
		name     string
		on, fail bool
		puts     int
	}{{"off", false, false, 0}, {"store refuses", true, true, 1}} {
		t.Run(c.name, func(t *testing.T) {
			e, cb, _ := previewEnv(t, c.on, c.fail)
			g := e.waitDone(e.create("alice", CreateRequest{ModelID: "local-sketch", Prompt: "a heron"}).ID)
			if g.Status != StatusCompleted || len(g.Outputs) != 1 || g.Outputs[0].Preview != nil {
				t.Fatalf("%s with %+v", g.Status, g.Outputs)
			}
			if n := cb.count(cb.puts, g.Outputs[0].Key+previewSuffix); n != c.puts {
				t.Fatalf("preview puts %d, want %d", n, c.puts)
			}
		})
	}
}
