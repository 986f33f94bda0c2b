package openai

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"

	// The decoders a mask may come in (darkroom accepts PNG, JPEG, WebP).
	_ "image/jpeg"

	_ "golang.org/x/image/webp"

	"github.com/darkroom-mcp/darkroom/provider"
)

// writeMask sends darkroom's mask as OpenAI reads one. darkroom's masks
// are white where the image may change and black where it stays (as
// Replicate's and fal's inpainting models take them); OpenAI's edits
// change where the mask is transparent. The mask is decoded once and
// written as an alpha PNG, its alpha the inverse of its brightness.
func writeMask(ctx context.Context, w io.Writer, in *provider.Input) error {
	rc, err := in.Open(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	src, _, err := image.Decode(rc)
	if err != nil {
		return &provider.PermanentError{Message: fmt.Sprintf("openai: the mask cannot be decoded: %v", err)}
	}
	return png.Encode(w, maskAlpha(src))
}

// maskAlpha is src as an alpha mask: opaque where src is dark (kept),
// transparent where it is bright (changed).
func maskAlpha(src image.Image) *image.Alpha {
	b := src.Bounds()
	out := image.NewAlpha(image.Rect(0, 0, b.Dx(), b.Dy()))
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			g := color.GrayModel.Convert(src.At(x, y)).(color.Gray)
			out.SetAlpha(x-b.Min.X, y-b.Min.Y, color.Alpha{A: 255 - g.Y})
		}
	}
	return out
}
