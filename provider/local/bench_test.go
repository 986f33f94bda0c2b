package local

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func BenchmarkRenderImage(b *testing.B) {
	for _, model := range []string{"local-sketch", "local-photo"} {
		b.Run(model, func(b *testing.B) {
			s := spec{model: model, prompt: "a lighthouse on a cliff at dusk", ratio: "1:1", seed: 7}
			for b.Loop() {
				if err := renderImage(context.Background(), io.Discard, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRenderVideo(b *testing.B) {
	s := spec{model: "local-motion", prompt: "a lighthouse on a cliff at dusk", ratio: "16:9", seed: 7, duration: 6}
	for b.Loop() {
		if err := renderGIF(context.Background(), io.Discard, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCoverPNG: why a PNG input is decoded row by row (png.go) and
// not by image/png: what drawing one 16-bit RGBA input of 4000×3000 into
// a 1024×1024 output allocates, against image/png's whole decode of it
// (which grows with the input: 320 MB at the largest accepted, 40 MP).
func BenchmarkCoverPNG(b *testing.B) {
	src := image.NewNRGBA64(image.Rect(0, 0, 4000, 3000))
	for y := range 3000 {
		for x := range 4000 {
			src.SetNRGBA64(x, y, color.NRGBA64{uint16(x * 16), uint16(y * 21), uint16((x + y) * 9), 0xffff})
		}
	}
	var f bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&f, src); err != nil {
		b.Fatal(err)
	}
	data := f.Bytes()
	measure := func(fn func()) (mib, ms float64) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		t0 := time.Now()
		fn()
		ms = float64(time.Since(t0).Microseconds()) / 1000
		runtime.ReadMemStats(&m1)
		return float64(m1.TotalAlloc-m0.TotalAlloc) / (1 << 20), ms
	}
	var rowsMiB, rowsMs, wholeMiB, wholeMs float64
	for b.Loop() {
		rowsMiB, rowsMs = measure(func() {
			if coverImage(context.Background(), data, 1024, 1024) == nil {
				b.Fatal("not drawn")
			}
		})
		wholeMiB, wholeMs = measure(func() {
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			sampleImage(img, 1024, 1024)
		})
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rowsMiB, "rows_MiB")
	b.ReportMetric(wholeMiB, "imagepng_MiB")
	b.ReportMetric(wholeMiB/rowsMiB, "memory_ratio")
	b.ReportMetric(rowsMs, "rows_ms")
	b.ReportMetric(wholeMs, "imagepng_ms")
}

// BenchmarkMaskedEdit: what a masked edit of the largest accepted input
// (8000×5000, 40 MP, 8-bit RGB, with a mask of the same size) allocates:
// the input and mask are drawn straight into the output-sized covers, so
// it is the mask file's bytes and a few output-sized buffers, against the
// 160 MB a whole decode of the input alone would hold.
func BenchmarkMaskedEdit(b *testing.B) {
	const w, h = 8000, 5000
	src := image.NewRGBA(image.Rect(0, 0, w, h))
	mask := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			i := y*src.Stride + 4*x
			src.Pix[i], src.Pix[i+1], src.Pix[i+2], src.Pix[i+3] = uint8(x>>5), uint8(y>>5), uint8((x+y)>>6), 255
			if x > w/4 && x < w/2 && y > h/3 && y < 2*h/3 {
				mask.Pix[y*mask.Stride+x] = 255
			}
		}
	}
	enc := &png.Encoder{CompressionLevel: png.BestSpeed}
	var in, m bytes.Buffer
	if err := enc.Encode(&in, src); err != nil {
		b.Fatal(err)
	}
	if err := enc.Encode(&m, mask); err != nil {
		b.Fatal(err)
	}
	src, mask = nil, nil
	path := filepath.Join(b.TempDir(), "mask.png")
	if err := os.WriteFile(path, m.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	s := spec{model: "local-edit", prompt: "a sunny hill", ratio: "1:1", seed: 7, input: in.Bytes(),
		extras: []specInput{{role: "mask", path: path, sum: "m"}}}
	runtime.GC()
	var mib float64
	var out countingWriter
	for b.Loop() {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		out = 0
		if err := renderEdit(context.Background(), &out, s); err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&m1)
		mib = float64(m1.TotalAlloc-m0.TotalAlloc) / (1 << 20)
	}
	b.ReportMetric(mib, "alloc_MiB")
	b.ReportMetric(float64(in.Len())/(1<<20), "input_MiB")
	b.ReportMetric(float64(m.Len())/(1<<20), "mask_MiB")
	b.ReportMetric(float64(out)/(1<<20), "output_MiB")
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
