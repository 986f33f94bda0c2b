package openai_test

import (
	"bytes"
	"context"
	"image/jpeg"
	"io"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/openai"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestPartialImagesArePreviews: a GPT image model's call of one image
// streams; each partial image the emulator sends while the call is held
// becomes the generation's live preview (a JPEG within package preview's
// bounds, the frame count growing), none is an output, the completed
// image is the one output, and the preview ends with the call. A call of
// several images, or with partial images turned off, does not stream.
func TestPartialImagesArePreviews(t *testing.T) {
	for _, tc := range []struct {
		name     string
		image    bool
		count    int
		partials int // Config.PartialImages
		frames   int // partial images expected, spread evenly over the 4 s call
	}{
		{"generation", false, 1, 0, 3},
		{"edit", true, 1, 0, 3},
		{"one partial image", false, 1, 1, 1},
		{"three images: no stream", false, 3, 0, 0},
		{"partial images off", false, 1, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			em := emulator.New(emulator.Options{Clock: emulator.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))})
			t.Cleanup(em.Close)
			p, err := openai.New(openai.Config{Key: "sk-test", BaseURL: em.OpenAI.URL, Spool: provider.DirSpool(t.TempDir()),
				RequestsPerMinute: -1, Now: em.Now, PartialImages: tc.partials})
			if err != nil {
				t.Fatal(err)
			}
			id := "gen-" + tc.name
			req := withInputs(provider.Request{IdempotencyKey: id, Model: model(t, p, "openai-gpt-image-2"), Prompt: "a slow lighthouse [run=4s]", Count: tc.count}, tc.image, false, 0)
			type result struct {
				job provider.Job
				err error
			}
			done := make(chan result, 1)
			go func() {
				job, err := p.Submit(context.Background(), req)
				done <- result{job, err}
			}()
			waitFor(t, func() bool { return len(em.Inputs("openai")) == 1 }, "the call to reach the emulator")
			step := 4 * time.Second / time.Duration(tc.frames+1)
			for k := 1; k <= tc.frames; k++ {
				em.Advance(step)
				var frame []byte
				waitFor(t, func() bool {
					var n int
					frame, n, _ = p.LivePreview(id)
					return n == k
				}, "partial image")
				img, err := jpeg.Decode(bytes.NewReader(frame))
				if err != nil || len(frame) > preview.MaxBytes || max(img.Bounds().Dx(), img.Bounds().Dy()) > preview.MaxSide {
					t.Fatalf("frame %d: %d bytes: %v", k, len(frame), err)
				}
			}
			if _, n, ok := p.LivePreview(id); ok != (tc.frames > 0) || n != tc.frames {
				t.Fatalf("before the end: %d frames (%v), want %d", n, ok, tc.frames)
			}
			em.Advance(4 * time.Second)
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			st, err := p.Status(context.Background(), r.job)
			if err != nil || len(st.Outputs) != tc.count {
				t.Fatalf("%d outputs (%v), want %d: partial images are never outputs", len(st.Outputs), err, tc.count)
			}
			for _, o := range st.Outputs {
				rc, err := p.OpenOutput(context.Background(), r.job, o)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(rc)
				rc.Close()
				if !bytes.Equal(b, emulator.PNG()) {
					t.Fatalf("the output is %d bytes, not the completed image", len(b))
				}
			}
			if _, _, ok := p.LivePreview(id); ok {
				t.Fatal("a live preview outlived its call")
			}
			if in := em.Inputs("openai")[0]; (in["stream"] != nil) != (tc.frames > 0) {
				t.Fatalf("stream %v sent; partial images expected: %d", in["stream"], tc.frames)
			}
		})
	}
}

// waitFor polls cond (the emulator answers over HTTP) for up to 10 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
