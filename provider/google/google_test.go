package google_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/fetch"
	"github.com/darkroom-mcp/darkroom/provider/google"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

type rig struct {
	em *emulator.Emulator
	p  *google.Provider
}

func newRig(t *testing.T, opts ...func(*emulator.Options)) *rig {
	t.Helper()
	o := emulator.Options{
		Clock:  emulator.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)),
		Timing: func(string) (time.Duration, time.Duration) { return time.Second, 40 * time.Second },
	}
	for _, f := range opts {
		f(&o)
	}
	em := emulator.New(o)
	t.Cleanup(em.Close)
	// Veo 3.0 takes no last frame or references; a catalog entry that says
	// it does drives veoExtras against the emulator.
	models := catalog.Default()
	for i := range models {
		if models[i].ID == "google-veo-3-fast" {
			models[i].Roles = map[string]catalog.Role{provider.RoleLastFrame: {}, provider.RoleReference: {Max: 3}}
		}
	}
	p, err := google.New(google.Config{
		Key: "gemini_test", BaseURL: em.Google.URL, Spool: provider.DirSpool(t.TempDir()), Models: models,
		RequestsPerMinute: -1, Now: em.Now,
		Fetch: fetch.Options{Hosts: []string{"127.0.0.1"}, AllowHTTP: true, AllowPrivate: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{em: em, p: p}
}

func (r *rig) model(t *testing.T, id string) provider.Model {
	t.Helper()
	for _, m := range r.p.Models() {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("no model %s", id)
	return provider.Model{}
}

func pngInput(role string) *provider.Input {
	return &provider.Input{Role: role, MimeType: "image/png", Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(emulator.PNG())), nil
	}}
}

func read(t *testing.T, p provider.Provider, job provider.Job, out provider.Output) []byte {
	t.Helper()
	rc, err := p.OpenOutput(context.Background(), job, out)
	if err != nil {
		t.Fatalf("open output: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoogleVeo runs Veo operations to each end: done with a video,
// a late error, a safety filter, a cancel.
func TestGoogleVeo(t *testing.T) {
	cases := []struct {
		name, prompt string
		cancel       bool
		want         provider.State
		wantMsg      string
	}{
		{name: "video", prompt: "a lighthouse at dusk", want: provider.StateCompleted},
		{name: "late failure", prompt: "a storm [fail]", want: provider.StateFailed, wantMsg: "Veo failed: Video generation failed"},
		{name: "safety filter", prompt: "something [nsfw]", want: provider.StateFailed, wantMsg: "safety filters removed the video"},
		{name: "cancel", prompt: "a long take", cancel: true, want: provider.StateCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			req := provider.Request{IdempotencyKey: "gen-" + c.name, Model: r.model(t, "google-veo-3-fast"), Prompt: c.prompt,
				NegativePrompt: "blur", AspectRatio: "9:16", DurationSeconds: 8, InputImage: pngInput(""),
				Extra: []provider.Input{*pngInput(provider.RoleLastFrame), *pngInput(provider.RoleReference)}}
			job, err := r.p.Submit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			in := r.em.Inputs("google")[0]
			if in["aspectRatio"] != "9:16" || in["durationSeconds"] != float64(8) || in["negativePrompt"] != "blur" ||
				in["resolution"] != "720p" || in["image"] != true || in["lastFrame"] != true || in["referenceImages"] != 1 {
				t.Fatalf("request fields: %v", in)
			}
			st, err := r.p.Status(ctx, job)
			if err != nil || st.State != provider.StateRunning {
				t.Fatalf("first look: %+v %v", st, err)
			}
			if c.cancel {
				r.em.Advance(5 * time.Second)
				if st, err = r.p.Cancel(ctx, job); err != nil {
					t.Fatal(err)
				}
			} else {
				r.em.Advance(time.Minute)
				if st, err = r.p.Status(ctx, job); err != nil {
					t.Fatal(err)
				}
			}
			if st.State != c.want || !strings.Contains(st.Error, c.wantMsg) {
				t.Fatalf("ended %+v, want %s %q", st, c.want, c.wantMsg)
			}
			if c.want == provider.StateCompleted {
				if b := read(t, r.p, job, st.Outputs[0]); !bytes.Equal(b, emulator.MP4()) {
					t.Fatalf("video: %d bytes", len(b))
				}
				if n := r.em.Count("files", "credential"); n != 0 {
					t.Fatalf("the file host saw the API key %d times", n)
				}
			}
			if n := r.em.Jobs("google"); n != 1 {
				t.Fatalf("%d operations", n)
			}
		})
	}
}

// TestGoogleImages covers Imagen's and Gemini's synchronous calls.
func TestGoogleImages(t *testing.T) {
	cases := []struct {
		name, model, prompt string
		image               bool
		wantErr             string // a PermanentError's message
	}{
		{name: "imagen", model: "google-imagen-4", prompt: "a heron"},
		{name: "imagen filtered", model: "google-imagen-4-fast", prompt: "a heron [nsfw]", wantErr: "safety filters removed the image"},
		{name: "gemini", model: "google-gemini-2.5-flash-image", prompt: "a fox"},
		{name: "gemini edit", model: "google-gemini-2.5-flash-image", prompt: "make it night", image: true},
		{name: "gemini refusal", model: "google-gemini-2.5-flash-image", prompt: "x [nsfw]", wantErr: "finish reason IMAGE_SAFETY"},
		{name: "invalid", model: "google-imagen-4", prompt: "x [invalid]", wantErr: "invalid argument"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			req := provider.Request{IdempotencyKey: "g-" + c.name, Model: r.model(t, c.model), Prompt: c.prompt, AspectRatio: "16:9"}
			if c.image {
				req.InputImage = pngInput("")
			}
			job, err := r.p.Submit(ctx, req)
			var perm *provider.PermanentError
			if c.wantErr != "" {
				if !errors.As(err, &perm) || !strings.Contains(perm.Message, c.wantErr) {
					t.Fatalf("Submit err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, err := r.p.Status(ctx, job)
			if err != nil || st.State != provider.StateCompleted || len(st.Outputs) != 1 || st.Outputs[0].MimeType != "image/png" {
				t.Fatalf("status %+v %v", st, err)
			}
			if b := read(t, r.p, job, st.Outputs[0]); !bytes.Equal(b, emulator.PNG()) {
				t.Fatalf("image: %d bytes", len(b))
			}
			in := r.em.Inputs("google")[0]
			if c.image && in["image"] != "image/png" {
				t.Fatalf("no inline image sent: %v", in)
			}
			if strings.Contains(c.model, "imagen") && (in["sampleCount"] != float64(1) || in["aspectRatio"] != "16:9" || in["personGeneration"] != "allow_adult") {
				t.Fatalf("imagen parameters: %v", in)
			}
		})
	}
}

// TestGoogleInterruptedCall: a call cut off mid-reply (the outcome
// unknown) is resubmitted once and says so; a second cut-off is never
// resubmitted; a throttled call counts as no attempt.
func TestGoogleInterruptedCall(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	req := provider.Request{IdempotencyKey: "gen-cut", Model: r.model(t, "google-imagen-4"), Prompt: "a kite"}
	r.em.Inject(emulator.Rule{Provider: "google", Op: emulator.OpCreate, Fault: emulator.Fault429, Times: 1})
	_, err := r.p.Submit(ctx, req)
	if !errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("throttled submit: %v", err)
	}
	if _, ok, err := r.p.Find(ctx, req.IdempotencyKey); ok || err != nil {
		t.Fatalf("a throttled call counted as an attempt: %v %v", ok, err)
	}
	r.em.Inject(emulator.Rule{Provider: "google", Op: emulator.OpCreate, Fault: emulator.FaultLoseReply, Times: 1})
	if _, err := r.p.Submit(ctx, req); err == nil || errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("lost reply: %v (its outcome is unknown)", err)
	}
	if _, _, err := r.p.Find(ctx, req.IdempotencyKey); !errors.Is(err, provider.ErrResubmitOnce) {
		t.Fatalf("Find after one cut-off: %v", err)
	}
	job, err := r.p.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if found, ok, err := r.p.Find(ctx, req.IdempotencyKey); !ok || err != nil || found.ID != job.ID {
		t.Fatalf("Find after the resubmit: %v %v %v", found, ok, err)
	}
	st, _ := r.p.Status(ctx, job)
	if !strings.HasPrefix(st.Message, provider.ResubmittedNote) {
		t.Fatalf("a resubmitted job does not say so: %q", st.Message)
	}
	// The runner has recorded the job: the journal is gone.
	if _, ok, err := r.p.Find(ctx, req.IdempotencyKey); ok || err != nil {
		t.Fatalf("Find once recorded: %v %v", ok, err)
	}
	// Two cut-offs: never a third call.
	req.IdempotencyKey = "gen-cut-twice"
	r.em.Inject(emulator.Rule{Provider: "google", Op: emulator.OpCreate, Fault: emulator.FaultLoseReply, Times: 2})
	r.p.Submit(ctx, req)
	r.p.Submit(ctx, req)
	if _, _, err := r.p.Find(ctx, req.IdempotencyKey); !errors.Is(err, provider.ErrUnsupported) || !r.p.ResubmitMayDuplicate() {
		t.Fatalf("Find after two cut-offs: %v", err)
	}
}

// TestGoogleVeoLostReply: the operation a lost reply made is not found
// again (the API cannot list by our key), so the journal allows one more.
func TestGoogleVeoLostReply(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	req := provider.Request{IdempotencyKey: "gen-v", Model: r.model(t, "google-veo-3"), Prompt: "waves"}
	job, err := r.p.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// A crash after the operation was journalled finds that operation.
	if found, ok, err := r.p.Find(ctx, req.IdempotencyKey); !ok || err != nil || found.ID != job.ID || !strings.Contains(job.ID, "/operations/") {
		t.Fatalf("Find: %v %v %v", found, ok, err)
	}
}

// TestGoogleVeoOutages: a status call during an outage is a retry, not
// an end; a refused cancel leaves the operation running to its end.
func TestGoogleVeoOutages(t *testing.T) {
	r := newRig(t, func(o *emulator.Options) { o.GoogleNoCancel = true })
	ctx := context.Background()
	job, err := r.p.Submit(ctx, provider.Request{IdempotencyKey: "gen-o", Model: r.model(t, "google-veo-3"), Prompt: "rain"})
	if err != nil {
		t.Fatal(err)
	}
	r.em.Inject(emulator.Rule{Provider: "google", Op: emulator.OpStatus, Fault: emulator.Fault500, Times: 1})
	var re *provider.RetryableError
	if _, err := r.p.Status(ctx, job); !errors.As(err, &re) {
		t.Fatalf("status during an outage: %v", err)
	}
	st, err := r.p.Cancel(ctx, job)
	if err != nil || st.State != provider.StateRunning || !strings.Contains(st.Message, "does not cancel") {
		t.Fatalf("refused cancel: %+v %v", st, err)
	}
	r.em.Advance(time.Minute)
	if st, err := r.p.Status(ctx, job); err != nil || st.State != provider.StateCompleted {
		t.Fatalf("after the outage: %+v %v", st, err)
	}
}
