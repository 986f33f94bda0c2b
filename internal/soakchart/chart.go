// Package soakchart draws the soak test's report chart (cmd/darkroom's
// TestSoak): stacked panels of per-interval series (RSS, goroutines, p99
// latency per method) over a shared x axis, with fault markers drawn
// across every panel. It uses only image/png, image/draw and the
// project's existing golang.org/x/image basic font.
package soakchart

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Series is one line: a value per x point (NaN: no value, a gap).
type Series struct {
	Name   string
	Values []float64
}

// Panel is one plot of the chart, its series sharing a y axis from 0.
type Panel struct {
	Title  string
	Series []Series
}

// Mark is a vertical marker at x (in points, fractions allowed), named.
type Mark struct {
	X     float64
	Label string
}

// Chart is the whole figure: Labels name the x points (one per value).
type Chart struct {
	Title  string
	Labels []string
	Panels []Panel
	Marks  []Mark
}

const (
	width       = 1200
	panelHeight = 260
	top         = 34
	left        = 70
	right       = 190 // room for the legend
	gap         = 36
)

// Palette is the series colours, in order.
var Palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff},
	{0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

var (
	black = color.RGBA{0, 0, 0, 0xff}
	grid  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	fault = color.RGBA{0xd6, 0x27, 0x28, 0xff}
)

// Draw renders the chart.
func (c Chart) Draw() *image.RGBA {
	h := top + len(c.Panels)*(panelHeight+gap) + 20
	img := image.NewRGBA(image.Rect(0, 0, width, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	text(img, left, 18, c.Title, black)
	n := len(c.Labels)
	for i, p := range c.Panels {
		y0 := top + i*(panelHeight+gap)
		c.panel(img, p, image.Rect(left, y0+16, width-right, y0+16+panelHeight-30), n)
	}
	return img
}

// Encode writes the chart as a PNG.
func (c Chart) Encode(w io.Writer) error { return png.Encode(w, c.Draw()) }

func (c Chart) panel(img *image.RGBA, p Panel, r image.Rectangle, n int) {
	text(img, r.Min.X, r.Min.Y-4, p.Title, black)
	hi := 0.0
	for _, s := range p.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				hi = math.Max(hi, v)
			}
		}
	}
	hi = niceCeil(hi)
	// Grid and y labels: 0, ¼, ½, ¾, 1 of hi.
	for k := 0; k <= 4; k++ {
		y := r.Max.Y - k*r.Dy()/4
		hline(img, r.Min.X, r.Max.X, y, grid)
		text(img, 4, y+4, format(hi*float64(k)/4), black)
	}
	x := func(i float64) int {
		if n <= 1 {
			return r.Min.X
		}
		return r.Min.X + int(math.Round(i*float64(r.Dx())/float64(n-1)))
	}
	y := func(v float64) int {
		if hi == 0 {
			return r.Max.Y
		}
		return r.Max.Y - int(math.Round(v/hi*float64(r.Dy())))
	}
	// X labels, thinned to fit.
	step := max(1, n/12)
	for i := 0; i < n; i += step {
		vline(img, x(float64(i)), r.Min.Y, r.Max.Y, grid, false)
		text(img, x(float64(i))-3*len(c.Labels[i]), r.Max.Y+14, c.Labels[i], black)
	}
	// Axes.
	hline(img, r.Min.X, r.Max.X, r.Max.Y, black)
	vline(img, r.Min.X, r.Min.Y, r.Max.Y, black, false)
	// Fault markers, dashed, labelled at the top: a label that would run
	// into the one before it goes a line lower.
	ends := make([]int, labelRows)
	for _, m := range c.Marks {
		mx := x(m.X)
		vline(img, mx, r.Min.Y, r.Max.Y, fault, true)
		lx := mx + 3
		if lx+7*len(m.Label) > r.Max.X {
			lx = mx - 3 - 7*len(m.Label) // left of its line, clear of the legend
		}
		text(img, lx, r.Min.Y+11+labelRow(ends, lx, len(m.Label))*12, m.Label, fault)
	}
	for si, s := range p.Series {
		col := Palette[si%len(Palette)]
		prev := image.Point{-1, -1}
		for i, v := range s.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				prev = image.Point{-1, -1}
				continue
			}
			pt := image.Point{x(float64(i)), y(v)}
			if prev.X >= 0 {
				line(img, prev, pt, col)
			}
			dot(img, pt, col)
			prev = pt
		}
		ly := r.Min.Y + 12 + si*15
		fill(img, image.Rect(r.Max.X+10, ly-8, r.Max.X+22, ly), col)
		text(img, r.Max.X+26, ly, s.Name, black)
	}
}

// labelRows is how many lines the fault labels may take.
const labelRows = 3

// labelRow picks the first line where a label of n characters at x
// clears the labels already there (ends: each line's right end), else the
// line that ends first, and records it.
func labelRow(ends []int, x, n int) int {
	k := 0
	for i, e := range ends {
		if x > e {
			k = i
			break
		}
		if e < ends[k] {
			k = i
		}
	}
	ends[k] = x + 7*n + 4 // basicfont.Face7x13: 7 px a character
	return k
}

// niceCeil rounds v up to 1, 2 or 5 × a power of ten (0 stays 1).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func format(v float64) string {
	switch {
	case v >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA, dashed bool) {
	for y := y0; y <= y1; y++ {
		if !dashed || (y/4)%2 == 0 {
			img.SetRGBA(x, y, c)
			if dashed {
				img.SetRGBA(x+1, y, c)
			}
		}
	}
}

func dot(img *image.RGBA, p image.Point, c color.RGBA) {
	fill(img, image.Rect(p.X-2, p.Y-2, p.X+3, p.Y+3), c)
}

// line draws a 2-pixel line from a to b (Bresenham).
func line(img *image.RGBA, a, b image.Point, c color.RGBA) {
	dx, dy := abs(b.X-a.X), -abs(b.Y-a.Y)
	sx, sy := sign(b.X-a.X), sign(b.Y-a.Y)
	e := dx + dy
	for {
		img.SetRGBA(a.X, a.Y, c)
		img.SetRGBA(a.X, a.Y+1, c)
		if a == b {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			a.X += sx
		} else {
			e += dx
			a.Y += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
