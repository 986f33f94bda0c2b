package openai_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/openai"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// spoolBytes sums the output files under a spool folder (the journal
// aside).
func spoolBytes(t *testing.T, dir string) (files int, n int64) {
	t.Helper()
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && filepath.Base(p) != "journal.json" {
			files++
			n += fi.Size()
		}
		return nil
	})
	return files, n
}

// TestHostileReplies: an OpenAI that answers with more images than asked,
// an image without end, or a gigabyte of zeros leaves in the spool only
// the images charged for, within their bound, and never an "image" that
// is none; a refusal is permanent (not a resubmit).
func TestHostileReplies(t *testing.T) {
	cases := []struct {
		name, prompt string
		count        int
		wantOuts     int
		wantErr      string
	}{
		{name: "200 images for one", prompt: "a kite [many:200]", wantOuts: 1},
		{name: "200 images for two", prompt: "a kite [many:200]", count: 2, wantOuts: 2},
		{name: "an endless image", prompt: "a kite [endless]", wantErr: "larger than the 8 MiB"},
		{name: "1 GiB of zeros", prompt: "a kite [zeros:1073741824]", wantErr: "not an image"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			em := emulator.New(emulator.Options{Clock: emulator.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))})
			t.Cleanup(em.Close)
			dir := t.TempDir()
			p, err := openai.New(openai.Config{Key: "sk-test", BaseURL: em.OpenAI.URL, Spool: provider.DirSpool(dir), RequestsPerMinute: -1, Now: em.Now})
			if err != nil {
				t.Fatal(err)
			}
			openai.SetMaxOutputBytes(p, 8<<20) // the bound's rule, cheaper
			req := provider.Request{IdempotencyKey: "g1", Model: model(t, p, "openai-gpt-image-1"), Prompt: c.prompt, Count: c.count}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			job, err := p.Submit(context.Background(), req)
			runtime.ReadMemStats(&after)
			files, size := spoolBytes(t, dir)
			t.Logf("%v: %d files, %d bytes left in the spool; allocated %.1f MiB (emulator included), heap in use %.1f MiB after",
				time.Since(start).Round(time.Millisecond), files, size, float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), float64(after.HeapInuse)/(1<<20))
			if c.wantErr != "" {
				var perm *provider.PermanentError
				if !errors.As(err, &perm) || !strings.Contains(perm.Message, c.wantErr) {
					t.Fatalf("Submit err = %v, want a refusal saying %q", err, c.wantErr)
				}
				if files != 0 {
					t.Fatalf("%d files left in the spool after a refusal", files)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, err := p.Status(context.Background(), job)
			if err != nil || len(st.Outputs) != c.wantOuts || files != c.wantOuts {
				t.Fatalf("%d outputs (%d spooled), %v; want %d", len(st.Outputs), files, err, c.wantOuts)
			}
			for _, o := range st.Outputs {
				rc, err := p.OpenOutput(context.Background(), job, o)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, rc)
				rc.Close()
			}
		})
	}
}

// png16 is a w×h 16-bit RGBA PNG, all black (keep everything), made row
// by row and stored uncompressed (deflating hundreds of MB would cost the
// test more than the code under test). With rows < h only that many rows
// are there: the header says w×h, the pixels break off, as cheap to make
// and as costly to decode (the decoder allocates the whole image first).
func png16(t *testing.T, w, h, rows int) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(data))))
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		b.WriteString(typ)
		b.Write(data)
		b.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	}
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(w)), uint32(h))
	chunk("IHDR", append(ihdr, 16, 6, 0, 0, 0))
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.NoCompression)
	row := make([]byte, 1+8*w) // filter byte 0, then black opaque pixels
	for x := 0; x < w; x++ {
		row[1+8*x+6], row[1+8*x+7] = 0xff, 0xff
	}
	for range rows {
		zw.Write(row)
	}
	if rows == h {
		zw.Close()
	} else {
		zw.Flush()
	}
	chunk("IDAT", z.Bytes())
	if rows == h {
		chunk("IEND", nil)
	}
	return b.Bytes()
}

// TestMaskBudget: an edit's mask is decoded within the process's decode
// budget. The mask (8192×4882, 16-bit) is refused from its
// header, allocating next to nothing (decoded whole it took 650 MiB); one
// within the budget is decoded at about its decoded size, with no
// per-pixel garbage; a refusal is permanent, never a resubmit.
func TestMaskBudget(t *testing.T) {
	cases := []struct {
		name     string
		w, h     int
		rows     int // of pixels present
		wantErr  string
		maxAlloc uint64
	}{
		{name: "8192×4882 16-bit", w: 8192, h: 4882, rows: 1, wantErr: "too large", maxAlloc: 4 << 20},
		// Decoded 8 bytes a pixel, the alpha 1, its PNG ~1 more.
		{name: "2000×1500 16-bit", w: 2000, h: 1500, rows: 1500, maxAlloc: 2000 * 1500 * (8 + 1 + 1) * 5 / 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mask := png16(t, c.w, c.h, c.rows)
			_, p := newRig(t, func(em *emulator.Emulator) string { return em.OpenAI.URL })
			img := png("")
			req := provider.Request{IdempotencyKey: "g-mask", Model: model(t, p, "openai-gpt-image-1"), Prompt: "fill the sky", InputImage: &img,
				Extra: []provider.Input{{Role: provider.RoleMask, MimeType: "image/png", Open: func(context.Context) (io.ReadCloser, error) {
					return io.NopCloser(bytes.NewReader(mask)), nil
				}}}}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := p.Submit(context.Background(), req)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d KB mask, %d×%d 16-bit (%.0f MiB decoded): allocated %.1f MiB, heap in use %.1f → %.1f MiB; err %v",
				len(mask)>>10, c.w, c.h, float64(c.w*c.h*8)/(1<<20), float64(alloc)/(1<<20), float64(before.HeapInuse)/(1<<20), float64(after.HeapInuse)/(1<<20), err)
			var perm *provider.PermanentError
			switch {
			case c.wantErr != "" && (!errors.As(err, &perm) || !strings.Contains(perm.Message, c.wantErr)):
				t.Fatalf("Submit err = %v, want a refusal saying %q", err, c.wantErr)
			case c.wantErr == "" && err != nil:
				t.Fatal(err)
			}
			if alloc > c.maxAlloc {
				t.Fatalf("allocated %d bytes, want at most %d", alloc, c.maxAlloc)
			}
		})
	}
}
