package local

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"io"
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
