package preview

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/darkroom-mcp/darkroom/internal/caches"
)

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gradient(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			o := img.PixOffset(x, y)
			img.Pix[o], img.Pix[o+1], img.Pix[o+2], img.Pix[o+3] = uint8(x*255/w), uint8(y*255/h), 128, 255
		}
	}
	return img
}

// noise is the worst case for JPEG: every pixel independent.
func noise(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = uint8(r.Uint32())
	}
	return img
}

// twoFrameGIF is a red first frame, then a blue one.
func twoFrameGIF(t *testing.T, w, h int) []byte {
	t.Helper()
	pal := color.Palette{color.RGBA{255, 0, 0, 255}, color.RGBA{0, 0, 255, 255}}
	a := &gif.GIF{}
	for _, idx := range []uint8{0, 1} {
		f := image.NewPaletted(image.Rect(0, 0, w, h), pal)
		for i := range f.Pix {
			f.Pix[i] = idx
		}
		a.Image, a.Delay = append(a.Image, f), append(a.Delay, 10)
	}
	var b bytes.Buffer
	if err := gif.EncodeAll(&b, a); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestMakeWithinBounds(t *testing.T) {
	for _, c := range []struct {
		name, mime string
		data       func() []byte // made in the subtest: -run picks one
		w, h       int
	}{
		{"landscape", "image/png", func() []byte { return encodePNG(t, gradient(1024, 576)) }, 512, 288},
		{"portrait", "image/png", func() []byte { return encodePNG(t, gradient(576, 1024)) }, 288, 512},
		{"square jpeg", "image/jpeg", func() []byte { return jpegBytes(t, gradient(800, 800)) }, 512, 512},
		{"tiny, not scaled up", "image/png", func() []byte { return encodePNG(t, gradient(8, 5)) }, 8, 5},
		{"one pixel wide", "image/png", func() []byte { return encodePNG(t, gradient(1, 3000)) }, 1, 512},
		{"gif video, first frame", "image/gif", func() []byte { return twoFrameGIF(t, 640, 360) }, 512, 288},
		// Noise is JPEG's worst case (52-56 KB at a low quality step; if
		// no step fits, the size gives way: the bound holds).
		{"noisy worst case", "image/png", func() []byte { return encodePNG(t, noise(800, 700)) }, 0, 0},
		{"noise at full size", "image/png", func() []byte { return encodePNG(t, noise(512, 512)) }, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Make(bytes.NewReader(c.data()), c.mime)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Data) > MaxBytes || len(p.Data) == 0 {
				t.Fatalf("%d bytes, cap %d", len(p.Data), MaxBytes)
			}
			img, err := jpeg.Decode(bytes.NewReader(p.Data))
			if err != nil {
				t.Fatalf("not a JPEG: %v", err)
			}
			b := img.Bounds()
			if b.Dx() != p.Width || b.Dy() != p.Height || max(b.Dx(), b.Dy()) > MaxSide {
				t.Fatalf("%v, reported %dx%d", b, p.Width, p.Height)
			}
			if c.w != 0 && (p.Width != c.w || p.Height != c.h) {
				t.Fatalf("%dx%d, want %dx%d", p.Width, p.Height, c.w, c.h)
			}
			t.Logf("%s: %dx%d, %d bytes", c.name, p.Width, p.Height, len(p.Data))
			if c.mime == "image/gif" {
				r, g, bl, _ := img.At(p.Width/2, p.Height/2).RGBA()
				if r>>8 < 200 || g>>8 > 60 || bl>>8 > 60 {
					t.Fatalf("not the red first frame: %d %d %d", r>>8, g>>8, bl>>8)
				}
			}
		})
	}
}

// pngHeader is a PNG that ends after its header: enough for DecodeConfig.
func pngHeader(w, h uint32) []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
		start := len(b)
		b = append(append(b, typ...), data...)
		b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
	}
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, w), h)
	chunk("IHDR", append(ihdr, 8, 6, 0, 0, 0))
	chunk("IEND", nil)
	return b
}

// TestHugeImageNotDecoded: dimensions above the pixel budget are refused
// from the header, without allocating the pixels.
func TestHugeImageNotDecoded(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Make(bytes.NewReader(pngHeader(60000, 60000)), "image/png")
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooManyPixels) {
		t.Fatalf("err = %v, want ErrTooManyPixels", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("allocated %d bytes for a refused image", d)
	}
}

func TestUnsupported(t *testing.T) {
	for _, m := range []string{"video/mp4", "video/webm", "text/plain"} {
		if _, err := Make(bytes.NewReader([]byte("\x00\x00\x00\x18ftypmp42")), m); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v", m, err)
		}
	}
	if _, err := Make(bytes.NewReader([]byte("not a png")), "image/png"); err == nil {
		t.Error("garbage decoded")
	}
}

// TestTransparentOnWhite: JPEG has no alpha; transparency becomes white.
func TestTransparentOnWhite(t *testing.T) {
	p, err := Make(bytes.NewReader(encodePNG(t, image.NewNRGBA(image.Rect(0, 0, 64, 64)))), "image/png")
	if err != nil {
		t.Fatal(err)
	}
	img, _ := jpeg.Decode(bytes.NewReader(p.Data))
	if r, g, b, _ := img.At(32, 32).RGBA(); r>>8 < 250 || g>>8 < 250 || b>>8 < 250 {
		t.Fatalf("transparent pixel is %d %d %d, want white", r>>8, g>>8, b>>8)
	}
}

// TestShrinksWhenQualityIsNotEnough: when no quality step fits, the
// preview gets fewer pixels rather than break the byte bound.
func TestShrinksWhenQualityIsNotEnough(t *testing.T) {
	saved := qualities
	qualities = []int{100}
	t.Cleanup(func() { qualities = saved })
	p, err := FromImage(noise(512, 512))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Data) > MaxBytes || p.Width >= 512 {
		t.Fatalf("%dx%d, %d bytes", p.Width, p.Height, len(p.Data))
	}
	t.Logf("noise at quality 100: %dx%d, %d bytes", p.Width, p.Height, len(p.Data))
}

func BenchmarkMake(b *testing.B) {
	var buf bytes.Buffer
	_ = png.Encode(&buf, gradient(1024, 1024))
	data := buf.Bytes()
	b.ResetTimer()
	for range b.N {
		if _, err := Make(bytes.NewReader(data), "image/png"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFits: the decode budget counts pixels and the bytes a decoder
// allocates for them: a 16-bit RGBA image fits half the pixels of an
// 8-bit one.
func TestFits(t *testing.T) {
	cases := []struct {
		name string
		cfg  image.Config
		ok   bool
	}{
		{"8-bit RGBA at the pixel budget", image.Config{ColorModel: color.NRGBAModel, Width: 5000, Height: 5000}, true},
		{"8-bit RGBA past it", image.Config{ColorModel: color.NRGBAModel, Width: 5001, Height: 5000}, false},
		{"16-bit RGBA at half", image.Config{ColorModel: color.NRGBA64Model, Width: 5000, Height: 2500}, true},
		{"16-bit RGBA past half", image.Config{ColorModel: color.NRGBA64Model, Width: 5000, Height: 2501}, false},
		{"16-bit gray at the pixel budget", image.Config{ColorModel: color.Gray16Model, Width: 5000, Height: 5000}, true},
		{"the issue's mask", image.Config{ColorModel: color.RGBA64Model, Width: 8192, Height: 4882}, false},
		{"paletted", image.Config{ColorModel: color.Palette{color.Black}, Width: 5000, Height: 5000}, true},
		{"no pixels", image.Config{ColorModel: color.GrayModel}, false},
		{"an unknown model is taken at 8 bytes", image.Config{ColorModel: color.ModelFunc(func(c color.Color) color.Color { return c }), Width: 5000, Height: 2501}, false},
	}
	for _, c := range cases {
		if err := Fits(c.cfg); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrTooManyPixels)) {
			t.Errorf("%s: Fits = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// TestHeader: the header is read, and the reader given back replays it
// before the rest; bytes that only claim to be an image are refused.
func TestHeader(t *testing.T) {
	file := encodePNG(t, image.NewGray(image.Rect(0, 0, 7, 3)))
	cfg, format, all, err := Header(bytes.NewReader(file))
	if err != nil || format != "png" || cfg.Width != 7 || cfg.Height != 3 {
		t.Fatalf("Header = %+v %q %v", cfg, format, err)
	}
	if b, _ := io.ReadAll(all); !bytes.Equal(b, file) {
		t.Fatalf("replayed %d bytes, want the %d of the file", len(b), len(file))
	}
	for name, b := range map[string][]byte{
		"zeros":                       make([]byte, 4096),
		"a PNG signature, then zeros": append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 4096)...),
		"a header of 0×0":             pngHeader(0, 0),
	} {
		if _, _, _, err := Header(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: read as an image", name)
		}
	}
}

// TestCacheKeepsTheLargest: the cache's bound keeps a preview of
// MaxBytes (a value over 1/64 of the bytes bound is not kept) and at
// least 256 of them.
func TestCacheKeepsTheLargest(t *testing.T) {
	c := NewCache()
	if !c.Put("k", make([]byte, MaxBytes)) {
		t.Fatal("a preview of MaxBytes was not kept")
	}
	if s := caches.Previews.Spec(); s.Bytes < 256*MaxBytes || s.Entries < 256 {
		t.Fatalf("bounds %d bytes, %d entries: fewer than 256 previews", s.Bytes, s.Entries)
	}
}
