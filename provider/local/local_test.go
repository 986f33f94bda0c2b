package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
	"github.com/darkroom-mcp/darkroom/provider"
)

func newClock() *testclock.Clock { return testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

// newProvider makes a Provider on dir that always writes GIF videos, so
// the tests do not depend on ffmpeg being installed.
func newProvider(t *testing.T, dir string, scale float64, c *testclock.Clock) *Provider {
	t.Helper()
	p, err := New(Options{Dir: dir, Scale: scale, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	p.ffmpeg = ""
	return p
}

func model(t *testing.T, id string) provider.Model {
	t.Helper()
	m, ok := lookup(id)
	if !ok {
		t.Fatalf("no model %s", id)
	}
	return m
}

func input(data []byte, mime string) *provider.Input {
	return &provider.Input{MimeType: mime, Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}}
}

// solidImage encodes a w×h image of one colour with enc.
func solidImage(t *testing.T, w, h int, c color.RGBA, enc func(io.Writer, image.Image) error) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		setPix(img.Pix, i, c)
	}
	var b bytes.Buffer
	if err := enc(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeJPEG(w io.Writer, img image.Image) error { return jpeg.Encode(w, img, nil) }

func submit(t *testing.T, p *Provider, req provider.Request) provider.Job {
	t.Helper()
	job, err := p.Submit(context.Background(), req)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return job
}

func status(t *testing.T, p *Provider, job provider.Job) provider.Status {
	t.Helper()
	st, err := p.Status(context.Background(), job)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return st
}

// output reads the only output of a completed job.
func output(t *testing.T, p *Provider, job provider.Job) ([]byte, provider.Output) {
	t.Helper()
	st := status(t, p, job)
	if st.State != provider.StateCompleted || len(st.Outputs) != 1 {
		t.Fatalf("status = %+v, want completed with one output", st)
	}
	rc, err := p.OpenOutput(context.Background(), job, st.Outputs[0])
	if err != nil {
		t.Fatalf("OpenOutput: %v", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data, st.Outputs[0]
}

func TestDeterministicOutputs(t *testing.T) {
	red := solidImage(t, 40, 30, color.RGBA{200, 30, 30, 255}, png.Encode)
	tests := []struct {
		name string
		req  provider.Request
		mime string
	}{
		{"sketch", provider.Request{Model: model(t, "local-sketch"), Prompt: "a red fox", AspectRatio: "4:3", Seed: 1}, "image/png"},
		{"photo", provider.Request{Model: model(t, "local-photo"), Prompt: "a lake", NegativePrompt: "fog", AspectRatio: "16:9", Seed: 2}, "image/png"},
		{"motion", provider.Request{Model: model(t, "local-motion"), Prompt: "fireflies", AspectRatio: "1:1", Seed: 3, DurationSeconds: 2}, "image/gif"},
		{"animate", provider.Request{Model: model(t, "local-animate"), Prompt: "sparkles", AspectRatio: "9:16", Seed: 4, DurationSeconds: 2,
			InputImage: input(red, "image/png")}, "image/gif"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			var outs [][]byte
			for i := range 2 {
				p := newProvider(t, t.TempDir(), 0, c)
				req := tt.req
				req.IdempotencyKey = fmt.Sprintf("gen-%d", i) // different jobs, same request
				data, out := output(t, p, submit(t, p, req))
				if out.MimeType != tt.mime {
					t.Errorf("mime = %q, want %q", out.MimeType, tt.mime)
				}
				outs = append(outs, data)
			}
			if !bytes.Equal(outs[0], outs[1]) {
				t.Error("the same request gave different bytes")
			}
			p := newProvider(t, t.TempDir(), 0, c)
			req := tt.req
			req.Seed++
			if data, _ := output(t, p, submit(t, p, req)); bytes.Equal(data, outs[0]) {
				t.Error("another seed gave the same bytes")
			}
		})
	}
}

// Every parameter feeds the picture: no two of these specs share a seed.
func TestSpecSeeds(t *testing.T) {
	base := spec{model: "local-animate", prompt: "p", negative: "n", ratio: "1:1", seed: 1, duration: 2, input: []byte("i")}
	specs := []spec{base}
	for _, change := range []func(*spec){
		func(s *spec) { s.model = "local-motion" },
		func(s *spec) { s.prompt = "q" },
		func(s *spec) { s.negative = "m" },
		func(s *spec) { s.ratio = "16:9" },
		func(s *spec) { s.seed = 2 },
		func(s *spec) { s.duration = 4 },
		func(s *spec) { s.input = []byte("j") },
		func(s *spec) { s.prompt, s.negative = "pn", "" }, // fields do not run together
	} {
		s := base
		change(&s)
		specs = append(specs, s)
	}
	seen := map[uint64]int{}
	for i, s := range specs {
		v := s.rng().Uint64()
		if j, ok := seen[v]; ok {
			t.Errorf("specs %d and %d share a seed", j, i)
		}
		seen[v] = i
	}
}

func TestAspectRatios(t *testing.T) {
	tests := []struct {
		ratio        string
		image, video image.Point
	}{
		{"1:1", image.Pt(1024, 1024), image.Pt(480, 480)},
		{"16:9", image.Pt(1024, 576), image.Pt(480, 270)},
		{"9:16", image.Pt(576, 1024), image.Pt(270, 480)},
		{"4:3", image.Pt(1024, 768), image.Pt(480, 360)},
		{"3:4", image.Pt(768, 1024), image.Pt(360, 480)},
		{"21:9", image.Pt(1024, 438), image.Pt(480, 206)},
		{"", image.Pt(1024, 1024), image.Pt(480, 480)}, // the default
	}
	p := newProvider(t, t.TempDir(), 0, newClock())
	for _, tt := range tests {
		t.Run(tt.ratio, func(t *testing.T) {
			t.Parallel()
			for _, m := range []struct {
				id     string
				want   image.Point
				decode func(io.Reader) (image.Config, error)
			}{
				{"local-photo", tt.image, png.DecodeConfig},
				{"local-motion", tt.video, gif.DecodeConfig},
			} {
				data, _ := output(t, p, submit(t, p, provider.Request{Model: model(t, m.id), Prompt: "ratio " + tt.ratio, AspectRatio: tt.ratio}))
				cfg, err := m.decode(bytes.NewReader(data))
				if err != nil {
					t.Fatalf("%s: %v", m.id, err)
				}
				if got := image.Pt(cfg.Width, cfg.Height); got != m.want {
					t.Errorf("%s: size %v, want %v", m.id, got, m.want)
				}
				if q, ok := ratioParts[tt.ratio]; ok {
					if got, want := float64(cfg.Width)/float64(cfg.Height), float64(q[0])/float64(q[1]); math.Abs(got/want-1) > 0.01 {
						t.Errorf("%s: ratio %.3f, want %.3f", m.id, got, want)
					}
				}
			}
		})
	}
}

func TestPNGDecodes(t *testing.T) {
	p := newProvider(t, t.TempDir(), 0, newClock())
	for _, id := range []string{"local-sketch", "local-photo"} {
		data, _ := output(t, p, submit(t, p, provider.Request{Model: model(t, id), Prompt: "a harbour at night", AspectRatio: "16:9"}))
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		// Not a blank canvas: the picture has many colours.
		colours := map[color.Color]bool{}
		for y := 0; y < img.Bounds().Dy(); y += 7 {
			for x := 0; x < img.Bounds().Dx(); x += 7 {
				colours[img.At(x, y)] = true
			}
		}
		if len(colours) < 20 {
			t.Errorf("%s: only %d colours", id, len(colours))
		}
	}
}

func TestVideoGIF(t *testing.T) {
	p := newProvider(t, t.TempDir(), 0, newClock())
	for _, secs := range []int{2, 4, 6} {
		t.Run(fmt.Sprint(secs, "s"), func(t *testing.T) {
			data, out := output(t, p, submit(t, p, provider.Request{Model: model(t, "local-motion"), Prompt: "drifting lights",
				AspectRatio: "16:9", DurationSeconds: secs}))
			if out.MimeType != "image/gif" {
				t.Errorf("mime = %q", out.MimeType)
			}
			if len(data) > 400<<10 {
				t.Errorf("GIF is %d KB, want a few hundred at most", len(data)>>10)
			}
			g, err := gif.DecodeAll(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Image) != secs*fps {
				t.Errorf("%d frames, want %d", len(g.Image), secs*fps)
			}
			total := 0
			for _, d := range g.Delay {
				total += d
			}
			if total != secs*100 {
				t.Errorf("clip lasts %d cs, want %d", total, secs*100)
			}
			if bytes.Equal(g.Image[0].Pix, g.Image[len(g.Image)/2].Pix) {
				t.Error("nothing moves")
			}
		})
	}
}

func TestAnimateInput(t *testing.T) {
	want := color.RGBA{30, 120, 220, 255}
	tests := []struct {
		name      string
		data      []byte
		mime      string
		firstIsIn bool // the first frame is the input image
		permanent bool
	}{
		{"png", solidImage(t, 64, 48, want, png.Encode), "image/png", true, false},
		{"jpeg", solidImage(t, 48, 64, want, encodeJPEG), "image/jpeg", true, false},
		{"webp kept but not drawn", webpHeader(300, 200), "image/webp", false, false},
		{"garbage", []byte("not an image"), "image/png", false, true},
		{"webp header only", []byte("RIFF\x10\x00\x00\x00WEBPVP8 not really"), "image/webp", false, true},
		{"webp over the pixel limit", webpHeader(16000, 16000), "image/webp", false, true},
		{"png over the side limit", pngHeader(maxInputSide+1, 2, 8, 2), "image/png", false, true},
		{"16-bit png bomb", pngHeader(20000, 20000, 16, 6), "image/png", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, t.TempDir(), 0, newClock())
			job, err := p.Submit(context.Background(), provider.Request{Model: model(t, "local-animate"), Prompt: "glow",
				AspectRatio: "16:9", DurationSeconds: 2, InputImage: input(tt.data, tt.mime)})
			if tt.permanent {
				var pe *provider.PermanentError
				if !errors.As(err, &pe) || p.JobCount() != 0 {
					t.Fatalf("err = %v, jobs = %d; want a PermanentError and no job", err, p.JobCount())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r, err := p.load(job.ID)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := os.ReadFile(p.inputPath(r.Input))
			if err != nil || !bytes.Equal(stored, tt.data) {
				t.Fatalf("input not kept with the job: %v", err)
			}
			data, _ := output(t, p, job)
			g, err := gif.DecodeAll(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			first := g.Image[0]
			near := func(c color.Color) bool {
				r, gr, b, _ := c.RGBA()
				d := func(a uint32, b uint8) bool { return math.Abs(float64(a>>8)-float64(b)) <= 12 } // JPEG is lossy
				return d(r, want.R) && d(gr, want.G) && d(b, want.B)
			}
			for _, pt := range []image.Point{{0, 0}, {240, 135}, {479, 269}} {
				if got := near(first.At(pt.X, pt.Y)); got != tt.firstIsIn {
					t.Errorf("first frame at %v is %v; input colour = %v, want %v", pt, first.At(pt.X, pt.Y), got, tt.firstIsIn)
				}
			}
		})
	}
}

func TestSubmitRejects(t *testing.T) {
	small := solidImage(t, 8, 8, color.RGBA{1, 2, 3, 255}, png.Encode)
	tests := []struct {
		name string
		req  provider.Request
	}{
		{"unknown model", provider.Request{Model: provider.Model{ID: "local-nope"}}},
		{"bad ratio", provider.Request{Model: model(t, "local-sketch"), AspectRatio: "2:1"}},
		{"bad duration", provider.Request{Model: model(t, "local-motion"), DurationSeconds: 5}},
		{"missing input", provider.Request{Model: model(t, "local-animate")}},
		{"unwanted input", provider.Request{Model: model(t, "local-sketch"), InputImage: input(small, "image/png")}},
	}
	p := newProvider(t, t.TempDir(), 1, newClock())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Submit(context.Background(), tt.req)
			var pe *provider.PermanentError
			if !errors.As(err, &pe) {
				t.Errorf("err = %v, want a PermanentError", err)
			}
		})
	}
	if n := p.JobCount(); n != 0 {
		t.Errorf("JobCount = %d after refusals", n)
	}
}

func TestProgression(t *testing.T) {
	c := newClock()
	p := newProvider(t, t.TempDir(), 1, c)
	job := submit(t, p, provider.Request{IdempotencyKey: "g1", Model: model(t, "local-photo"), Prompt: "hills"}) // 3 s, queued 450 ms
	tests := []struct {
		at      time.Duration
		state   provider.State
		message string
	}{
		{0, provider.StateQueued, "position 3 in line"},
		{200 * time.Millisecond, provider.StateQueued, "position 2 in line"},
		{400 * time.Millisecond, provider.StateQueued, "position 1 in line"},
		{450 * time.Millisecond, provider.StateRunning, "rendering"},
		{1725 * time.Millisecond, provider.StateRunning, "rendering"},
		{2900 * time.Millisecond, provider.StateRunning, "rendering"},
		{3 * time.Second, provider.StateCompleted, "completed"},
		{time.Hour, provider.StateCompleted, "completed"},
	}
	start, last := c.Now(), -1.0
	for _, tt := range tests {
		c.Advance(start.Add(tt.at).Sub(c.Now()))
		st := status(t, p, job)
		if st.State != tt.state || st.Message != tt.message {
			t.Errorf("at %v: %s %q, want %s %q", tt.at, st.State, st.Message, tt.state, tt.message)
		}
		if st.Progress < last || st.Progress < 0 || st.Progress > 1 {
			t.Errorf("at %v: progress %v after %v", tt.at, st.Progress, last)
		}
		last = st.Progress
		if (len(st.Outputs) == 1) != (tt.state == provider.StateCompleted) {
			t.Errorf("at %v: outputs %v", tt.at, st.Outputs)
		}
	}
}

func TestZeroScaleCompletesAtOnce(t *testing.T) {
	p := newProvider(t, t.TempDir(), 0, newClock())
	job := submit(t, p, provider.Request{Model: model(t, "local-motion"), Prompt: "now"})
	if st := status(t, p, job); st.State != provider.StateCompleted {
		t.Errorf("state = %s, want completed at once", st.State)
	}
}

func TestSlowToken(t *testing.T) {
	c := newClock()
	p := newProvider(t, t.TempDir(), 1, c)
	fast := submit(t, p, provider.Request{Model: model(t, "local-sketch"), Prompt: "quick"})
	slow := submit(t, p, provider.Request{Model: model(t, "local-sketch"), Prompt: "patient [SLOW]"})
	c.Advance(1500 * time.Millisecond) // sketch takes 1 s, 2 s when slow
	if st := status(t, p, fast); st.State != provider.StateCompleted {
		t.Errorf("fast job is %s", st.State)
	}
	if st := status(t, p, slow); st.State != provider.StateRunning {
		t.Errorf("slow job is %s", st.State)
	}
}

func TestCancel(t *testing.T) {
	tests := []struct {
		name  string
		after time.Duration // from submit to cancel; the video takes 20 s
		want  provider.State
	}{
		{"queued", time.Second, provider.StateCancelled},
		{"running", 10 * time.Second, provider.StateCancelled},
		{"completed", 20 * time.Second, provider.StateCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, dir := newClock(), t.TempDir()
			p := newProvider(t, dir, 1, c)
			job := submit(t, p, provider.Request{Model: model(t, "local-motion"), Prompt: "cancel me"})
			c.Advance(tt.after)
			before := status(t, p, job)
			st, err := p.Cancel(context.Background(), job)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != tt.want || st.Progress != before.Progress {
				t.Fatalf("Cancel = %s %v, want %s %v", st.State, st.Progress, tt.want, before.Progress)
			}
			// The outcome is final, and durable.
			c.Advance(time.Minute)
			again := status(t, newProvider(t, dir, 1, c), job)
			if again.State != tt.want || again.Progress != before.Progress {
				t.Errorf("later Status = %s %v, want %s %v", again.State, again.Progress, tt.want, before.Progress)
			}
			if tt.want == provider.StateCancelled {
				_, err := p.OpenOutput(context.Background(), job, provider.Output{URL: outputURL(job.ID, 0)})
				if err == nil {
					t.Error("a cancelled job has an output")
				}
			} else if len(again.Outputs) != 1 || len(st.Outputs) != 1 {
				t.Errorf("completed job lost its output: %+v", again)
			}
		})
	}
}

func TestFailToken(t *testing.T) {
	c, dir := newClock(), t.TempDir()
	p := newProvider(t, dir, 1, c)
	job := submit(t, p, provider.Request{Model: model(t, "local-photo"), Prompt: "please [fail] now"})
	if st := status(t, p, job); st.State != provider.StateQueued {
		t.Errorf("before its queue phase ends the job is %s", st.State)
	}
	c.Advance(450 * time.Millisecond) // the end of the queue phase
	for _, q := range []*Provider{p, newProvider(t, dir, 1, c)} {
		st := status(t, q, job)
		if st.State != provider.StateFailed || st.Error != failMessage || len(st.Outputs) != 0 {
			t.Errorf("status = %+v, want failed with %q", st, failMessage)
		}
		c.Advance(time.Minute)
	}
	if st, _ := p.Cancel(context.Background(), job); st.State != provider.StateFailed {
		t.Errorf("Cancel of a failed job = %s", st.State)
	}
}

func TestIdempotentSubmit(t *testing.T) {
	c, dir := newClock(), t.TempDir()
	p := newProvider(t, dir, 1, c)
	req := provider.Request{IdempotencyKey: "gen-1", Model: model(t, "local-sketch"), Prompt: "once"}

	// Concurrent submits, half through a second Provider on the same Dir
	// standing for another process.
	others := newProvider(t, dir, 1, c)
	var wg sync.WaitGroup
	jobs := make([]provider.Job, 8)
	for i := range jobs {
		wg.Go(func() {
			q := p
			if i%2 == 1 {
				q = others
			}
			var err error
			if jobs[i], err = q.Submit(context.Background(), req); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, j := range jobs {
		if j.ID != jobs[0].ID {
			t.Fatalf("two jobs for one key: %s and %s", j.ID, jobs[0].ID)
		}
	}
	changed := req
	changed.Prompt = "twice?"
	if again := submit(t, p, changed); again.ID != jobs[0].ID {
		t.Errorf("resubmit made job %s, want %s", again.ID, jobs[0].ID)
	}
	if n := p.JobCount(); n != 1 {
		t.Errorf("JobCount = %d, want 1", n)
	}

	found, ok, err := p.Find(context.Background(), "gen-1")
	if err != nil || !ok || found.ID != jobs[0].ID {
		t.Errorf("Find = %v %v %v, want %s", found, ok, err, jobs[0].ID)
	}
	if _, ok, err := p.Find(context.Background(), "gen-2"); ok || err != nil {
		t.Errorf("Find(unknown) = %v %v", ok, err)
	}

	// Without a key every submit is a new job.
	req.IdempotencyKey = ""
	if a, b := submit(t, p, req), submit(t, p, req); a.ID == b.ID {
		t.Error("keyless submits share a job")
	}
	if n := p.JobCount(); n != 3 {
		t.Errorf("JobCount = %d, want 3", n)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "local-provider", "jobs"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}

func TestRestart(t *testing.T) {
	c, dir := newClock(), t.TempDir()
	req := provider.Request{IdempotencyKey: "gen-r", Model: model(t, "local-motion"), Prompt: "survive", DurationSeconds: 2}
	old := newProvider(t, dir, 1, c)
	job := submit(t, old, req)
	c.Advance(10 * time.Second)
	running := status(t, old, job)

	// kill -9: the old Provider is simply gone; a new one reads the files.
	p := newProvider(t, dir, 1, c)
	if st := status(t, p, job); st.State != provider.StateRunning || st.Progress != running.Progress {
		t.Fatalf("after restart: %+v, want %+v", st, running)
	}
	if again := submit(t, p, req); again.ID != job.ID || p.JobCount() != 1 {
		t.Errorf("resubmit after restart made a new job")
	}
	c.Advance(10 * time.Second)
	got, _ := output(t, p, job)

	// A third process reads the rendered output as is, and it matches a
	// fresh render of the same request.
	again, _ := output(t, newProvider(t, dir, 1, c), job)
	fresh := newProvider(t, t.TempDir(), 0, c)
	want, _ := output(t, fresh, submit(t, fresh, req))
	if !bytes.Equal(got, again) || !bytes.Equal(got, want) {
		t.Error("output differs across restarts")
	}
}

func TestOpenOutputRejects(t *testing.T) {
	c := newClock()
	p := newProvider(t, t.TempDir(), 1, c)
	a := submit(t, p, provider.Request{Model: model(t, "local-sketch"), Prompt: "a"})
	b := submit(t, p, provider.Request{Model: model(t, "local-sketch"), Prompt: "b"})
	pending := submit(t, p, provider.Request{Model: model(t, "local-motion"), Prompt: "later"})
	c.Advance(2 * time.Second) // the sketches are done, the video is not
	status(t, p, a)
	tests := []struct {
		name string
		job  provider.Job
		url  string
	}{
		{"another job's output", a, outputURL(b.ID, 0)},
		{"no such index", a, outputURL(a.ID, 1)},
		{"not a local URL", a, "https://example.com/" + a.ID + "/0"},
		{"path traversal", provider.Job{ID: "../../etc"}, "local:../../etc/0"},
		{"unknown job", provider.Job{ID: newJobID("nobody")}, outputURL(newJobID("nobody"), 0)},
		{"not finished", pending, outputURL(pending.ID, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := p.OpenOutput(context.Background(), tt.job, provider.Output{URL: tt.url})
			if err == nil {
				rc.Close()
				t.Error("opened")
			}
		})
	}
	if _, err := p.Status(context.Background(), provider.Job{ID: "../x"}); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("Status(bad id) = %v, want ErrNotFound", err)
	}
}

func TestMP4WithFFmpeg(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs a shell script as ffmpeg")
	}
	tests := []struct {
		name, script, mime string
	}{
		{"converts", "#!/bin/sh\nprintf 'mp4 bytes'\n", "video/mp4"},
		{"broken ffmpeg keeps the GIF", "#!/bin/sh\necho nope >&2\nexit 1\n", "image/gif"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := newProvider(t, dir, 0, newClock())
			p.ffmpeg = filepath.Join(dir, "ffmpeg")
			if err := os.WriteFile(p.ffmpeg, []byte(tt.script), 0o755); err != nil {
				t.Fatal(err)
			}
			job := submit(t, p, provider.Request{Model: model(t, "local-motion"), Prompt: "mp4"})
			data, out := output(t, p, job)
			if out.MimeType != tt.mime {
				t.Errorf("mime = %q, want %q", out.MimeType, tt.mime)
			}
			if tt.mime == "video/mp4" && string(data) != "mp4 bytes" {
				t.Errorf("output = %q", data)
			}
			files, _ := os.ReadDir(p.outputDir(job.ID))
			if len(files) != 1 {
				t.Errorf("output folder holds %d files, want 1", len(files))
			}
		})
	}
}

func TestModels(t *testing.T) {
	p := newProvider(t, t.TempDir(), 0.5, newClock())
	models := p.Models()
	kinds := map[provider.Kind]int{}
	for _, m := range models {
		kinds[m.Kind]++
		if m.Provider != Name || m.Title == "" || m.Description == "" || m.Credits <= 0 || len(m.AspectRatios) == 0 {
			t.Errorf("%s: incomplete: %+v", m.ID, m)
		}
		if (m.Kind == provider.KindVideo) != (len(m.Durations) > 0) {
			t.Errorf("%s: durations %v", m.ID, m.Durations)
		}
		base, _ := lookup(m.ID)
		if m.ExpectedDuration != base.ExpectedDuration/2 {
			t.Errorf("%s: ExpectedDuration %v is not scaled", m.ID, m.ExpectedDuration)
		}
	}
	if kinds[provider.KindImage] < 2 || kinds[provider.KindVideo] < 1 {
		t.Errorf("catalog kinds = %v", kinds)
	}
	models[0].AspectRatios[0] = "changed"
	if p.Models()[0].AspectRatios[0] == "changed" {
		t.Error("Models shares its slices")
	}
}

func TestParseLatencyScale(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"", 1, true},
		{" 0 ", 0, true},
		{"0.25", 0.25, true},
		{"3", 3, true},
		{"-1", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1e6", 0, false},
		{"fast", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseLatencyScale(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseLatencyScale(%q) = %v, %v", tt.in, got, err)
		}
	}
	if _, err := New(Options{Dir: t.TempDir(), Scale: -1}); err == nil {
		t.Error("New accepted a negative scale")
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New accepted no Dir")
	}
}
