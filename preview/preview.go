// Package preview makes the small inline image shown next to each output:
// a JPEG whose long side is at most MaxSide pixels and whose size is at
// most MaxBytes, from a PNG, JPEG, WebP or GIF (its first frame, which is
// how the local provider's video looks). Videos in other containers get
// none: decoding them would need a new system dependency (ffmpeg).
package preview

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"

	_ "image/gif" // first frame
	_ "image/png"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp"
)

// Bounds of a preview.
const (
	MaxSide  = 512
	MaxBytes = 64 << 10
	// MaxPixels bounds what is decoded (about 100 MB as RGBA): a larger
	// image gets no preview rather than an unbounded allocation.
	MaxPixels = 25_000_000
	MimeType  = "image/jpeg"
)

// decoding bounds the previews decoded at once in this process (each may
// hold up to MaxPixels of pixels), whatever the runner's concurrency.
var decoding = make(chan struct{}, 2)

// ErrUnsupported is returned for media this package does not preview.
var ErrUnsupported = errors.New("preview: unsupported media type")

// ErrTooManyPixels is returned for an image above MaxPixels.
var ErrTooManyPixels = errors.New("preview: image too large to decode")

// Image is a made preview.
type Image struct {
	Data          []byte
	Width, Height int
}

// Supported reports whether Make can preview mime.
func Supported(mime string) bool {
	switch mime {
	case "image/png", "image/jpeg", "image/webp", "image/gif":
		return true
	}
	return false
}

// qualities are tried in turn until the JPEG fits MaxBytes.
var qualities = []int{80, 65, 50, 35, 20}

// Make decodes r (of type mime), checking its dimensions before any pixel
// is decoded, and returns the preview. It reads r once, streaming.
func Make(r io.Reader, mime string) (Image, error) {
	if !Supported(mime) {
		return Image{}, ErrUnsupported
	}
	var head bytes.Buffer
	cfg, _, err := image.DecodeConfig(io.TeeReader(r, &head))
	if err != nil {
		return Image{}, fmt.Errorf("preview: read header: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return Image{}, fmt.Errorf("%w: %d×%d", ErrTooManyPixels, cfg.Width, cfg.Height)
	}
	decoding <- struct{}{}
	defer func() { <-decoding }()
	src, _, err := image.Decode(io.MultiReader(&head, r))
	if err != nil {
		return Image{}, fmt.Errorf("preview: decode: %w", err)
	}
	return FromImage(src)
}

// FromImage scales src and encodes it within the bounds. Transparency is
// flattened onto white (JPEG has no alpha).
func FromImage(src image.Image) (Image, error) {
	w, h := fit(src.Bounds().Dx(), src.Bounds().Dy(), MaxSide)
	for {
		dst := image.NewRGBA(image.Rect(0, 0, w, h))
		draw.Draw(dst, dst.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
		draw.CatmullRom.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Over, nil)
		for _, q := range qualities {
			var buf bytes.Buffer
			if err := jpeg.Encode(&buf, dst, &jpeg.Options{Quality: q}); err != nil {
				return Image{}, fmt.Errorf("preview: encode: %w", err)
			}
			if buf.Len() <= MaxBytes {
				return Image{Data: buf.Bytes(), Width: w, Height: h}, nil
			}
		}
		// Pure noise does not fit even at the lowest quality: fewer pixels.
		if w <= 16 && h <= 16 {
			return Image{}, errors.New("preview: cannot fit the size bound")
		}
		w, h = max(w*3/4, 1), max(h*3/4, 1)
	}
}

// fit scales w×h down (never up) so the long side is at most side.
func fit(w, h, side int) (int, int) {
	if w <= side && h <= side {
		return max(w, 1), max(h, 1)
	}
	if w >= h {
		return side, max(h*side/w, 1)
	}
	return max(w*side/h, 1), side
}
