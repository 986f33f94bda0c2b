package openai_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/openai"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

func newRig(t *testing.T, base func(*emulator.Emulator) string) (*emulator.Emulator, *openai.Provider) {
	t.Helper()
	em := emulator.New(emulator.Options{Clock: emulator.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))})
	t.Cleanup(em.Close)
	p, err := openai.New(openai.Config{
		Key: "sk-test", BaseURL: base(em), Organization: "org-1", Project: "proj-1",
		Spool: provider.DirSpool(t.TempDir()), RequestsPerMinute: -1, Now: em.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return em, p
}

func model(t *testing.T, p *openai.Provider, id string) provider.Model {
	for _, m := range p.Models() {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("no model %s", id)
	return provider.Model{}
}

// withInputs gives req an input image, a mask and refs references, as a
// case asks.
func withInputs(req provider.Request, image, mask bool, refs int) provider.Request {
	if image {
		in := png("")
		req.InputImage = &in
	}
	if mask {
		req.Extra = []provider.Input{png("mask")}
	}
	for range refs {
		req.Extra = append(req.Extra, png("reference"))
	}
	return req
}

func png(role string) provider.Input {
	return provider.Input{Role: role, MimeType: "image/png", Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(emulator.PNG())), nil
	}}
}

// TestOpenAIImages: a generation, an edit, a masked edit, and each
// refusal OpenAI documents, as darkroom sees them.
func TestOpenAIImages(t *testing.T) {
	cases := []struct {
		name, prompt string
		image, mask  bool
		refs         int  // reference images
		baseV1       bool // a base URL ending in /v1, as gateways give it
		wantErr      string
		retryable    bool
	}{
		{name: "generation", prompt: "a lighthouse"},
		{name: "generation via /v1 base", prompt: "a harbour", baseV1: true},
		{name: "edit", prompt: "add a moon", image: true},
		{name: "masked edit", prompt: "fill the sky", image: true, mask: true},
		{name: "edit with references", prompt: "in their style", image: true, refs: 2},
		{name: "references only", prompt: "these two together", refs: 2},
		{name: "masked edit with a reference", prompt: "the reference in the mask", image: true, mask: true, refs: 1},
		{name: "moderation", prompt: "x [nsfw]", wantErr: "safety system refused"},
		{name: "quota", prompt: "x [quota]", wantErr: "insufficient_quota"},
		{name: "invalid", prompt: "x [invalid]", wantErr: "Invalid value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			em, p := newRig(t, func(em *emulator.Emulator) string {
				if c.baseV1 {
					return em.OpenAI.URL + "/v1"
				}
				return em.OpenAI.URL
			})
			ctx := context.Background()
			req := withInputs(provider.Request{IdempotencyKey: "gen-" + c.name, Model: model(t, p, "openai-gpt-image-1"), Prompt: c.prompt, AspectRatio: "3:2"}, c.image, c.mask, c.refs)
			job, err := p.Submit(ctx, req)
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
			st, err := p.Status(ctx, job)
			if err != nil || st.State != provider.StateCompleted || len(st.Outputs) != 1 {
				t.Fatalf("status %+v %v", st, err)
			}
			rc, err := p.OpenOutput(ctx, job, st.Outputs[0])
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(b, emulator.PNG()) {
				t.Fatalf("image: %d bytes", len(b))
			}
			in := em.Inputs("openai")[0]
			if in["size"] != "1536x1024" || in["quality"] != "medium" || in["model"] != "gpt-image-2" || in["output_format"] != "png" ||
				in["header:OpenAI-Organization"] != "org-1" || in["header:OpenAI-Project"] != "proj-1" {
				t.Fatalf("request fields: %v", in)
			}
			// One image goes as image, several as image[] (main first).
			n := c.refs
			if c.image {
				n++
			}
			images := map[int]map[string]any{0: {}, 1: {"image": "image/png"},
				2: {"image[]": "image/png,image/png"}, 3: {"image[]": "image/png,image/png,image/png"}}[n]
			for _, k := range []string{"image", "image[]"} {
				if in[k] != images[k] {
					t.Fatalf("edit images: %v, want %v", in, images)
				}
			}
			if c.mask != (in["mask"] == true) {
				t.Fatalf("edit mask: %v", in)
			}
		})
	}
}

// TestOpenAIRateLimit: a 429 with Retry-After is a retry after that
// wait, known to have made nothing (not counted as an attempt).
func TestOpenAIRateLimit(t *testing.T) {
	em, p := newRig(t, func(em *emulator.Emulator) string { return em.OpenAI.URL })
	em.Inject(emulator.Rule{Provider: "openai", Op: emulator.OpCreate, Fault: emulator.Fault429, Times: 1, RetryAfter: 7 * time.Second})
	req := provider.Request{IdempotencyKey: "gen-rl", Model: model(t, p, "openai-gpt-image-1-mini"), Prompt: "a kite"}
	_, err := p.Submit(context.Background(), req)
	var re *provider.RetryableError
	if !errors.As(err, &re) || re.After != 7*time.Second || !errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("429: %v", err)
	}
	if _, ok, err := p.Find(context.Background(), req.IdempotencyKey); ok || err != nil {
		t.Fatalf("a throttled call counted as an attempt: %v %v", ok, err)
	}
	if _, err := p.Submit(context.Background(), req); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
}

// TestOpenAIRetiredModel: an entry still naming a model OpenAI shut down
// (an operator's old override file) fails at once with OpenAI's own
// words, not as something to retry.
func TestOpenAIRetiredModel(t *testing.T) {
	for _, endpoint := range []string{"gpt-image-1", "gpt-image-1-mini"} {
		t.Run(endpoint, func(t *testing.T) {
			em := emulator.New(emulator.Options{})
			t.Cleanup(em.Close)
			var es []catalog.Entry
			for _, e := range catalog.ForProvider(catalog.Default(), "openai") {
				e.Endpoint = endpoint
				es = append(es, e)
			}
			p, err := openai.New(openai.Config{Key: "sk-test", BaseURL: em.OpenAI.URL, Models: es, Spool: provider.DirSpool(t.TempDir()), RequestsPerMinute: -1})
			if err != nil {
				t.Fatal(err)
			}
			for _, image := range []bool{false, true} {
				req := provider.Request{IdempotencyKey: fmt.Sprint("g-", image), Model: model(t, p, "openai-gpt-image-2"), Prompt: "a kite"}
				if image {
					in := png("")
					req.InputImage = &in
				}
				_, err := p.Submit(context.Background(), req)
				var perm *provider.PermanentError
				if !errors.As(err, &perm) || !strings.Contains(perm.Message, "The model `"+endpoint+"` has been deprecated") {
					t.Fatalf("edit %v: %v, want OpenAI's model_not_found refusal", image, err)
				}
			}
			if em.Jobs("openai") != 0 {
				t.Fatal("a retired model made a job")
			}
		})
	}
}

// TestOpenAIRetryAfterMs: a 429's Retry-After-Ms is the wait, before
// Retry-After, as openai-go honours them; without it Retry-After is.
func TestOpenAIRetryAfterMs(t *testing.T) {
	cases := []struct {
		ms, s string
		want  time.Duration
	}{
		{"1500", "7", 1500 * time.Millisecond},
		{"", "7", 7 * time.Second},
		{"0.5", "", 500 * time.Microsecond},
		{"-3", "7", 7 * time.Second},
		{"NaN", "7", 7 * time.Second},
		{"1e12", "7", 7 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.ms+"/"+c.s, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.ms != "" {
					w.Header().Set("Retry-After-Ms", c.ms)
				}
				if c.s != "" {
					w.Header().Set("Retry-After", c.s)
				}
				w.WriteHeader(429)
				io.WriteString(w, `{"error":{"message":"Rate limit reached for images per minute.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
			}))
			t.Cleanup(srv.Close)
			p, err := openai.New(openai.Config{Key: "sk-test", BaseURL: srv.URL, Spool: provider.DirSpool(t.TempDir()), RequestsPerMinute: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Submit(context.Background(), provider.Request{IdempotencyKey: "g", Model: model(t, p, "openai-gpt-image-2"), Prompt: "a kite"})
			var re *provider.RetryableError
			if !errors.As(err, &re) || re.After != c.want || !errors.Is(err, provider.ErrNotCreated) {
				t.Fatalf("%v (after %v), want a retry after %v", err, re, c.want)
			}
		})
	}
}
