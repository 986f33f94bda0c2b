package local

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"testing"
)

// webpHeader is a lossless WebP that ends after its header: enough for
// image.DecodeConfig.
func webpHeader(w, h uint32) []byte {
	chunk := append([]byte{0x2f}, binary.LittleEndian.AppendUint32(nil, (w-1)|(h-1)<<14)...)
	b := binary.LittleEndian.AppendUint32([]byte("RIFF"), uint32(4+8+len(chunk)+1))
	b = binary.LittleEndian.AppendUint32(append(b, "WEBPVP8L"...), uint32(len(chunk)))
	return append(append(b, chunk...), 0) // padded to even
}

// pngChunk appends one PNG chunk.
func pngChunk(b []byte, typ string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	start := len(b)
	b = append(append(b, typ...), data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

func ihdr(w, h uint32, depth, colorType, interlace byte) []byte {
	return append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, w), h), depth, colorType, 0, 0, interlace)
}

// pngHeader is a PNG that ends after its header.
func pngHeader(w, h uint32, depth, colorType byte) []byte {
	b := pngChunk([]byte("\x89PNG\r\n\x1a\n"), "IHDR", ihdr(w, h, depth, colorType, 0))
	return pngChunk(b, "IEND", nil)
}

// referenceCover is coverImage as it was before decoding was bounded: a
// whole decode, then the samples. The bounded decoders must draw the same.
func referenceCover(data []byte, w, h int) *image.RGBA {
	if len(data) == 0 {
		return nil
	}
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	b := src.Bounds()
	s := max(float64(w)/float64(b.Dx()), float64(h)/float64(b.Dy())) // output pixels per source pixel
	ox := float64(b.Min.X) + (float64(b.Dx())-float64(w)/s)/2
	oy := float64(b.Min.Y) + (float64(b.Dy())-float64(h)/s)/2
	sample := func(v, o float64, lo, hi int) int { return min(max(int(o+v/s), lo), hi-1) }
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			// 2×2 samples per pixel soften a large downscale; a
			// transparent input lands on black.
			var sum [3]uint32
			for _, d := range [][2]float64{{0.25, 0.25}, {0.75, 0.25}, {0.25, 0.75}, {0.75, 0.75}} {
				r, g, bl, _ := src.At(sample(float64(x)+d[0], ox, b.Min.X, b.Max.X), sample(float64(y)+d[1], oy, b.Min.Y, b.Max.Y)).RGBA()
				sum[0], sum[1], sum[2] = sum[0]+r, sum[1]+g, sum[2]+bl
			}
			setPix(dst.Pix, y*dst.Stride+4*x, color.RGBA{uint8(sum[0] >> 10), uint8(sum[1] >> 10), uint8(sum[2] >> 10), 255})
		}
	}
	return dst
}

// randomPNG is a valid PNG of random filtered rows: every filter type,
// any colour type and depth, optionally Adam7-interlaced, the pixel data
// split over two IDAT chunks.
func randomPNG(r *rand.Rand, w, h int, depth, ct, interlace byte, plte, trns []byte) []byte {
	channels := map[byte]int{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ct]
	bits := int(depth) * channels
	var raw bytes.Buffer
	passes := [][4]int{{0, 0, 1, 1}}
	if interlace == 1 {
		passes = adam7[:]
	}
	for _, p := range passes {
		pw, ph := (w-p[0]+p[2]-1)/p[2], (h-p[1]+p[3]-1)/p[3]
		if pw == 0 || ph == 0 {
			continue
		}
		for range ph {
			raw.WriteByte(byte(r.IntN(5)))
			for range (bits*pw + 7) / 8 {
				raw.WriteByte(byte(r.Uint32()))
			}
		}
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw.Bytes())
	zw.Close()
	b := pngChunk([]byte("\x89PNG\r\n\x1a\n"), "IHDR", ihdr(uint32(w), uint32(h), depth, ct, interlace))
	if plte != nil {
		b = pngChunk(b, "PLTE", plte)
	}
	if trns != nil {
		b = pngChunk(b, "tRNS", trns)
	}
	half := z.Len() / 2
	b = pngChunk(b, "IDAT", z.Bytes()[:half])
	b = pngChunk(b, "IDAT", z.Bytes()[half:])
	return pngChunk(b, "IEND", nil)
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestCoverPNGMatchesWholeDecode: the row-at-a-time PNG decoder draws
// exactly what a whole image/png decode drew, for every colour type and
// depth, with and without tRNS and interlacing, down- and upscaled.
func TestCoverPNGMatchesWholeDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type kind struct {
		depth, ct  byte
		plte, trns int // entries; -1 none
	}
	kinds := []kind{
		{1, 0, -1, -1}, {2, 0, -1, -1}, {4, 0, -1, -1}, {8, 0, -1, -1}, {16, 0, -1, -1},
		{1, 0, -1, 2}, {2, 0, -1, 2}, {4, 0, -1, 2}, {8, 0, -1, 2}, {16, 0, -1, 2},
		{8, 2, -1, -1}, {16, 2, -1, -1}, {8, 2, -1, 6}, {16, 2, -1, 6}, {8, 2, 5, -1},
		{1, 3, 2, -1}, {2, 3, 3, 1}, {4, 3, 16, 7}, {8, 3, 200, 256}, {8, 3, 256, -1},
		{8, 4, -1, -1}, {16, 4, -1, -1}, {8, 6, -1, -1}, {16, 6, -1, -1},
	}
	sizes := [][2]int{{37, 23}, {150, 101}, {3, 200}, {1, 1}}
	outs := [][2]int{{96, 54}, {54, 96}, {160, 68}}
	for _, k := range kinds {
		for _, il := range []byte{0, 1} {
			for _, sz := range sizes {
				var plte, trns []byte
				if k.plte >= 0 {
					plte = randomBytes(r, 3*k.plte)
				}
				switch {
				case k.trns == 2 && k.ct == 0:
					trns = []byte{0, byte(r.IntN(1 << min(k.depth, 8)))}
				case k.trns >= 0:
					trns = randomBytes(r, k.trns)
				}
				data := randomPNG(r, sz[0], sz[1], k.depth, k.ct, il, plte, trns)
				if _, err := png.Decode(bytes.NewReader(data)); err != nil {
					t.Fatalf("test image %+v: %v", k, err)
				}
				{
					o := outs[r.IntN(len(outs))]
					name := fmt.Sprintf("depth%d-type%d-plte%d-trns%d-interlace%d-%dx%d-to-%dx%d", k.depth, k.ct, k.plte, k.trns, il, sz[0], sz[1], o[0], o[1])
					want := referenceCover(data, o[0], o[1])
					got := coverImage(context.Background(), data, o[0], o[1])
					if want == nil || got == nil || !bytes.Equal(got.Pix, want.Pix) {
						t.Errorf("%s: the bounded decode draws differently", name)
					}
				}
			}
		}
	}
}

// TestCoverWholeDecodesMatch: JPEG and GIF, decoded whole within the
// budget, are sampled as before.
func TestCoverWholeDecodesMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := image.NewRGBA(image.Rect(0, 0, 133, 217))
	for i := range src.Pix {
		src.Pix[i] = byte(r.Uint32())
	}
	var j, g bytes.Buffer
	if err := jpeg.Encode(&j, src, nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&g, src, nil); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"jpeg": j.Bytes(), "gif": g.Bytes()} {
		want := referenceCover(data, 480, 270)
		got := coverImage(context.Background(), data, 480, 270)
		if want == nil || got == nil || !bytes.Equal(got.Pix, want.Pix) {
			t.Errorf("%s: drawn differently", name)
		}
	}
	if comps, prog := jpegFrame(j.Bytes()); comps != 3 || prog {
		t.Errorf("jpegFrame = %d components, progressive %v; want 3, false", comps, prog)
	}
}

// TestCoverRefusesOverBudget: a JPEG whose whole decode would need more
// than the budget is not drawn, and takes nothing from it.
func TestCoverRefusesOverBudget(t *testing.T) {
	// A baseline 3-component frame header of 8000×5000 (120 MB) fits; a
	// progressive one (600 MB) does not.
	frame := func(marker byte) []byte {
		return []byte{0xff, 0xd8, 0xff, marker, 0, 17, 8, 0x13, 0x88, 0x1f, 0x40, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1}
	}
	cfg := image.Config{Width: 8000, Height: 5000}
	if c := wholeDecodeCost("jpeg", frame(0xc0), cfg); c > decodeBudget {
		t.Errorf("baseline 8000×5000 costs %d MiB, over the budget", c>>20)
	}
	if c := wholeDecodeCost("jpeg", frame(0xc2), cfg); c <= decodeBudget {
		t.Errorf("progressive 8000×5000 costs %d MiB, within the budget", c>>20)
	}
	if got := coverImage(context.Background(), frame(0xc2), 480, 270); got != nil {
		t.Error("an over-budget JPEG was drawn")
	}
	if !decodeSem.TryAcquire(decodeBudget) {
		t.Fatal("the budget is not whole")
	}
	decodeSem.Release(decodeBudget)
}
