package google_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/google"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// vertexRig is a provider with only Vertex AI, signed in with the
// emulator's service account key (or creds, when given).
func vertexRig(t *testing.T, creds []byte) *rig {
	t.Helper()
	em := emulator.New(emulator.Options{
		Clock:  emulator.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)),
		Timing: func(string) (time.Duration, time.Duration) { return time.Second, 40 * time.Second },
	})
	t.Cleanup(em.Close)
	if creds == nil {
		creds = em.ServiceAccountJSON()
	}
	models := append(catalog.Default(), catalog.Entry{ID: "google-veo-3-retired", Provider: "google", API: "veo", Kind: provider.KindVideo,
		Endpoint: "veo-3.0-generate-001", Input: catalog.InputMap{Prompt: "prompt"}, Credits: 1, ExpectedSeconds: 1})
	p, err := google.New(google.Config{
		Vertex: &google.Vertex{Project: emulator.DefaultVertexProject, Location: emulator.DefaultVertexLocation, BaseURL: em.Vertex.URL, Credentials: creds},
		Spool:  provider.DirSpool(t.TempDir()), Models: models, RequestsPerMinute: -1, Now: em.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{em: em, p: p}
}

// TestVertexModels: with Vertex alone, the provider serves the Veo
// entries and nothing of the Gemini API's; with a key alone, the reverse.
func TestVertexModels(t *testing.T) {
	ids := func(p *google.Provider) (veo, other int) {
		for _, m := range p.Models() {
			if strings.HasPrefix(m.ID, "google-veo-3.1") {
				veo++
			} else {
				other++
			}
		}
		return
	}
	if veo, other := ids(vertexRig(t, nil).p); veo != 2 || other != 1 { // the retired test entry
		t.Fatalf("Vertex alone serves %d Veo 3.1 and %d other models", veo, other)
	}
	if veo, other := ids(newRig(t).p); veo != 0 || other == 0 {
		t.Fatalf("a key alone serves %d Veo 3.1 and %d other models", veo, other)
	}
}

// TestVertexVeo runs Veo 3.1 operations on Vertex AI to each end: the
// video inline in the finished operation, spooled and read back; a late
// failure; the safety filter; a cancel Vertex cannot do; a retired model.
func TestVertexVeo(t *testing.T) {
	cases := []struct {
		name, model, prompt string
		frames              bool // first and last frame, two references
		cancel              bool
		want                provider.State
		wantMsg             string
	}{
		{name: "video", model: "google-veo-3.1-fast", prompt: "a lighthouse at dusk", want: provider.StateCompleted},
		{name: "frames and references", model: "google-veo-3.1", prompt: "from dawn to dusk", frames: true, want: provider.StateCompleted},
		{name: "late failure", model: "google-veo-3.1", prompt: "a storm [fail]", want: provider.StateFailed, wantMsg: "Veo failed: Video generation failed"},
		{name: "safety filter", model: "google-veo-3.1-fast", prompt: "something [nsfw]", want: provider.StateFailed, wantMsg: "safety filters removed the video: Your prompt was blocked"},
		{name: "no cancel", model: "google-veo-3.1", prompt: "a long take", cancel: true, want: provider.StateCompleted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := vertexRig(t, nil)
			ctx := context.Background()
			req := provider.Request{IdempotencyKey: "gen-" + c.name, Model: r.model(t, c.model), Prompt: c.prompt, NegativePrompt: "blur", AspectRatio: "9:16", DurationSeconds: 6}
			if c.frames {
				req.InputImage = pngInput("")
				req.Extra = []provider.Input{*pngInput(provider.RoleLastFrame), *pngInput(provider.RoleReference), *pngInput(provider.RoleReference)}
			}
			job, err := r.p.Submit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			in := r.em.Inputs("vertex")[0]
			if in["prompt"] != c.prompt || in["aspectRatio"] != "9:16" || in["durationSeconds"] != float64(6) || in["negativePrompt"] != "blur" ||
				in["resolution"] != "720p" || in["generateAudio"] != true || in["image"] != c.frames || in["lastFrame"] != c.frames || in["referenceImages"] != map[bool]int{true: 2}[c.frames] {
				t.Fatalf("request fields: %v", in)
			}
			st, err := r.p.Status(ctx, job)
			if err != nil || st.State != provider.StateRunning {
				t.Fatalf("first look: %+v %v", st, err)
			}
			if c.cancel {
				st, err := r.p.Cancel(ctx, job)
				if err != nil || st.State != provider.StateRunning || !strings.Contains(st.Message, "does not cancel") || r.em.Count("vertex", emulator.OpCancel) != 0 {
					t.Fatalf("cancel: %+v %v", st, err)
				}
			}
			r.em.Advance(time.Minute)
			if st, err = r.p.Status(ctx, job); err != nil {
				t.Fatal(err)
			}
			if st.State != c.want || !strings.Contains(st.Error, c.wantMsg) {
				t.Fatalf("ended %+v, want %s %q", st, c.want, c.wantMsg)
			}
			if c.want == provider.StateCompleted {
				if len(st.Outputs) != 1 || st.Outputs[0].MimeType != "video/mp4" {
					t.Fatalf("outputs %v", st.Outputs)
				}
				if b := read(t, r.p, job, st.Outputs[0]); !bytes.Equal(b, emulator.MP4()) {
					t.Fatalf("video: %d bytes", len(b))
				}
			}
			if n := r.em.Count("vertex", emulator.OpToken); n != 1 {
				t.Fatalf("%d token exchanges, want one reused", n)
			}
		})
	}
}

// TestVertexRefusals: a retired model and refused credentials end the
// submit at once, permanently, with nothing made.
func TestVertexRefusals(t *testing.T) {
	// A key Google does not know: the token exchange fails on its
	// signature.
	k, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	cases := []struct {
		name, model string
		creds       func(good []byte) []byte
		wantErr     string
	}{
		{name: "retired model", model: "google-veo-3-retired", wantErr: "Vertex AI does not serve model veo-3.0-generate-001"},
		{name: "foreign key", model: "google-veo-3.1", creds: func(good []byte) []byte {
			var f map[string]string
			json.Unmarshal(good, &f)
			f["private_key"] = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
			b, _ := json.Marshal(f)
			return b
		}, wantErr: "Google refused darkroom's Vertex AI credentials"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := vertexRig(t, nil)
			if c.creds != nil {
				// Same emulator (its token_uri), another key.
				p, err := google.New(google.Config{
					Vertex: &google.Vertex{Project: emulator.DefaultVertexProject, Location: emulator.DefaultVertexLocation, BaseURL: r.em.Vertex.URL, Credentials: c.creds(r.em.ServiceAccountJSON())},
					Spool:  provider.DirSpool(t.TempDir()), RequestsPerMinute: -1, Now: r.em.Now,
				})
				if err != nil {
					t.Fatal(err)
				}
				r.p = p
			}
			_, err := r.p.Submit(context.Background(), provider.Request{IdempotencyKey: "gen-r", Model: r.model(t, c.model), Prompt: "waves"})
			var perm *provider.PermanentError
			if !errors.As(err, &perm) || !strings.Contains(perm.Message, c.wantErr) {
				t.Fatalf("Submit err = %v, want %q", err, c.wantErr)
			}
			if n := r.em.Jobs("vertex"); n != 0 {
				t.Fatalf("%d operations made", n)
			}
		})
	}
}

// TestVertexForeignOperation: a recorded Veo operation that is not of
// this server's project (an old Gemini API one, or another project's) is
// never fetched: it ends with a permanent error.
func TestVertexForeignOperation(t *testing.T) {
	r := vertexRig(t, nil)
	for _, op := range []string{
		"models/veo-3.0-generate-001/operations/abc", // the Gemini API's, from before Omni
		"projects/other/locations/us-central1/publishers/google/models/veo-3.1-generate-001/operations/abc",
	} {
		data, _ := json.Marshal(map[string]string{"modelId": "google-veo-3.1", "key": "g", "operation": op})
		_, err := r.p.Status(context.Background(), provider.Job{ID: op, Data: data})
		var perm *provider.PermanentError
		if !errors.As(err, &perm) || r.em.Count("vertex", emulator.OpStatus) != 0 {
			t.Fatalf("%s: %v, %d fetches", op, err, r.em.Count("vertex", emulator.OpStatus))
		}
	}
}
