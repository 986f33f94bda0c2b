package local

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"io"

	"github.com/darkroom-mcp/darkroom/provider"
)

// An edit is what an image model makes from a main image. Its output has
// the image's own size (scaled down to editLongSide on its long side when
// larger; the aspect ratio asked for is not used), and shows:
//
//   - with a mask: the image, with the model's landscape painted exactly
//     where the mask is white. A mask pixel is "white" when its luminance
//     is at least half; black, dark and transparent pixels (transparency
//     counts as black) keep the image's pixel unchanged, byte for byte.
//   - without a mask (an instruction edit): the landscape blended over
//     the whole image at editBlend.
//
// Reference images set the landscape's colours, as for any output.
//
// Memory is bounded by the output, not the input: image and mask are
// each decoded straight into an output-sized cover (a PNG a row at a
// time, see png.go), so a 40 MP input costs what a 1024 px one does, plus
// its file's bytes.
const editBlend = 115 // of 256: enough to see, not enough to hide the image

// maskThreshold is the luminance (0..255) from which a mask pixel edits.
const maskThreshold = 128

func renderEdit(ctx context.Context, w io.Writer, s spec) error {
	width, height := 1, 1
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(s.input)); err == nil {
		width, height = fitSize(cfg.Width, cfg.Height, editLongSide)
	}
	img := coverImage(ctx, s.input, width, height)
	if img == nil { // a body broken past its header: edit a grey canvas
		img = image.NewRGBA(image.Rect(0, 0, width, height))
		for i := 0; i < len(img.Pix); i += 4 {
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = 128, 128, 128, 255
		}
	}
	r := s.rng()
	t := newTheme(r, s.prompt, s.palette(ctx))
	paint := image.NewRGBA(img.Rect)
	paintLandscape(paint, r, t)

	mask := s.mask(ctx, width, height)
	for i := 0; i < len(img.Pix); i += 4 {
		switch {
		case mask == nil:
			c := paint.Pix[i : i+3 : i+3]
			blendPix(img.Pix, i, color.RGBA{c[0], c[1], c[2], 255}, editBlend)
		case mask[i/4]:
			copy(img.Pix[i:i+3], paint.Pix[i:i+3])
		}
	}
	return pngEncoder.Encode(w, img)
}

// mask reads the job's mask into w×h (the image's cover has the same
// grid, since the two are the same size) and says which pixels edit. It
// is nil without a mask, or with one that cannot be drawn: then the whole
// image is edited, which is visible, rather than nothing.
func (s spec) mask(ctx context.Context, w, h int) []bool {
	var edit []bool
	s.read(provider.RoleMask, func(data []byte) bool {
		m := coverImage(ctx, data, w, h)
		if m == nil {
			return false
		}
		edit = make([]bool, w*h)
		for i := range edit {
			p := m.Pix[4*i : 4*i+3 : 4*i+3]
			edit[i] = (299*int(p[0])+587*int(p[1])+114*int(p[2]))/1000 >= maskThreshold
		}
		return false
	})
	return edit
}

// fitSize scales w×h down to long on its long side (at least 1 px a
// side), and leaves a smaller size as it is.
func fitSize(w, h, long int) (int, int) {
	l := max(w, h)
	if l <= long {
		return w, h
	}
	return max(1, (w*long+l/2)/l), max(1, (h*long+l/2)/l)
}
