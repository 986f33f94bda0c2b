package openai

import (
	"image"
	"image/color"
	"testing"
)

// TestMaskAlpha: darkroom's white (change) is OpenAI's transparent, its
// black (keep) OpenAI's opaque, whatever colour model the mask has.
func TestMaskAlpha(t *testing.T) {
	gray := image.NewGray(image.Rect(0, 0, 3, 1))
	rgba := image.NewNRGBA(image.Rect(0, 0, 3, 1))
	for x, v := range []uint8{0, 255, 100} {
		gray.SetGray(x, 0, color.Gray{Y: v})
		rgba.SetNRGBA(x, 0, color.NRGBA{R: v, G: v, B: v, A: 255})
	}
	for name, src := range map[string]image.Image{"gray": gray, "rgba": rgba} {
		got := maskAlpha(src)
		for x, want := range []uint8{255, 0, 155} {
			if a := got.AlphaAt(x, 0).A; a != want {
				t.Errorf("%s: pixel %d alpha %d, want %d", name, x, a, want)
			}
		}
	}
}
