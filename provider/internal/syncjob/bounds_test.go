package syncjob

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
)

// tinyPNG is a real 8×8 PNG: its header decodes.
func tinyPNG(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// lazyReply writes head, then part again and again until it has written
// about size bytes (forever if size < 0), then tail; it stops when the
// reader is closed. written counts what it wrote. It allocates nothing
// per part, so the test's allocation figures are Store's.
func lazyReply(head, part string, size int64, tail string, written *atomic.Int64) *io.PipeReader {
	pr, pw := io.Pipe()
	cw := &countWriter{w: pw, n: written}
	p := []byte(part)
	go func() {
		io.WriteString(cw, head)
		for size < 0 || written.Load() < size {
			if cw.Write(p); cw.err != nil {
				return // the reader stopped
			}
		}
		io.WriteString(cw, tail)
		pw.Close()
	}()
	return pr
}

type countWriter struct {
	w   io.Writer
	n   *atomic.Int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	if err != nil {
		c.err = err
	}
	return n, err
}

// countingSpool counts the bytes handed to Put, kept or not.
type countingSpool struct {
	provider.Spool
	put atomic.Int64
}

func (c *countingSpool) Put(ctx context.Context, key string, r io.Reader, ct string) error {
	return c.Spool.Put(ctx, key, io.TeeReader(r, writerFunc(func(p []byte) { c.put.Add(int64(len(p))) })), ct)
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// dirBytes sums the sizes of the files under dir.
func dirBytes(t *testing.T, dir string) (n int64) {
	t.Helper()
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestStoreBounds: a hostile reply leaves at most what was charged in the
// spool, and no more than the bounds in memory or on disk: the images
// past the requested count are not read, an image that never ends is cut
// at provider.MaxOutputBytes, bytes that are no image are refused from
// their first bytes, and captured text keeps maxValues values a key.
func TestStoreBounds(t *testing.T) {
	img := tinyPNG(t)
	b64 := base64.StdEncoding.EncodeToString(img)
	limit := provider.MaxOutputBytes(provider.KindImage)
	zeros := bytes.Repeat([]byte{0}, 48<<10) // 64 KiB of base64
	cases := []struct {
		name       string
		reply      func(*atomic.Int64) *io.PipeReader
		stream     string
		max        int
		wantOuts   int
		wantErr    string // a PermanentError's
		maxRead    int64  // bytes of the reply read at most
		maxSpooled int64  // bytes handed to the spool at most
	}{
		{
			name: "400 MB of small images, one charged", stream: "b64_json", max: 1, wantOuts: 1,
			reply: func(n *atomic.Int64) *io.PipeReader {
				return lazyReply(`{"data":[`, `{"b64_json":"`+b64+`"},`, 400<<20, `{}]}`, n)
			},
			maxRead: 1 << 20, maxSpooled: int64(len(img)),
		},
		{
			name: "400 MB of small images, four charged", stream: "bytesBase64Encoded", max: 4, wantOuts: 4,
			reply: func(n *atomic.Int64) *io.PipeReader {
				return lazyReply(`{"predictions":[`, `{"bytesBase64Encoded":"`+b64+`"},`, 400<<20, `{}]}`, n)
			},
			maxRead: 1 << 20, maxSpooled: 4 * int64(len(img)),
		},
		{
			name: "an endless image", stream: "b64_json", max: 1, wantErr: "larger than the 128 MiB",
			reply: func(n *atomic.Int64) *io.PipeReader {
				enc := base64.StdEncoding.EncodeToString(zeros)
				return lazyReply(`{"data":[{"b64_json":"`+b64[:len(b64)-4], enc, -1, ``, n)
			},
			maxRead: limit*4/3 + 4<<20, maxSpooled: limit + 64<<10,
		},
		{
			name: "1 GiB of zeros", stream: "b64_json", max: 1, wantErr: "not an image",
			reply: func(n *atomic.Int64) *io.PipeReader {
				enc := base64.StdEncoding.EncodeToString(zeros)
				return lazyReply(`{"data":[{"b64_json":"`, enc, 1<<30*4/3, `"}]}`, n)
			},
			maxRead: 2 << 20, maxSpooled: 0,
		},
		{
			name: "a PNG signature, then 1 GiB of zeros", stream: "b64_json", max: 1, wantErr: "not an image",
			reply: func(n *atomic.Int64) *io.PipeReader {
				enc := base64.StdEncoding.EncodeToString(zeros)
				sig := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00"))
				return lazyReply(`{"data":[{"b64_json":"`+sig, enc, 1<<30*4/3, `"}]}`, n)
			},
			maxRead: 2 << 20, maxSpooled: 0,
		},
		{
			name: "16 MB of text parts before the image", stream: "data", max: 1, wantOuts: 1,
			reply: func(n *atomic.Int64) *io.PipeReader {
				text := `{"text":"` + strings.Repeat("words ", 700) + `"},`
				return lazyReply(`{"candidates":[{"content":{"parts":[`, text, 16<<20,
					`{"inlineData":{"mimeType":"image/png","data":"`+b64+`"}}]}}]}`, n)
			},
			maxRead: 17 << 20, maxSpooled: int64(len(img)),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			spool := &countingSpool{Spool: provider.DirSpool(dir)}
			j := Journal{Spool: spool, Provider: "vendor"}
			var read atomic.Int64
			reply := c.reply(&read)
			defer reply.Close()
			sc := NewScanner(reply, []string{c.stream}, []string{"text", "revised_prompt"})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			outs, err := j.Store(context.Background(), "g", 1, sc, c.max)
			runtime.ReadMemStats(&after)
			reply.Close()
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("read %.1f MiB of the reply, handed %.1f MiB to the spool, %d B left in it; allocated %.1f MiB, heap in use %.1f → %.1f MiB; %d outputs, %d text values kept",
				mib(read.Load()), mib(spool.put.Load()), dirBytes(t, dir), mib(int64(alloc)), mib(int64(before.HeapInuse)), mib(int64(after.HeapInuse)), len(outs), len(sc.Small["text"]))
			var perm *provider.PermanentError
			switch {
			case c.wantErr != "" && (!errors.As(err, &perm) || !strings.Contains(perm.Message, c.wantErr)):
				t.Fatalf("Store err = %v, want a refusal saying %q", err, c.wantErr)
			case c.wantErr == "" && (err != nil || len(outs) != c.wantOuts):
				t.Fatalf("Store = %d outputs, %v; want %d", len(outs), err, c.wantOuts)
			}
			if r := read.Load(); r > c.maxRead+64<<10 { // the pipe's last write
				t.Errorf("read %d bytes of the reply, want at most %d", r, c.maxRead)
			}
			if s := spool.put.Load(); s > c.maxSpooled {
				t.Errorf("handed %d bytes to the spool, want at most %d", s, c.maxSpooled)
			}
			if left, want := dirBytes(t, dir), int64(c.wantOuts*len(img)); left != want {
				t.Errorf("%d bytes left in the spool, want %d", left, want)
			}
			if alloc > 16<<20 {
				t.Errorf("allocated %d bytes: the reply is being held", alloc)
			}
			if n := len(sc.Small["text"]); n > maxValues {
				t.Errorf("kept %d text values, want at most %d", n, maxValues)
			}
		})
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
