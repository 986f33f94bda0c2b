package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	_ "image/gif"  // input images
	_ "image/jpeg" // input images
	"io"

	"github.com/darkroom-mcp/darkroom/provider"
	_ "golang.org/x/image/webp" // input images
	"golang.org/x/sync/semaphore"
)

// Limits on an input image, checked at submit from its header.
const (
	maxInputBytes  = 32 << 20
	maxInputSide   = 8192
	maxInputPixels = 40_000_000
)

// decodeBudget bounds the memory that whole-image decodes (JPEG, GIF) of
// all jobs hold at once; a decode that alone would need more is not made.
// A PNG never takes from it: it is decoded a row at a time.
const decodeBudget = 128 << 20

var decodeSem = semaphore.NewWeighted(decodeBudget)

// readInput reads and checks an input image (PNG, JPEG, GIF or WebP).
func readInput(ctx context.Context, in *provider.Input) ([]byte, error) {
	if in.Open == nil {
		return nil, fmt.Errorf("local: input image %q has no Open", in.URL)
	}
	rc, err := in.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxInputBytes {
		return nil, &provider.PermanentError{Message: fmt.Sprintf("the input image is larger than %d MiB", maxInputBytes>>20)}
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, &provider.PermanentError{Message: "the input image is not a PNG, JPEG, GIF or WebP file"}
	}
	if !usableSize(cfg) {
		return nil, &provider.PermanentError{Message: fmt.Sprintf("the input image has %d×%d pixels; the limit is %d a side and %d million",
			cfg.Width, cfg.Height, maxInputSide, maxInputPixels/1_000_000)}
	}
	return data, nil
}

func usableSize(cfg image.Config) bool {
	return cfg.Width > 0 && cfg.Height > 0 && cfg.Width <= maxInputSide && cfg.Height <= maxInputSide &&
		int64(cfg.Width)*int64(cfg.Height) <= maxInputPixels
}

// coverImage decodes an input image and scales it to cover w×h, cropping
// the overflow evenly; it is 8-bit and w×h whatever the input. Memory is
// bounded: a PNG (8 or 16 bits) is decoded a row at a time into the
// output's samples; a JPEG, GIF or WebP is decoded whole within
// decodeBudget. It returns nil when there is no input, or one it does not
// draw (one over the limits, a JPEG needing more than decodeBudget, a
// broken file).
func coverImage(ctx context.Context, data []byte, w, h int) *image.RGBA {
	if len(data) == 0 {
		return nil
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || !usableSize(cfg) {
		return nil
	}
	switch format {
	case "png":
		c := newCover(cfg.Width, cfg.Height, w, h)
		if decodePNG(data, c) != nil {
			return nil
		}
		return c.image()
	case "jpeg", "gif", "webp":
		cost := wholeDecodeCost(format, data, cfg)
		if cost > decodeBudget || decodeSem.Acquire(ctx, cost) != nil {
			return nil
		}
		defer decodeSem.Release(cost)
		src, _, err := image.Decode(bytes.NewReader(data))
		if err != nil {
			return nil
		}
		return sampleImage(src, w, h)
	}
	return nil
}

// wholeDecodeCost is an upper bound on what image.Decode allocates for the
// image: a baseline JPEG holds up to a byte per pixel and component, a
// progressive one also every coefficient (an int32 per pixel and
// component); a GIF holds a frame of a byte per pixel; a WebP an NRGBA
// image (lossless) or YCbCr and alpha planes (lossy), at most 4 bytes.
func wholeDecodeCost(format string, data []byte, cfg image.Config) int64 {
	px := int64(cfg.Width+16) * int64(cfg.Height+16) // MCU padding
	switch format {
	case "gif":
		return 2 * px
	case "webp":
		return 4 * px
	}
	comps, progressive := jpegFrame(data)
	if progressive {
		return px * comps * 5
	}
	return px * comps
}

// jpegFrame reads the component count and whether the coding is
// progressive from the frame header; unreadable, it assumes the worst.
func jpegFrame(data []byte) (comps int64, progressive bool) {
	for i := 2; i+4 <= len(data); {
		if data[i] != 0xff {
			break
		}
		m := data[i+1]
		switch {
		case m == 0xff:
			i++
			continue
		case m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
			if i+10 > len(data) {
				return 4, true
			}
			return max(int64(data[i+9]), 1), m == 0xc2 || m == 0xc6 || m == 0xca || m == 0xce
		case m == 0xd8 || (m >= 0xd0 && m <= 0xd7) || m == 0x01:
			i += 2
			continue
		}
		i += 2 + int(binary.BigEndian.Uint16(data[i+2:]))
	}
	return 4, true
}

// coverGrid maps output samples to source pixels: each output pixel is
// the mean of 2×2 point samples, taken at (x+¼, y+¼) … (x+¾, y+¾) of the
// output grid scaled to cover the source and centred. Sample k's source
// column is at[k]; first[c] is the first sample at column c or after.
type coverGrid struct {
	at    []int
	first []int32
}

func newCoverGrid(out, src int, o, s float64) coverGrid {
	g := coverGrid{at: make([]int, 2*out), first: make([]int32, src+1)}
	for k := range g.at {
		d := 0.25
		if k%2 == 1 {
			d = 0.75
		}
		g.at[k] = min(max(int(o+(float64(k/2)+d)/s), 0), src-1)
	}
	k := 0
	for c := range g.first {
		for k < len(g.at) && g.at[k] < c {
			k++
		}
		g.first[c] = int32(k)
	}
	return g
}

// samples returns the range of samples taken at source column c.
func (g coverGrid) samples(c int) (int, int) { return int(g.first[c]), int(g.first[c+1]) }

func coverScale(srcW, srcH, w, h int) (s, ox, oy float64) {
	s = max(float64(w)/float64(srcW), float64(h)/float64(srcH)) // output pixels per source pixel
	ox = (float64(srcW) - float64(w)/s) / 2
	oy = (float64(srcH) - float64(h)/s) / 2
	return s, ox, oy
}

// cover accumulates the samples of a source image whose pixels arrive in
// any order (row by row, or Adam7 passes). Its memory is the output's and
// two integers per source column and row.
type cover struct {
	w, h       int
	cols, rows coverGrid
	sum        []uint32 // r, g, b per output pixel: four 16-bit samples
}

func newCover(srcW, srcH, w, h int) *cover {
	s, ox, oy := coverScale(srcW, srcH, w, h)
	return &cover{w: w, h: h, cols: newCoverGrid(w, srcW, ox, s), rows: newCoverGrid(h, srcH, oy, s), sum: make([]uint32, 3*w*h)}
}

// wantRow reports whether any sample falls in source row y.
func (c *cover) wantRow(y int) bool { l0, l1 := c.rows.samples(y); return l0 < l1 }

// wantCol reports whether any sample falls in source column x.
func (c *cover) wantCol(x int) bool { k0, k1 := c.cols.samples(x); return k0 < k1 }

// put adds source pixel (x, y), as color.Color.RGBA returns it.
func (c *cover) put(x, y int, r, g, b uint32) {
	k0, k1 := c.cols.samples(x)
	l0, l1 := c.rows.samples(y)
	for l := l0; l < l1; l++ {
		row := (l / 2) * c.w
		for k := k0; k < k1; k++ {
			i := 3 * (row + k/2)
			c.sum[i] += r
			c.sum[i+1] += g
			c.sum[i+2] += b
		}
	}
}

// image is the output; a transparent input lands on black.
func (c *cover) image() *image.RGBA {
	dst := image.NewRGBA(image.Rect(0, 0, c.w, c.h))
	for i := range c.w * c.h {
		dst.Pix[4*i], dst.Pix[4*i+1], dst.Pix[4*i+2], dst.Pix[4*i+3] = uint8(c.sum[3*i]>>10), uint8(c.sum[3*i+1]>>10), uint8(c.sum[3*i+2]>>10), 255
	}
	return dst
}

// sampleImage takes the same samples as cover from a decoded image.
func sampleImage(src image.Image, w, h int) *image.RGBA {
	b := src.Bounds()
	s, ox, oy := coverScale(b.Dx(), b.Dy(), w, h)
	cols, rows := newCoverGrid(w, b.Dx(), ox, s), newCoverGrid(h, b.Dy(), oy, s)
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			var sum [3]uint32
			for _, d := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}} {
				r, g, bl, _ := src.At(b.Min.X+cols.at[2*x+d[0]], b.Min.Y+rows.at[2*y+d[1]]).RGBA()
				sum[0], sum[1], sum[2] = sum[0]+r, sum[1]+g, sum[2]+bl
			}
			setPix(dst.Pix, y*dst.Stride+4*x, color.RGBA{uint8(sum[0] >> 10), uint8(sum[1] >> 10), uint8(sum[2] >> 10), 255})
		}
	}
	return dst
}
