package openai

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"

	// The decoders a mask may come in (darkroom accepts PNG, JPEG, WebP).
	_ "image/jpeg"

	_ "golang.org/x/image/webp"

	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/provider"
)

// writeMask sends darkroom's mask as OpenAI reads one. darkroom's masks
// are white where the image may change and black where it stays (as
// Replicate's and fal's inpainting models take them); OpenAI's edits
// change where the mask is transparent. The mask is decoded once, within
// the process's decode budget (preview.Decode: its dimensions are read
// first, and a mask whose pixels would pass the budget is refused
// undecoded), and written as an alpha PNG, its alpha the inverse of its
// brightness. Only the alpha image (a byte a pixel) outlives the decode
// slot, so a slow upload does not hold one.
func writeMask(ctx context.Context, w io.Writer, in *provider.Input) error {
	rc, err := in.Open(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	var alpha *image.Alpha
	err = preview.Decode(rc, func(src image.Image) error {
		alpha = maskAlpha(src)
		return nil
	})
	if errors.Is(err, preview.ErrTooManyPixels) {
		return &provider.PermanentError{Message: fmt.Sprintf("openai: the mask is too large to prepare for OpenAI (%v)", err)}
	}
	if err != nil {
		return &provider.PermanentError{Message: fmt.Sprintf("openai: the mask cannot be decoded: %v", err)}
	}
	return png.Encode(w, alpha)
}

// maskAlpha is src as an alpha mask: opaque where src is dark (kept),
// transparent where it is bright (changed). Pixels are read through
// RGBA64At, which every standard image type has, so no colour is boxed
// per pixel; brightness is color.GrayModel's.
func maskAlpha(src image.Image) *image.Alpha {
	b := src.Bounds()
	out := image.NewAlpha(image.Rect(0, 0, b.Dx(), b.Dy()))
	at := func(x, y int) (r, g, bl uint32) { r, g, bl, _ = src.At(x, y).RGBA(); return }
	if fast, ok := src.(image.RGBA64Image); ok {
		at = func(x, y int) (uint32, uint32, uint32) {
			c := fast.RGBA64At(x, y)
			return uint32(c.R), uint32(c.G), uint32(c.B)
		}
	}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		row := out.Pix[(y-b.Min.Y)*out.Stride:]
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl := at(x, y)
			gray := (19595*r + 38470*g + 7471*bl + 1<<15) >> 24 // color.GrayModel
			row[x-b.Min.X] = 255 - uint8(gray)
		}
	}
	return out
}
