package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/darkroom-mcp/darkroom/provider"
)

// spec is everything that decides an output's bytes, and nothing else.
type spec struct {
	model, prompt, negative, ratio string
	seed                           int64
	duration                       int
	input                          []byte
	// extras are read from disk only when drawn, one at a time, so a
	// spec never holds more than the main input's bytes.
	extras []specInput
	index  int // which output of the job: names the file, not the pixels
}

// specInput is one extra input: its role, where its bytes are, and their
// SHA-256 (which is what seeds the output).
type specInput struct{ role, path, sum string }

// read returns the bytes of the extras of role, one at a time, stopping
// at the first fn that returns false. An unreadable file is skipped: its
// header was checked at submit.
func (s spec) read(role string, fn func([]byte) bool) {
	for _, e := range s.extras {
		if e.role != role {
			continue
		}
		data, err := os.ReadFile(e.path)
		if err == nil && !fn(data) {
			return
		}
	}
}

// rng is the generator for s: PCG seeded from a SHA-256 of every field,
// each length-prefixed so no two specs share a seed by concatenation.
func (s spec) rng() *rand.Rand {
	h := sha256.New()
	var n [8]byte
	for _, f := range [][]byte{[]byte(s.model), []byte(s.prompt), []byte(s.negative), []byte(s.ratio), s.input} {
		binary.LittleEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write(f)
	}
	binary.LittleEndian.PutUint64(n[:], uint64(s.seed))
	h.Write(n[:])
	binary.LittleEndian.PutUint64(n[:], uint64(s.duration))
	h.Write(n[:])
	// Only after every older field, so a job without extras renders as
	// it did before they existed.
	for _, e := range s.extras {
		for _, f := range []string{e.role, e.sum} {
			binary.LittleEndian.PutUint64(n[:], uint64(len(f)))
			h.Write(n[:])
			h.Write([]byte(f))
		}
	}
	sum := h.Sum(nil)
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum), binary.LittleEndian.Uint64(sum[8:])))
}

// render writes output s.index for s into dir and returns its file name
// and MIME type. Videos are GIF unless ffmpeg is given and converts them.
func render(ctx context.Context, s spec, dir, ffmpeg string) (name, mime string, err error) {
	write := func(name string, fn func(io.Writer) error) error {
		return writeFile(filepath.Join(dir, name), false, fn)
	}
	stem := strconv.Itoa(s.index)
	if m, _ := lookup(s.model); m.Kind == provider.KindImage {
		return stem + ".png", "image/png", write(stem+".png", func(w io.Writer) error { return renderImage(ctx, w, s) })
	}
	if err := write(stem+".gif", func(w io.Writer) error { return renderGIF(ctx, w, s) }); err != nil {
		return "", "", err
	}
	if ffmpeg == "" {
		return stem + ".gif", "image/gif", nil
	}
	gif := filepath.Join(dir, stem+".gif")
	if err := write(stem+".mp4", func(w io.Writer) error { return encodeMP4(ctx, ffmpeg, gif, w) }); err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return stem + ".gif", "image/gif", nil // a broken ffmpeg still leaves a true GIF
	}
	os.Remove(gif)
	return stem + ".mp4", "video/mp4", nil
}

// renderImage writes the PNG for an image spec: a hatched-shapes sketch or
// a landscape, or, given a main image, an edit of it (edit.go).
func renderImage(ctx context.Context, w io.Writer, s spec) error {
	if len(s.input) > 0 {
		return renderEdit(ctx, w, s)
	}
	width, height := frameSize(s.ratio, imageLongSide)
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	r := s.rng()
	t := newTheme(r, s.prompt, s.palette(ctx))
	if s.model == "local-sketch" {
		paintSketch(img, r, t)
	} else {
		paintLandscape(img, r, t)
	}
	return pngEncoder.Encode(w, img) // opaque: 8-bit RGB
}

// pngEncoder deflates at BestSpeed: encoding is much of a render, and
// flat shapes and gradients compress well even so.
var pngEncoder = png.Encoder{CompressionLevel: png.BestSpeed}

// rgb is a colour with channels in 0..1.
type rgb struct{ r, g, b float64 }

func hsl(h, s, l float64) rgb {
	h = math.Mod(math.Mod(h, 360)+360, 360) / 60
	c := (1 - math.Abs(2*l-1)) * s
	x := c * (1 - math.Abs(math.Mod(h, 2)-1))
	var v rgb
	switch int(h) {
	case 0:
		v = rgb{c, x, 0}
	case 1:
		v = rgb{x, c, 0}
	case 2:
		v = rgb{0, c, x}
	case 3:
		v = rgb{0, x, c}
	case 4:
		v = rgb{x, 0, c}
	default:
		v = rgb{c, 0, x}
	}
	m := l - c/2
	return rgb{v.r + m, v.g + m, v.b + m}
}

func (c rgb) lerp(d rgb, t float64) rgb {
	return rgb{c.r + (d.r-c.r)*t, c.g + (d.g-c.g)*t, c.b + (d.b-c.b)*t}
}

func (c rgb) scale(f float64) rgb { return rgb{c.r * f, c.g * f, c.b * f} }

func (c rgb) rgba() color.RGBA {
	b := func(v float64) uint8 { return uint8(math.Round(255 * min(max(v, 0), 1))) }
	return color.RGBA{b(c.r), b(c.g), b(c.b), 255}
}

// theme is the colour scheme of one picture.
type theme struct {
	skyTop, skyLow, sun, land, paper, ink rgb
	night                                 bool
	accents                               []rgb
}

// Words in the prompt pick the hue or the time of day, so "a blue night
// harbour" looks blue and dark.
var (
	hueWords = map[string]float64{
		"red": 0, "fire": 10, "sunset": 20, "orange": 30, "autumn": 30, "desert": 40, "gold": 45,
		"yellow": 55, "spring": 95, "green": 120, "forest": 130, "teal": 175, "ice": 195,
		"ocean": 205, "sea": 205, "winter": 205, "blue": 220, "violet": 270, "purple": 280,
		"pink": 330, "rose": 345,
	}
	nightWords = map[string]bool{"night": true, "moon": true, "stars": true, "midnight": true, "dark": true}
)

// newTheme picks a picture's colours. Reference colours (refs), when
// given, decide them, whatever the prompt says; the generator is drawn
// from the same either way.
func newTheme(r *rand.Rand, prompt string, refs []rgb) theme {
	hue := r.Float64() * 360
	night := r.Float64() < 0.15
	hueSet := false
	if len(refs) > 0 {
		hue, hueSet = refs[0].hue(), true
	}
	for _, w := range strings.FieldsFunc(strings.ToLower(prompt), func(c rune) bool { return !unicode.IsLetter(c) }) {
		if h, ok := hueWords[w]; ok && !hueSet {
			hue, hueSet = h, true
		}
		night = night || nightWords[w]
	}
	h2 := hue + []float64{30, 150, 200}[r.IntN(3)] // analogous, split or complementary
	t := theme{
		skyTop: hsl(hue, 0.55, 0.32),
		skyLow: hsl(h2, 0.65, 0.8),
		sun:    hsl(h2+15, 0.95, 0.9),
		land:   hsl(hue+20, 0.35, 0.2),
		paper:  hsl(hue, 0.35, 0.94),
		ink:    hsl(h2, 0.45, 0.13),
		night:  night,
	}
	if night {
		t.skyTop, t.skyLow, t.sun, t.land = hsl(hue, 0.5, 0.06), hsl(hue, 0.45, 0.26), hsl(h2, 0.25, 0.92), hsl(hue, 0.3, 0.08)
	}
	for i := range 5 {
		h := hue + float64(i)*[]float64{25, 40, 72}[r.IntN(3)] + r.Float64()*20
		t.accents = append(t.accents, hsl(h, 0.55+0.3*r.Float64(), 0.45+0.25*r.Float64()))
	}
	if len(refs) > 0 {
		// The references' own colours, not only their hue: the first
		// makes the sky, sun and paper, the second the haze, the last the
		// land, and each is an accent.
		first, second, last := refs[0], refs[min(1, len(refs)-1)], refs[len(refs)-1]
		white := rgb{1, 1, 1}
		t.skyTop, t.skyLow, t.sun, t.land = first.scale(0.75), second.lerp(white, 0.45), first.lerp(white, 0.85), last.scale(0.45)
		t.paper, t.ink = first.lerp(white, 0.85), first.scale(0.25)
		if night {
			t.skyTop, t.skyLow, t.land = first.scale(0.15), second.scale(0.45), last.scale(0.12)
		}
		for i := range t.accents {
			t.accents[i] = refs[i%len(refs)]
		}
	}
	return t
}

// hue is c's hue in degrees (0 for a grey).
func (c rgb) hue() float64 {
	hi, lo := max(c.r, c.g, c.b), min(c.r, c.g, c.b)
	d := hi - lo
	var h float64
	switch {
	case d == 0:
		return 0
	case hi == c.r:
		h = math.Mod((c.g-c.b)/d, 6)
	case hi == c.g:
		h = (c.b-c.r)/d + 2
	default:
		h = (c.r-c.g)/d + 4
	}
	return math.Mod(h*60+360, 360)
}

// palette is the average colour of each reference image, in order; a
// reference that cannot be drawn adds none.
func (s spec) palette(ctx context.Context) []rgb {
	var refs []rgb
	s.read(provider.RoleReference, func(data []byte) bool {
		if c, ok := averageColor(ctx, data); ok {
			refs = append(refs, c)
		}
		return true
	})
	return refs
}

// averageColor is the mean colour of an image, from a small cover of it
// with its own shape (so little is cropped and little memory is used).
func averageColor(ctx context.Context, data []byte) (rgb, bool) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || !usableSize(cfg) {
		return rgb{}, false
	}
	w, h := fitSize(cfg.Width, cfg.Height, 32)
	img := coverImage(ctx, data, w, h)
	if img == nil {
		return rgb{}, false
	}
	var sum [3]int
	for i := 0; i < len(img.Pix); i += 4 {
		sum[0], sum[1], sum[2] = sum[0]+int(img.Pix[i]), sum[1]+int(img.Pix[i+1]), sum[2]+int(img.Pix[i+2])
	}
	n := float64(255 * w * h)
	return rgb{float64(sum[0]) / n, float64(sum[1]) / n, float64(sum[2]) / n}, true
}

// setPix stores c at byte offset i of an RGBA buffer.
func setPix(pix []uint8, i int, c color.RGBA) {
	p := pix[i : i+4 : i+4]
	p[0], p[1], p[2], p[3] = c.R, c.G, c.B, 255
}

// fillRow sets every pixel of an RGBA row to c, doubling copies.
func fillRow(row []uint8, c color.RGBA) {
	setPix(row, 0, c)
	for n := 4; n < len(row); n *= 2 {
		copy(row[n:], row[:n])
	}
}

// blendPix mixes c over the pixel at byte offset i with alpha a (0..256).
func blendPix(pix []uint8, i int, c color.RGBA, a int) {
	mix := func(d, s uint8) uint8 { return uint8((int(s)*a + int(d)*(256-a)) >> 8) }
	p := pix[i : i+3 : i+3]
	p[0], p[1], p[2] = mix(p[0], c.R), mix(p[1], c.G), mix(p[2], c.B)
}

// paintLandscape draws a sky gradient with a glowing sun (or moon and
// stars), layered hills fading into the haze, and a vignette.
func paintLandscape(img *image.RGBA, r *rand.Rand, t theme) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	fw, fh := float64(w), float64(h)
	horizon := fh * (0.5 + 0.2*r.Float64())
	sunX, sunY := fw*(0.15+0.7*r.Float64()), horizon*(0.3+0.45*r.Float64())
	sunR := math.Min(fw, fh) * (0.035 + 0.045*r.Float64())
	glowR := sunR * 5
	sun := t.sun.rgba()

	for y := range h {
		c := t.skyTop.lerp(t.skyLow, math.Pow(min(float64(y)/horizon, 1), 0.8))
		row := y * img.Stride
		fillRow(img.Pix[row:row+4*w], c.rgba())
		// Only the span inside the glow needs per-pixel work.
		dy := float64(y) + 0.5 - sunY
		if math.Abs(dy) >= glowR {
			continue
		}
		half := math.Sqrt(glowR*glowR - dy*dy)
		for x := max(int(sunX-half), 0); x < min(int(sunX+half)+1, w); x++ {
			dx := float64(x) + 0.5 - sunX
			d := math.Sqrt(dx*dx + dy*dy)
			g := max(1-d/glowR, 0)
			cover := min(max(sunR+0.5-d, 0), 1) // anti-aliased disc edge
			blendPix(img.Pix, row+4*x, sun, int(256*max(cover, 0.55*g*g*g)))
		}
	}
	if t.night {
		for range w * h / 2500 {
			x, y := r.IntN(w), r.IntN(int(horizon))
			blendPix(img.Pix, y*img.Stride+4*x, sun, 80+r.IntN(176))
		}
	}

	layers := 3 + r.IntN(2)
	shade, ridge := make([]color.RGBA, h), make([]float64, w)
	for l := range layers {
		depth := float64(l+1) / float64(layers) // 0 far .. 1 near
		base := horizon + (fh-horizon)*0.6*float64(l)/float64(layers)
		amp := fh * (0.06 + 0.12*(1-depth)*r.Float64() + 0.04)
		col := t.skyLow.lerp(t.land, 0.3+0.7*depth) // aerial perspective
		for y := range shade {
			shade[y] = col.scale(1 - 0.35*min(max((float64(y)-base)/(fh-base+1), 0), 1)).rgba()
		}
		var freq, phase [3]float64
		for k := range freq {
			freq[k] = 2 * math.Pi / fw * float64(k*k+1) * (1 + 1.5*r.Float64()) * (1 + depth)
			phase[k] = r.Float64() * 2 * math.Pi
		}
		top, bottom := h, 0
		for x := range ridge {
			ridge[x] = base
			for k := range freq {
				ridge[x] -= amp / float64(k+1) * (0.5 + 0.5*math.Sin(freq[k]*float64(x)+phase[k]))
			}
			top, bottom = min(top, int(ridge[x])), max(bottom, int(ridge[x])+1)
		}
		for y := max(top, 0); y < h; y++ {
			row := img.Pix[y*img.Stride : y*img.Stride+4*w]
			if y >= bottom {
				fillRow(row, shade[y])
				continue
			}
			for x, rx := range ridge {
				switch cover := float64(y+1) - rx; { // of this pixel, by the hill
				case cover >= 1:
					setPix(row, 4*x, shade[y])
				case cover > 0: // anti-aliased ridge
					blendPix(row, 4*x, shade[y], int(256*cover))
				}
			}
		}
	}
	vignette(img, 0.3)
}

// vignette darkens the corners by up to strength.
func vignette(img *image.RGBA, strength float64) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	fall := func(i, n int) float64 { d := (float64(i)+0.5)/float64(n)*2 - 1; return d * d / 2 }
	col := make([]float64, w)
	for x := range col {
		col[x] = fall(x, w)
	}
	for y := range h {
		fy := fall(y, h)
		row := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x, fx := range col {
			f := int(256 * (1 - strength*(fx+fy)))
			p := row[4*x : 4*x+3 : 4*x+3]
			p[0], p[1], p[2] = uint8(int(p[0])*f>>8), uint8(int(p[1])*f>>8), uint8(int(p[2])*f>>8)
		}
	}
}

// paintSketch draws circles and polygons in ink outline, some hatched, on a
// tinted paper.
func paintSketch(img *image.RGBA, r *rand.Rand, t theme) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	var ramp [256]color.RGBA // paper, darkening towards the bottom right
	for i := range ramp {
		ramp[i] = t.paper.lerp(t.paper.scale(0.85), float64(i)/255).rgba()
	}
	col := make([]int, w)
	for x := range col {
		col[x] = x * 255 / w
	}
	for y := range h {
		ry := y * 255 / h
		for x, rx := range col {
			setPix(img.Pix, y*img.Stride+4*x, ramp[(rx+ry)/2])
		}
	}

	ink := t.ink.rgba()
	unit := float64(min(w, h))
	inkW := math.Max(2, unit/300)
	for range 6 + r.IntN(6) {
		cx, cy := r.Float64()*float64(w), r.Float64()*float64(h)
		size := unit * (0.06 + 0.16*r.Float64())
		fill := t.accents[r.IntN(len(t.accents))]
		solid, hatched := fill.rgba(), fill.scale(0.7).rgba()
		hatch := r.IntN(3) - 1 // -1, 0 (none) or 1: the hatching direction
		dist := shape(r, cx, cy, size)
		x0, x1 := max(int(cx-size*1.2), 0), min(int(cx+size*1.2)+1, w)
		y0, y1 := max(int(cy-size*1.2), 0), min(int(cy+size*1.2)+1, h)
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				d := dist(float64(x)+0.5, float64(y)+0.5)
				i := y*img.Stride + 4*x
				switch {
				case d > 1:
				case d > 0: // anti-aliased outer edge of the ink
					blendPix(img.Pix, i, ink, int(256*(1-d)))
				case d > -inkW:
					setPix(img.Pix, i, ink)
				case hatch != 0 && ((x+hatch*y)%12+12)%12 < 2:
					setPix(img.Pix, i, hatched)
				default:
					blendPix(img.Pix, i, solid, 228)
				}
			}
		}
	}
}

// shape returns the signed distance function (negative inside) of a random
// circle or polygon of about the given radius around (cx, cy).
func shape(r *rand.Rand, cx, cy, size float64) func(x, y float64) float64 {
	sides := []int{0, 3, 4, 5, 6}[r.IntN(5)]
	if sides == 0 {
		return func(x, y float64) float64 { return math.Sqrt((x-cx)*(x-cx)+(y-cy)*(y-cy)) - size }
	}
	// A polygon is the intersection of its edges' half-planes: the
	// distance is the largest signed distance to any edge line.
	type edge struct{ nx, ny, c float64 }
	edges := make([]edge, sides)
	rot := r.Float64() * 2 * math.Pi
	vertex := func(i int) (float64, float64) {
		a := rot + 2*math.Pi*float64(i%sides)/float64(sides)
		return cx + size*math.Cos(a), cy + size*math.Sin(a)
	}
	for i := range edges {
		ax, ay := vertex(i)
		bx, by := vertex(i + 1)
		nx, ny := by-ay, ax-bx
		l := math.Hypot(nx, ny)
		nx, ny = nx/l, ny/l
		if nx*(cx-ax)+ny*(cy-ay) > 0 { // point the normal outwards
			nx, ny = -nx, -ny
		}
		edges[i] = edge{nx, ny, nx*ax + ny*ay}
	}
	return func(x, y float64) float64 {
		d := math.Inf(-1)
		for _, e := range edges {
			d = max(d, e.nx*x+e.ny*y-e.c)
		}
		return d
	}
}
