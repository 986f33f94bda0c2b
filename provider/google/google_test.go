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
	return newRigWith(t, nil, opts...)
}

// newRigWith is newRig with the adapter's config changed by cfg.
func newRigWith(t *testing.T, cfg func(*google.Config), opts ...func(*emulator.Options)) *rig {
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
	// An entry naming a model Google has retired, to see the refusal.
	models := append(catalog.Default(), catalog.Entry{ID: "google-retired", Provider: "google", API: "gemini", Kind: provider.KindImage,
		Endpoint: "gemini-2.5-flash-image", Input: catalog.InputMap{Prompt: "prompt"}, Credits: 1, ExpectedSeconds: 1})
	c := google.Config{
		Key: "gemini_test", BaseURL: em.Google.URL, Spool: provider.DirSpool(t.TempDir()), Models: models,
		RequestsPerMinute: -1, Now: em.Now,
		Fetch: fetch.Options{Hosts: []string{"127.0.0.1"}, AllowHTTP: true, AllowPrivate: true},
	}
	if cfg != nil {
		cfg(&c)
	}
	p, err := google.New(c)
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

// TestGoogleVideo runs Gemini Omni interactions to each end: done with
// a video, a late failure, a refusal in words, a cancel; and checks the
// request the SDK's types made.
func TestGoogleVideo(t *testing.T) {
	cases := []struct {
		name, model, prompt string
		image               bool
		refs                int
		cancel              bool
		want                provider.State
		wantMsg             string
		wantTask            any
	}{
		{name: "video", model: "google-omni-1.2-flash", prompt: "a lighthouse at dusk", want: provider.StateCompleted},
		{name: "first frame and a reference", model: "google-omni-1.1-flash", prompt: "the photo comes alive", image: true, refs: 1, want: provider.StateCompleted, wantTask: "image_to_video"},
		{name: "references", model: "google-omni-1.2-flash", prompt: "this cat, running", refs: 3, want: provider.StateCompleted, wantTask: "reference_to_video"},
		{name: "former veo id", model: "google-veo-3-fast", prompt: "a heron in fog", want: provider.StateCompleted},
		{name: "late failure", model: "google-omni-1.2-flash", prompt: "a storm [fail]", want: provider.StateFailed, wantMsg: "Gemini failed: Video generation failed"},
		{name: "refused in words", model: "google-omni-1.2-flash", prompt: "something [nsfw]", want: provider.StateFailed, wantMsg: "answered with text and no video"},
		{name: "cancel", model: "google-omni-1.2-flash", prompt: "a long take", cancel: true, want: provider.StateCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			req := provider.Request{IdempotencyKey: "gen-" + c.name, Model: r.model(t, c.model), Prompt: c.prompt, AspectRatio: "9:16", DurationSeconds: 8}
			if c.image {
				req.InputImage = pngInput("")
			}
			for range c.refs {
				req.Extra = append(req.Extra, *pngInput(provider.RoleReference))
			}
			job, err := r.p.Submit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			in := r.em.Inputs("google")[0]
			images := c.refs
			if c.image {
				images++
			}
			if in["prompt"] != c.prompt || in["aspect_ratio"] != "9:16" || in["duration"] != "8s" || in["resolution"] != "720p" ||
				in["delivery"] != "uri" || in["images"] != images || in["task"] != c.wantTask {
				t.Fatalf("request fields: %v", in)
			}
			st, err := r.p.Status(ctx, job)
			if err != nil || st.State != provider.StateQueued {
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
				t.Fatalf("%d interactions", n)
			}
		})
	}
}

// TestGoogleImages covers the Gemini image models' synchronous calls,
// the former ids that now run them, and what Google refuses.
func TestGoogleImages(t *testing.T) {
	cases := []struct {
		name, model, prompt string
		image               bool
		refs                int
		bigImage            bool
		wantModel           string // the vendor model the call reached
		wantErr             string // a PermanentError's message
	}{
		{name: "flash", model: "google-gemini-3.1-flash-image", prompt: "a fox", wantModel: "gemini-3.1-flash-image"},
		{name: "pro edit with references", model: "google-gemini-3-pro-image", prompt: "make it night", image: true, refs: 2, wantModel: "gemini-3-pro-image"},
		{name: "lite", model: "google-gemini-3.1-flash-lite-image", prompt: "a kite", wantModel: "gemini-3.1-flash-lite-image"},
		{name: "former imagen id", model: "google-imagen-4", prompt: "a heron", wantModel: "gemini-3.1-flash-image"},
		{name: "former 2.5 id", model: "google-gemini-2.5-flash-image", prompt: "a fox", image: true, wantModel: "gemini-3.1-flash-image"},
		{name: "refusal", model: "google-gemini-3.1-flash-image", prompt: "x [nsfw]", wantErr: "finish reason IMAGE_SAFETY"},
		{name: "invalid", model: "google-gemini-3.1-flash-image", prompt: "x [invalid]", wantErr: "invalid argument"},
		{name: "retired model", model: "google-retired", prompt: "a fox", wantErr: "does not serve model gemini-2.5-flash-image"},
		{name: "input image over 7 MB", model: "google-gemini-3.1-flash-image", prompt: "a fox", bigImage: true, wantErr: "larger than the 7 MB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			req := provider.Request{IdempotencyKey: "g-" + c.name, Model: r.model(t, c.model), Prompt: c.prompt, AspectRatio: "16:9"}
			if c.image {
				req.InputImage = pngInput("")
			}
			if c.bigImage {
				req.InputImage = &provider.Input{MimeType: "image/png", Open: func(context.Context) (io.ReadCloser, error) {
					return io.NopCloser(bytes.NewReader(make([]byte, 7<<20+1))), nil
				}}
			}
			for range c.refs {
				req.Extra = append(req.Extra, *pngInput(provider.RoleReference))
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
			images := c.refs
			if c.image {
				images++
				if in["image"] != "image/png" {
					t.Fatalf("no inline image sent: %v", in)
				}
			}
			if in["images"] != images || in["prompt"] != c.prompt {
				t.Fatalf("request: %v, want %d images", in, images)
			}
			if got := r.em.Models("google"); len(got) != 1 || got[0] != c.wantModel {
				t.Fatalf("called %v, want %s", got, c.wantModel)
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
	req := provider.Request{IdempotencyKey: "gen-cut", Model: r.model(t, "google-gemini-3.1-flash-image"), Prompt: "a kite"}
	// Google says when to come back in the body (RetryInfo), not in a
	// Retry-After header.
	r.em.Inject(emulator.Rule{Provider: "google", Op: emulator.OpCreate, Fault: emulator.Fault429, Times: 1, RetryAfter: 37 * time.Second})
	_, err := r.p.Submit(ctx, req)
	var re *provider.RetryableError
	if !errors.Is(err, provider.ErrNotCreated) || !errors.As(err, &re) || re.After != 37*time.Second {
		t.Fatalf("throttled submit: %v, want a retry after the 37 s Google named", err)
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

// TestGoogleVideoLostReply: a crash after the interaction was journalled
// finds that interaction again.
func TestGoogleVideoLostReply(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	req := provider.Request{IdempotencyKey: "gen-v", Model: r.model(t, "google-omni-1.2-flash"), Prompt: "waves"}
	job, err := r.p.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if found, ok, err := r.p.Find(ctx, req.IdempotencyKey); !ok || err != nil || found.ID != job.ID || job.ID == "" {
		t.Fatalf("Find: %v %v %v", found, ok, err)
	}
}

// TestGoogleVideoOutages: a status call during an outage is a retry, not
// an end; a cancel after it still stops the interaction.
func TestGoogleVideoOutages(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	job, err := r.p.Submit(ctx, provider.Request{IdempotencyKey: "gen-o", Model: r.model(t, "google-omni-1.1-flash"), Prompt: "rain"})
	if err != nil {
		t.Fatal(err)
	}
	r.em.Inject(emulator.Rule{Provider: "google", Op: emulator.OpStatus, Fault: emulator.Fault500, Times: 1})
	var re *provider.RetryableError
	if _, err := r.p.Status(ctx, job); !errors.As(err, &re) {
		t.Fatalf("status during an outage: %v", err)
	}
	r.em.Advance(5 * time.Second)
	if st, err := r.p.Cancel(ctx, job); err != nil || st.State != provider.StateCancelled {
		t.Fatalf("cancel: %+v %v", st, err)
	}
	r.em.Advance(time.Minute)
	if st, err := r.p.Status(ctx, job); err != nil || st.State != provider.StateCancelled {
		t.Fatalf("after the cancel: %+v %v", st, err)
	}
}
