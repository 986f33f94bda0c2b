package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/gif"
	"image/png"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
)

func extra(role string, data []byte, mime string) provider.Input {
	in := *input(data, mime)
	in.Role = role
	return in
}

// outputs reads every output of a completed job, checking their URLs.
func outputs(t *testing.T, p *Provider, job provider.Job) ([][]byte, []provider.Output) {
	t.Helper()
	st := status(t, p, job)
	if st.State != provider.StateCompleted {
		t.Fatalf("status = %+v, want completed", st)
	}
	var all [][]byte
	for n, out := range st.Outputs {
		if out.URL != outputURL(job.ID, n) {
			t.Errorf("output %d URL = %q, want %q", n, out.URL, outputURL(job.ID, n))
		}
		rc, err := p.OpenOutput(context.Background(), job, out)
		if err != nil {
			t.Fatalf("OpenOutput %d: %v", n, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data)
	}
	return all, st.Outputs
}

func decodeRGBA(t *testing.T, data []byte) *image.RGBA {
	t.Helper()
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	dst := image.NewRGBA(img.Bounds())
	draw.Draw(dst, dst.Rect, img, img.Bounds().Min, draw.Src)
	return dst
}

// noisePNG is an opaque w×h PNG of random pixels: an edit that moved or
// recoloured any pixel outside its mask cannot go unnoticed.
func noisePNG(t *testing.T, w, h int, seed uint64) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256)), 255
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCountOutputs(t *testing.T) {
	grey := solidImage(t, 40, 30, color.RGBA{128, 128, 128, 255}, png.Encode)
	tests := []struct {
		name string
		req  provider.Request
	}{
		{"sketch 4", provider.Request{Model: model(t, "local-sketch"), Prompt: "a fox", Seed: 3, Count: 4}},
		{"photo 2", provider.Request{Model: model(t, "local-photo"), Prompt: "a lake", Seed: 3, Count: 2}},
		{"edit 3", provider.Request{Model: model(t, "local-edit"), Prompt: "make it sunny", Seed: 3, Count: 3, InputImage: input(grey, "image/png")}},
		{"motion 2", provider.Request{Model: model(t, "local-motion"), Prompt: "lights", AspectRatio: "16:9", DurationSeconds: 2, Seed: 3, Count: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			p := newProvider(t, t.TempDir(), 0, c)
			req := tt.req
			req.IdempotencyKey = "a"
			job := submit(t, p, req)
			got, outs := outputs(t, p, job)
			if len(got) != req.Count {
				t.Fatalf("%d outputs, want %d", len(got), req.Count)
			}
			for i := range got {
				for j := range i {
					if bytes.Equal(got[i], got[j]) {
						t.Errorf("outputs %d and %d are the same", j, i)
					}
				}
			}
			// The same request in another Dir: the same files, in order.
			q := newProvider(t, t.TempDir(), 0, c)
			again, _ := outputs(t, q, submit(t, q, req))
			for n := range got {
				if n >= len(again) || !bytes.Equal(got[n], again[n]) {
					t.Errorf("output %d differs between two runs of one request", n)
				}
			}
			// Output 0 is what a single-output job makes.
			one := req
			one.Count, one.IdempotencyKey = 0, "b"
			if single, _ := output(t, p, submit(t, p, one)); !bytes.Equal(single, got[0]) {
				t.Error("output 0 differs from the single-output job's")
			}
			if _, err := p.OpenOutput(context.Background(), job, provider.Output{URL: outputURL(job.ID, req.Count)}); err == nil {
				t.Error("opened an output past Count")
			}
			if _, err := p.OpenOutput(context.Background(), job, provider.Output{URL: "local:" + job.ID + "/01", MimeType: outs[1].MimeType}); err == nil {
				t.Error("opened a non-canonical URL")
			}
		})
	}
}

// A mask edits where it is white: luminance of at least half, counting a
// transparent pixel as black.
func TestMaskedEdit(t *testing.T) {
	const w, h = 40, 30
	opaque := func(c color.NRGBA, in func(x, y int) bool) []byte {
		m := image.NewNRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				if in(x, y) {
					m.SetNRGBA(x, y, c)
				} else {
					m.SetNRGBA(x, y, color.NRGBA{0, 0, 0, 255})
				}
			}
		}
		var b bytes.Buffer
		if err := png.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	rect := func(x, y int) bool { return x >= 10 && x < 30 && y >= 5 && y < 20 }
	stripes := func(x, y int) bool { return x%3 == 0 }
	src := noisePNG(t, w, h, 1)
	// The same noise as a 16-bit PNG and as a JPEG: each format's decoded
	// pixels are kept exactly outside the mask.
	wide := image.NewNRGBA64(image.Rect(0, 0, w, h))
	draw.Draw(wide, wide.Rect, decodeRGBA(t, src), image.Point{}, draw.Src)
	var src16, srcJPEG bytes.Buffer
	if err := png.Encode(&src16, wide); err != nil {
		t.Fatal(err)
	}
	if err := encodeJPEG(&srcJPEG, decodeRGBA(t, src)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		model string
		src   []byte
		mask  []byte
		edits func(x, y int) bool // where the output may and must change
	}{
		{"white rectangle", "local-edit", src, opaque(color.NRGBA{255, 255, 255, 255}, rect), rect},
		{"white stripes", "local-edit", src, opaque(color.NRGBA{255, 255, 255, 255}, stripes), stripes},
		{"light grey edits", "local-photo", src, opaque(color.NRGBA{140, 140, 140, 255}, rect), rect},
		{"dark grey keeps", "local-edit", src, opaque(color.NRGBA{100, 100, 100, 255}, rect), func(int, int) bool { return false }},
		{"transparent white keeps", "local-edit", src, opaque(color.NRGBA{255, 255, 255, 0}, rect), func(int, int) bool { return false }},
		{"16-bit image", "local-edit", src16.Bytes(), opaque(color.NRGBA{255, 255, 255, 255}, rect), rect},
		{"JPEG image", "local-edit", srcJPEG.Bytes(), opaque(color.NRGBA{255, 255, 255, 255}, stripes), stripes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, t.TempDir(), 0, newClock())
			data, _ := output(t, p, submit(t, p, provider.Request{Model: model(t, tt.model), Prompt: "a sunny hill",
				InputImage: input(tt.src, "image/png"), Extra: []provider.Input{extra(provider.RoleMask, tt.mask, "image/png")}}))
			got, want := decodeRGBA(t, data), decodeRGBA(t, tt.src)
			if got.Rect != want.Rect {
				t.Fatalf("output is %v, want the input's %v", got.Rect, want.Rect)
			}
			inside, changed := 0, 0
			for y := range h {
				for x := range w {
					same := got.RGBAAt(x, y) == want.RGBAAt(x, y)
					switch {
					case !tt.edits(x, y) && !same:
						t.Fatalf("pixel (%d,%d) outside the mask changed: %v → %v", x, y, want.RGBAAt(x, y), got.RGBAAt(x, y))
					case tt.edits(x, y):
						inside++
						if !same {
							changed++
						}
					}
				}
			}
			if changed*10 < inside*9 {
				t.Errorf("%d of %d pixels inside the mask changed, want nearly all", changed, inside)
			}
		})
	}
}

func TestInstructionEdit(t *testing.T) {
	tests := []struct {
		name       string
		model      string
		w, h       int
		wantW      int
		wantH      int
		inputRatio bool
	}{
		{"small keeps its size", "local-edit", 40, 30, 40, 30, true},
		{"photo with an image", "local-photo", 64, 64, 64, 64, true},
		{"large is scaled to 1024", "local-edit", 1500, 1000, 1024, 683, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := noisePNG(t, tt.w, tt.h, 2)
			p := newProvider(t, t.TempDir(), 0, newClock())
			data, _ := output(t, p, submit(t, p, provider.Request{Model: model(t, tt.model), Prompt: "paint it as a landscape",
				AspectRatio: "16:9", InputImage: input(src, "image/png")}))
			got := decodeRGBA(t, data)
			if got.Rect.Dx() != tt.wantW || got.Rect.Dy() != tt.wantH {
				t.Fatalf("output is %v, want %d×%d", got.Rect, tt.wantW, tt.wantH)
			}
			want := coverImage(context.Background(), src, tt.wantW, tt.wantH)
			// Each quarter of the picture changes visibly.
			for q := range 4 {
				x0, y0 := q%2*tt.wantW/2, q/2*tt.wantH/2
				var diff, n int
				for y := y0; y < y0+tt.wantH/2; y++ {
					for x := x0; x < x0+tt.wantW/2; x++ {
						a, b := got.RGBAAt(x, y), want.RGBAAt(x, y)
						diff += absDiff(a.R, b.R) + absDiff(a.G, b.G) + absDiff(a.B, b.B)
						n += 3
					}
				}
				if diff < 10*n {
					t.Errorf("quarter %d: mean change %.1f of 255, want a visible one", q, float64(diff)/float64(n))
				}
			}
		})
	}
}

func absDiff(a, b uint8) int { return abs(int(a) - int(b)) }

// meanRB is the mean red and blue of an image.
func meanRB(img image.Image) (r, b float64) {
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			cr, _, cb, _ := img.At(x, y).RGBA()
			r, b = r+float64(cr>>8), b+float64(cb>>8)
		}
	}
	n := float64(bd.Dx() * bd.Dy())
	return r / n, b / n
}

// References set the palette: a red one makes a reddish output and a blue
// one a bluish output, whatever the seed and whatever the prompt's colour
// word says.
func TestReferencePalette(t *testing.T) {
	red := solidImage(t, 30, 20, color.RGBA{220, 20, 20, 255}, png.Encode)
	blue := solidImage(t, 20, 30, color.RGBA{20, 40, 220, 255}, encodeJPEG)
	grey := solidImage(t, 40, 30, color.RGBA{128, 128, 128, 255}, png.Encode)
	tests := []struct {
		name  string
		model string
		input []byte
	}{
		{"sketch", "local-sketch", nil},
		{"photo", "local-photo", nil},
		{"edit", "local-edit", grey},
		{"motion", "local-motion", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, t.TempDir(), 0, newClock())
			for seed := range int64(3) {
				for _, ref := range []struct {
					name string
					data []byte
					mime string
					red  bool
				}{{"red", red, "image/png", true}, {"blue", blue, "image/jpeg", false}} {
					req := provider.Request{Model: model(t, tt.model), Prompt: "a green forest", Seed: seed,
						IdempotencyKey: fmt.Sprint(seed, ref.name), DurationSeconds: 2,
						Extra: []provider.Input{extra(provider.RoleReference, ref.data, ref.mime)}}
					if tt.input != nil {
						req.InputImage = input(tt.input, "image/png")
					}
					if model(t, tt.model).Kind == provider.KindImage {
						req.DurationSeconds = 0
					}
					data, _ := output(t, p, submit(t, p, req))
					img, _, err := image.Decode(bytes.NewReader(data)) // a GIF's first frame
					if err != nil {
						t.Fatal(err)
					}
					r, b := meanRB(img)
					if (r > b) != ref.red {
						t.Errorf("seed %d, %s reference: mean red %.0f, blue %.0f", seed, ref.name, r, b)
					}
				}
			}
		})
	}
}

// frames composites a GIF's frames (each drawn over the last).
func frames(t *testing.T, data []byte) []*image.RGBA {
	t.Helper()
	g, err := gif.DecodeAll(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	canvas := image.NewRGBA(image.Rect(0, 0, g.Config.Width, g.Config.Height))
	var out []*image.RGBA
	for _, f := range g.Image {
		draw.Draw(canvas, f.Rect, f, f.Rect.Min, draw.Over)
		out = append(out, image.NewRGBA(canvas.Rect))
		copy(out[len(out)-1].Pix, canvas.Pix)
	}
	return out
}

// share is the fraction of img's pixels that are c.
func share(img *image.RGBA, c color.RGBA) float64 {
	n := 0
	for i := 0; i < len(img.Pix); i += 4 {
		if img.Pix[i] == c.R && img.Pix[i+1] == c.G && img.Pix[i+2] == c.B {
			n++
		}
	}
	return float64(n) / float64(len(img.Pix)/4)
}

func TestLastFrame(t *testing.T) {
	red, blue := color.RGBA{200, 30, 30, 255}, color.RGBA{30, 60, 200, 255}
	first := solidImage(t, 64, 36, red, png.Encode)
	last := solidImage(t, 36, 64, blue, png.Encode)
	tests := []struct {
		name     string
		model    string
		first    []byte
		last     []byte
		firstRed bool // the clip starts on the first frame
		lastBlue bool // and ends on the last
		secs     int
	}{
		{"animate both", "local-animate", first, last, true, true, 2},
		{"animate both, 6 s", "local-animate", first, last, true, true, 6},
		{"animate first only loops", "local-animate", first, nil, true, false, 2},
		{"motion last only", "local-motion", nil, last, false, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, t.TempDir(), 0, newClock())
			req := provider.Request{Model: model(t, tt.model), Prompt: "drift", AspectRatio: "16:9", DurationSeconds: tt.secs}
			if tt.first != nil {
				req.InputImage = input(tt.first, "image/png")
			}
			if tt.last != nil {
				req.Extra = []provider.Input{extra(provider.RoleLastFrame, tt.last, "image/png")}
			}
			data, _ := output(t, p, submit(t, p, req))
			fs := frames(t, data)
			if len(fs) != tt.secs*fps {
				t.Fatalf("%d frames, want %d", len(fs), tt.secs*fps)
			}
			if got := share(fs[0], red) == 1; got != tt.firstRed {
				t.Errorf("first frame all the first image = %v, want %v", got, tt.firstRed)
			}
			if got := share(fs[len(fs)-1], blue) == 1; got != tt.lastBlue {
				t.Errorf("last frame all the last image = %v, want %v", got, tt.lastBlue)
			}
			if tt.last != nil {
				// Halfway, the wipe has crossed about half of the picture.
				if s := share(fs[len(fs)/2], blue); s < 0.35 || s > 0.6 {
					t.Errorf("halfway frame is %.2f the last image, want about half", s)
				}
			}
			if len(data) > 400<<10 {
				t.Errorf("GIF is %d KB", len(data)>>10)
			}
		})
	}
}

func TestRolesRejected(t *testing.T) {
	small := solidImage(t, 8, 8, color.RGBA{1, 2, 3, 255}, png.Encode)
	other := solidImage(t, 8, 9, color.RGBA{255, 255, 255, 255}, png.Encode)
	ref := extra(provider.RoleReference, small, "image/png")
	tests := []struct {
		name string
		req  provider.Request
		want string // in the message
	}{
		{"edit needs an image", provider.Request{Model: model(t, "local-edit")}, "needs an input image"},
		{"mask of another size", provider.Request{Model: model(t, "local-edit"), InputImage: input(small, "image/png"),
			Extra: []provider.Input{extra(provider.RoleMask, other, "image/png")}}, "same size"},
		{"mask without an image", provider.Request{Model: model(t, "local-photo"),
			Extra: []provider.Input{extra(provider.RoleMask, small, "image/png")}}, "needs an image"},
		{"two masks", provider.Request{Model: model(t, "local-edit"), InputImage: input(small, "image/png"),
			Extra: []provider.Input{extra(provider.RoleMask, small, "image/png"), extra(provider.RoleMask, small, "image/png")}}, "at most 1"},
		{"five references", provider.Request{Model: model(t, "local-sketch"), Extra: []provider.Input{ref, ref, ref, ref, ref}}, "at most 4"},
		{"mask on sketch", provider.Request{Model: model(t, "local-sketch"),
			Extra: []provider.Input{extra(provider.RoleMask, small, "image/png")}}, "does not take a mask"},
		{"last frame on an image model", provider.Request{Model: model(t, "local-photo"),
			Extra: []provider.Input{extra(provider.RoleLastFrame, small, "image/png")}}, "does not take a last_frame"},
		{"broken mask", provider.Request{Model: model(t, "local-edit"), InputImage: input(small, "image/png"),
			Extra: []provider.Input{extra(provider.RoleMask, []byte("not an image"), "image/png")}}, "mask image"},
		{"too many outputs", provider.Request{Model: model(t, "local-sketch"), Count: 5}, "1 to 4"},
		{"negative count", provider.Request{Model: model(t, "local-sketch"), Count: -1}, "1 to 4"},
		{"too many videos", provider.Request{Model: model(t, "local-motion"), Count: 3}, "1 to 2"},
	}
	p := newProvider(t, t.TempDir(), 1, newClock())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Submit(context.Background(), tt.req)
			var pe *provider.PermanentError
			if !errors.As(err, &pe) || !bytes.Contains([]byte(pe.Message), []byte(tt.want)) {
				t.Errorf("err = %v, want a PermanentError saying %q", err, tt.want)
			}
		})
	}
	if n := p.JobCount(); n != 0 {
		t.Errorf("JobCount = %d after refusals", n)
	}
}

func TestModelRoles(t *testing.T) {
	tests := []struct {
		id           string
		needs, takes bool
		roles        map[string]int
		maxCount     int
	}{
		{"local-sketch", false, false, map[string]int{provider.RoleReference: 4}, 4},
		{"local-photo", false, true, map[string]int{provider.RoleMask: 1, provider.RoleReference: 4}, 4},
		{"local-edit", true, false, map[string]int{provider.RoleMask: 1, provider.RoleReference: 4}, 4},
		{"local-motion", false, false, map[string]int{provider.RoleLastFrame: 1, provider.RoleReference: 4}, 2},
		{"local-animate", true, false, map[string]int{provider.RoleLastFrame: 1, provider.RoleReference: 4}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			m := model(t, tt.id)
			if m.NeedsInputImage != tt.needs || m.AcceptsInputImage != tt.takes || m.MaxCount != tt.maxCount || fmt.Sprint(m.Roles) != fmt.Sprint(tt.roles) {
				t.Errorf("%s: needs %v, accepts %v, maxCount %d, roles %v", tt.id, m.NeedsInputImage, m.AcceptsInputImage, m.MaxCount, m.Roles)
			}
			m.Roles[provider.RoleMask] = 9
			if model(t, tt.id).Roles[provider.RoleMask] == 9 {
				t.Error("lookup shares the Roles map")
			}
		})
	}
}
