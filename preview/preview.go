// Package preview makes the small inline image shown next to each output:
// a JPEG whose long side is at most MaxSide pixels and whose size is at
// most MaxBytes, from a PNG, JPEG, WebP or GIF (its first frame, which is
// how the local provider's video looks). Videos in other containers get
// none: decoding them would need a new system dependency (ffmpeg).
//
// It also holds the process's one decode budget (Header, Fits, Decode):
// dimensions read before any pixel, pixels and bytes bounded, decodes at
// once bounded; whatever else decodes an image (OpenAI's edit masks) goes
// through it.
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

// decoding bounds the images decoded at once in this process (previews,
// OpenAI's edit masks; each up to MaxDecodedBytes), whatever the runner's
// concurrency.
var decoding = make(chan struct{}, 2)

// ErrUnsupported is returned for media this package does not preview.
var ErrUnsupported = errors.New("preview: unsupported media type")

// ErrTooManyPixels is returned for an image above the decode budget
// (Fits).
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
	var img Image
	err := Decode(r, func(src image.Image) (err error) {
		img, err = FromImage(src)
		return err
	})
	return img, err
}

// MaxHeaderBytes bounds what Header reads to find an image's dimensions;
// a header longer than this (metadata, a colour profile) is refused.
const MaxHeaderBytes = 1 << 20

// Header reads r's image header (PNG, JPEG, WebP, GIF) and returns its
// dimensions and format, and a reader of the whole of r: what Header read,
// then the rest. Bytes that do not start an image are an error, so a
// file that merely claims to be an image is caught before it is kept.
func Header(r io.Reader) (image.Config, string, io.Reader, error) {
	var head bytes.Buffer
	cfg, format, err := image.DecodeConfig(io.TeeReader(io.LimitReader(r, MaxHeaderBytes), &head))
	if err == nil && (cfg.Width <= 0 || cfg.Height <= 0) {
		err = fmt.Errorf("%d×%d pixels", cfg.Width, cfg.Height)
	}
	if err != nil {
		return cfg, format, nil, fmt.Errorf("preview: read header: %w", err)
	}
	return cfg, format, io.MultiReader(&head, r), nil
}

// MaxDecodedBytes bounds the memory one decoded image may take: MaxPixels
// at 4 bytes a pixel. A 16-bit RGBA image (8 bytes a pixel) fits half
// as many pixels.
const MaxDecodedBytes = 4 * MaxPixels

// Fits refuses (ErrTooManyPixels) an image whose decoding would pass
// MaxPixels or MaxDecodedBytes, judged from its header alone.
func Fits(cfg image.Config) error {
	px := int64(cfg.Width) * int64(cfg.Height)
	if cfg.Width <= 0 || cfg.Height <= 0 || px > MaxPixels || px*bytesPerPixel(cfg.ColorModel) > MaxDecodedBytes {
		return fmt.Errorf("%w: %d×%d", ErrTooManyPixels, cfg.Width, cfg.Height)
	}
	return nil
}

// bytesPerPixel is what the standard decoders allocate per pixel for a
// colour model; an unknown model is taken at the largest (8).
func bytesPerPixel(m color.Model) int64 {
	switch m {
	case color.GrayModel, color.AlphaModel:
		return 1
	case color.Gray16Model, color.Alpha16Model:
		return 2
	case color.YCbCrModel:
		return 3
	case color.RGBAModel, color.NRGBAModel, color.CMYKModel, color.NYCbCrAModel:
		return 4
	}
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	return 8
}

// Decode reads r's header, refuses an image that does not Fit, and decodes
// it, holding one of the process's decode slots while use runs: however
// many callers decode at once, at most cap(decoding) images of up to
// MaxDecodedBytes are held. use must not keep src, nor block on others.
func Decode(r io.Reader, use func(src image.Image) error) error {
	cfg, _, all, err := Header(r)
	if err != nil {
		return err
	}
	if err := Fits(cfg); err != nil {
		return err
	}
	decoding <- struct{}{}
	defer func() { <-decoding }()
	src, _, err := image.Decode(all)
	if err != nil {
		return fmt.Errorf("preview: decode: %w", err)
	}
	return use(src)
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
