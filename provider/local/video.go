package local

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"io"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Videos run at 8 frames a second; maxFrames bounds a clip whatever the
// catalog allows.
const (
	fps       = 8
	maxFrames = 64
)

// renderGIF writes an animated GIF for a video spec: a still (the input
// image, or a landscape) with drifting lights that grow from nothing, so
// the first frame is the still itself. Without a last frame the clip
// loops; with one, a wipe crosses from the still to it, left to right,
// and the lights shrink away again, so the clip ends on the last frame
// exactly as given (in the GIF's palette). Every later frame holds only
// the rectangle that changed, its unchanged pixels transparent, which
// keeps a 6 s clip to a few hundred KB.
func renderGIF(ctx context.Context, w io.Writer, s spec) error {
	width, height := frameSize(s.ratio, videoLongSide)
	r := s.rng()
	t := newTheme(r, s.prompt, s.palette(ctx))
	still := coverImage(ctx, s.input, width, height)
	if still == nil { // no input, or one not drawn (see coverImage)
		still = image.NewRGBA(image.Rect(0, 0, width, height))
		paintLandscape(still, r, t)
	}
	ls := newLights(r, t, width, height)
	stills := []*image.RGBA{still}
	s.read(provider.RoleLastFrame, func(data []byte) bool {
		if last := coverImage(ctx, data, width, height); last != nil {
			stills = append(stills, last)
		}
		return false
	})
	pal, bases := quantize(stills, ls.colors)
	base := bases[0]

	n := min(s.duration*fps, maxFrames)
	anim := &gif.GIF{Config: image.Config{ColorModel: pal, Width: width, Height: height}}
	prev, cur := make([]uint8, len(base)), make([]uint8, len(base))
	for i := range n {
		at := float64(i) / float64(n) // a loop: frame n would be frame 0
		if len(bases) == 1 {
			copy(cur, base)
			ls.draw(cur, width, height, at)
		} else {
			at = float64(i) / float64(n-1) // from the first frame to the last
			wipe(cur, bases[0], bases[1], width, int(math.Round(at*float64(width))))
			if i > 0 && i < n-1 {
				ls.draw(cur, width, height, at)
			}
		}
		var frame *image.Paletted
		if i == 0 {
			frame = &image.Paletted{Pix: slices.Clone(cur), Stride: width, Rect: image.Rect(0, 0, width, height), Palette: pal}
		} else {
			frame = delta(prev, cur, width, height, pal)
		}
		anim.Image = append(anim.Image, frame)
		anim.Delay = append(anim.Delay, (i+1)*100/fps-i*100/fps) // 12, 13, 12, ... hundredths
		anim.Disposal = append(anim.Disposal, gif.DisposalNone)
		prev, cur = cur, prev
	}
	return gif.EncodeAll(w, anim)
}

// wipe fills dst with to left of column x and from from it on.
func wipe(dst, from, to []uint8, w, x int) {
	for row := 0; row < len(dst); row += w {
		copy(dst[row:row+x], to[row:row+x])
		copy(dst[row+x:row+w], from[row+x:row+w])
	}
}

// delta is the bounding box of the pixels that differ from prev to cur,
// with the unchanged ones transparent (index 0).
func delta(prev, cur []uint8, w, h int, pal color.Palette) *image.Paletted {
	box := image.Rectangle{Min: image.Pt(w, h)}
	for i := range cur {
		if cur[i] != prev[i] {
			x, y := i%w, i/w
			box.Min.X, box.Min.Y = min(box.Min.X, x), min(box.Min.Y, y)
			box.Max.X, box.Max.Y = max(box.Max.X, x+1), max(box.Max.Y, y+1)
		}
	}
	if box.Empty() {
		box = image.Rect(0, 0, 1, 1) // a GIF frame cannot be empty
	}
	img := image.NewPaletted(box, pal)
	for y := box.Min.Y; y < box.Max.Y; y++ {
		for x := box.Min.X; x < box.Max.X; x++ {
			if i := y*w + x; cur[i] != prev[i] {
				img.Pix[img.PixOffset(x, y)] = cur[i]
			}
		}
	}
	return img
}

// lights are glowing discs drifting across a clip on looping paths.
type lights struct {
	list   []light
	colors []color.Color // halo and core colour pairs, palette indices 1.. in order
}

type light struct {
	x, y, bob, radius, phase float64
	laps, bobs               int   // horizontal passes and vertical swings per loop
	halo                     uint8 // palette index; the core is halo+1
}

func newLights(r *rand.Rand, t theme, w, h int) lights {
	var ls lights
	white := rgb{1, 1, 1}
	for _, a := range t.accents[:3] {
		ls.colors = append(ls.colors, a.lerp(white, 0.35).rgba(), a.lerp(white, 0.85).rgba())
	}
	unit := float64(min(w, h))
	for range 5 + r.IntN(5) {
		ls.list = append(ls.list, light{
			x:      r.Float64() * float64(w),
			y:      float64(h) * (0.1 + 0.8*r.Float64()),
			bob:    float64(h) * (0.02 + 0.06*r.Float64()),
			radius: unit * (0.015 + 0.025*r.Float64()),
			phase:  r.Float64() * 2 * math.Pi,
			laps:   []int{-1, 1, 2}[r.IntN(3)],
			bobs:   1 + r.IntN(3),
			halo:   uint8(1 + 2*r.IntN(3)),
		})
	}
	return ls
}

// draw paints the lights at loop time t (0..1) into indexed pixels. Sizes
// follow sin(πt), so they are zero on the first frame and the loop is
// seamless.
func (ls lights) draw(pix []uint8, w, h int, t float64) {
	grow := math.Sin(math.Pi * t)
	for _, l := range ls.list {
		r := l.radius * grow
		span := float64(w) + 4*l.radius
		x := math.Mod(math.Mod(l.x+float64(l.laps)*t*span, span)+span, span) - 2*l.radius
		y := l.y + l.bob*math.Sin(2*math.Pi*float64(l.bobs)*t+l.phase)
		disc(pix, w, h, x, y, 1.8*r, l.halo)
		disc(pix, w, h, x, y, r, l.halo+1)
	}
}

func disc(pix []uint8, w, h int, cx, cy, r float64, c uint8) {
	for y := max(int(cy-r), 0); y < min(int(cy+r)+1, h); y++ {
		for x := max(int(cx-r), 0); x < min(int(cx+r)+1, w); x++ {
			if dx, dy := float64(x)+0.5-cx, float64(y)+0.5-cy; dx*dx+dy*dy < r*r {
				pix[y*w+x] = c
			}
		}
	}
}

// quantize maps imgs (of one size) onto one palette of index 0
// (transparent), then reserved, then the images' most common colours
// (popularity over a 5-bit per channel histogram, each bucket averaged),
// and returns each image as indices. Index 0 is never a colour of an
// image, so delta frames can use it freely.
func quantize(imgs []*image.RGBA, reserved []color.Color) (color.Palette, [][]uint8) {
	type bucket struct{ n, r, g, b int }
	hist := make([]bucket, 1<<15)
	w, h := imgs[0].Rect.Dx(), imgs[0].Rect.Dy()
	key := func(img *image.RGBA, x, y int) int {
		p := img.Pix[y*img.Stride+4*x:]
		return int(p[0]>>3)<<10 | int(p[1]>>3)<<5 | int(p[2]>>3)
	}
	var used []int
	for _, img := range imgs {
		for y := range h {
			for x := range w {
				k, p := key(img, x, y), img.Pix[y*img.Stride+4*x:]
				if hist[k].n == 0 {
					used = append(used, k)
				}
				hist[k].n++
				hist[k].r, hist[k].g, hist[k].b = hist[k].r+int(p[0]), hist[k].g+int(p[1]), hist[k].b+int(p[2])
			}
		}
	}
	avg := func(k int) color.RGBA {
		b := hist[k]
		return color.RGBA{uint8(b.r / b.n), uint8(b.g / b.n), uint8(b.b / b.n), 255}
	}
	slices.SortFunc(used, func(a, b int) int { return cmp.Or(hist[b].n-hist[a].n, a-b) })

	pal := append(color.Palette{color.RGBA{}}, reserved...)
	first := len(pal)
	for _, k := range used[:min(len(used), 256-first)] {
		pal = append(pal, avg(k))
	}
	own := pal[first:]
	lut := make([]uint8, len(hist)) // 0 means not looked up yet
	outs := make([][]uint8, len(imgs))
	for i, img := range imgs {
		out := make([]uint8, w*h)
		for y := range h {
			for x := range w {
				k := key(img, x, y)
				if lut[k] == 0 {
					lut[k] = uint8(first + own.Index(avg(k)))
				}
				out[y*w+x] = lut[k]
			}
		}
		outs[i] = out
	}
	return pal, outs
}

// encodeMP4 converts the GIF at src into an H.264 (or the build's default)
// MP4 on w. It is fragmented because a pipe cannot seek back to write the
// index; bitexact keeps version strings out so reruns match.
func encodeMP4(ctx context.Context, ffmpeg, src string, w io.Writer) error {
	cmd := exec.CommandContext(ctx, ffmpeg, "-nostdin", "-loglevel", "error", "-i", src,
		"-an", "-pix_fmt", "yuv420p", "-map_metadata", "-1", "-fflags", "+bitexact", "-flags:v", "+bitexact",
		"-movflags", "frag_keyframe+empty_moov+default_base_moof", "-f", "mp4", "pipe:1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ffmpeg: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
