package main

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
)

// drawIcon is darkroom's icon (docs/icon.png, the bundle's and the Docker
// catalog's), drawn rather than kept as an opaque file: a darkroom's
// safelight, a red disc glowing on a near-black rounded square, with a
// print's white frame below it. 512×512, as catalogs and hosts scale it.
func drawIcon() []byte {
	const n = 512
	img := image.NewNRGBA(image.Rect(0, 0, n, n))
	inRounded := func(x, y, r float64) bool {
		cx := math.Max(r, math.Min(n-r, x))
		cy := math.Max(r, math.Min(n-r, y))
		return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r
	}
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			fx, fy := float64(x)+0.5, float64(y)+0.5
			if !inRounded(fx, fy, 96) {
				continue
			}
			c := color.NRGBA{24, 20, 22, 255}
			// The safelight's glow, then its disc.
			d := math.Hypot(fx-256, fy-200)
			if g := math.Max(0, 1-d/230); g > 0 {
				c.R = uint8(math.Min(255, float64(c.R)+150*g*g))
				c.G = uint8(float64(c.G) + 10*g*g)
			}
			if d <= 88 {
				c = color.NRGBA{226, 48, 40, 255}
			}
			// A print: a white frame with the red-lit image inside.
			if fx >= 136 && fx < 376 && fy >= 330 && fy < 430 {
				c = color.NRGBA{236, 232, 226, 255}
				if fx >= 150 && fx < 362 && fy >= 344 && fy < 416 {
					c = color.NRGBA{120, 30, 30, 255}
				}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}
