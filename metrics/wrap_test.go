package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/metrics"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
)

func TestProviderOutcome(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{provider.ErrNotCreated, "not_created"},
		{fmt.Errorf("fal: %w", provider.ErrNotCreated), "not_created"},
		// A retryable refusal that surely made no job is not_created.
		{&provider.RetryableError{Err: provider.ErrNotCreated, After: time.Second}, "not_created"},
		{provider.ErrUnsupported, "unsupported"},
		{fmt.Errorf("find: %w", provider.ErrUnsupported), "unsupported"},
		{&provider.PermanentError{Message: "safety filter"}, "permanent"},
		{fmt.Errorf("submit: %w", &provider.PermanentError{Message: "bad input"}), "permanent"},
		{&provider.RetryableError{Err: boom}, "retryable"},
		{fmt.Errorf("status: %w", &provider.RetryableError{Err: boom}), "retryable"},
		// A retryable fault that a timeout caused is still retryable.
		{&provider.RetryableError{Err: context.DeadlineExceeded}, "retryable"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "canceled"},
		{fmt.Errorf("post: %w", context.Canceled), "canceled"},
		{provider.ErrNotFound, "error"},
		{boom, "error"},
	}
	for _, tt := range tests {
		if got := metrics.ProviderOutcome(tt.err); got != tt.want {
			t.Errorf("ProviderOutcome(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

// providerSeries is the one call a test made through the wrapper.
func providerSeries(op, outcome string, seconds float64) map[string]float64 {
	l := fmt.Sprintf(`{operation=%q,outcome=%q,provider="local"}`, op, outcome)
	return map[string]float64{
		"darkroom_provider_calls_total" + l:                 1,
		"darkroom_provider_call_duration_seconds_count" + l: 1,
		"darkroom_provider_call_duration_seconds_sum" + l:   seconds,
	}
}

// pngInput is an input image whose Open takes wait (on the bubble's
// clock) and then fails with err, or gives a small PNG.
func pngInput(t *testing.T, wait time.Duration, err error) *provider.Input {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	return &provider.Input{MimeType: "image/png", URL: "test:input", Open: func(context.Context) (io.ReadCloser, error) {
		time.Sleep(wait)
		if err != nil {
			return nil, err
		}
		return io.NopCloser(&buf), nil
	}}
}

// is matches err to target (nil: no error).
func is(target error) func(error) bool {
	return func(err error) bool { return err == target || target != nil && errors.Is(err, target) }
}

func isPermanent(err error) bool {
	var perm *provider.PermanentError
	return errors.As(err, &perm)
}

// lp is the local provider behind a wrapper.
func lp(p provider.Provider) *local.Provider {
	l, _ := provider.As[*local.Provider](p)
	return l
}

// TestProviderWrapper makes each call on the local provider through the
// wrapper, in a synctest bubble so the time it records is exact: an input
// image's Open is the one part of a call that takes time.
func TestProviderWrapper(t *testing.T) {
	sketch := provider.Model{ID: "local-sketch"}
	animate := provider.Model{ID: "local-animate"}
	retry := &provider.RetryableError{Err: errors.New("upstream 503")}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	type call func(ctx context.Context, p provider.Provider, job provider.Job) error
	tests := []struct {
		name    string
		call    call
		want    map[string]float64
		wantErr func(error) bool // the wrapper hands back the call's error
	}{
		{"submit", func(ctx context.Context, p provider.Provider, _ provider.Job) error {
			_, err := p.Submit(ctx, provider.Request{IdempotencyKey: "g2", Model: sketch, AspectRatio: "21:9"})
			return err
		}, providerSeries("submit", "ok", 0), is(nil)},
		{"submit timed", func(ctx context.Context, p provider.Provider, _ provider.Job) error {
			_, err := p.Submit(ctx, provider.Request{IdempotencyKey: "g2", Model: animate, InputImage: pngInput(t, 1500*time.Millisecond, nil)})
			return err
		}, providerSeries("submit", "ok", 1.5), is(nil)},
		{"submit permanent", func(ctx context.Context, p provider.Provider, _ provider.Job) error {
			_, err := p.Submit(ctx, provider.Request{IdempotencyKey: "g2", Model: provider.Model{ID: "no-such-model"}})
			return err
		}, providerSeries("submit", "permanent", 0), isPermanent},
		{"submit retryable", func(ctx context.Context, p provider.Provider, _ provider.Job) error {
			_, err := p.Submit(ctx, provider.Request{IdempotencyKey: "g2", Model: animate, InputImage: pngInput(t, 2*time.Second, retry)})
			return err
		}, providerSeries("submit", "retryable", 2), is(retry)},
		{"submit not created", func(ctx context.Context, p provider.Provider, _ provider.Job) error {
			_, err := p.Submit(ctx, provider.Request{IdempotencyKey: "g2", Model: animate, InputImage: pngInput(t, 0, provider.ErrNotCreated)})
			return err
		}, providerSeries("submit", "not_created", 0), is(provider.ErrNotCreated)},
		{"submit canceled", func(_ context.Context, p provider.Provider, _ provider.Job) error {
			_, err := p.Submit(canceled, provider.Request{IdempotencyKey: "g2", Model: sketch})
			return err
		}, providerSeries("submit", "canceled", 0), is(context.Canceled)},
		{"find", func(ctx context.Context, p provider.Provider, job provider.Job) error {
			got, ok, err := p.Find(ctx, "g1")
			if !ok || got.ID != job.ID {
				t.Errorf("Find = %v, %v, want %v", got, ok, job)
			}
			return err
		}, providerSeries("find", "ok", 0), is(nil)},
		{"find none", func(ctx context.Context, p provider.Provider, _ provider.Job) error {
			_, _, err := p.Find(ctx, "never submitted")
			return err
		}, providerSeries("find", "ok", 0), is(nil)},
		{"status", func(ctx context.Context, p provider.Provider, job provider.Job) error {
			st, err := p.Status(ctx, job)
			if st.State != provider.StateCompleted {
				t.Errorf("Status = %+v, want completed", st)
			}
			return err
		}, providerSeries("status", "ok", 0), is(nil)},
		{"status unknown job", func(ctx context.Context, p provider.Provider, _ provider.Job) error {
			_, err := p.Status(ctx, provider.Job{ID: "nope"})
			return err
		}, providerSeries("status", "error", 0), is(provider.ErrNotFound)},
		{"cancel", func(ctx context.Context, p provider.Provider, job provider.Job) error {
			_, err := p.Cancel(ctx, job)
			return err
		}, providerSeries("cancel", "ok", 0), is(nil)},
		{"cancel unknown job", func(ctx context.Context, p provider.Provider, _ provider.Job) error {
			_, err := p.Cancel(ctx, provider.Job{ID: "nope"})
			return err
		}, providerSeries("cancel", "error", 0), is(provider.ErrNotFound)},
		{"open output", func(ctx context.Context, p provider.Provider, job provider.Job) error {
			st, err := lp(p).Status(ctx, job) // not through the wrapper
			if err != nil || len(st.Outputs) != 1 {
				t.Fatalf("Status = %+v, %v", st, err)
			}
			rc, err := p.OpenOutput(ctx, job, st.Outputs[0])
			if err == nil {
				rc.Close()
			}
			return err
		}, providerSeries("open_output", "ok", 0), is(nil)},
		{"open output unknown", func(ctx context.Context, p provider.Provider, job provider.Job) error {
			_, err := p.OpenOutput(ctx, job, provider.Output{URL: "local:elsewhere/0"})
			return err
		}, providerSeries("open_output", "error", 0), is(provider.ErrNotFound)},
		// Name and Models are not calls to the provider's backend.
		{"name and models", func(_ context.Context, p provider.Provider, _ provider.Job) error {
			if p.Name() != local.Name || len(p.Models()) == 0 {
				t.Errorf("Name, Models = %q, %d models", p.Name(), len(p.Models()))
			}
			return nil
		}, nil, is(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				p, err := local.New(local.Options{Dir: t.TempDir(), Scale: 0})
				if err != nil {
					t.Fatal(err)
				}
				job, err := p.Submit(ctx, provider.Request{IdempotencyKey: "g1", Model: sketch, AspectRatio: "21:9"})
				if err != nil {
					t.Fatal(err)
				}
				s := metrics.New()
				err = tt.call(ctx, s.Provider(p), job)
				if !tt.wantErr(err) {
					t.Errorf("err = %v", err)
				}
				checkSeries(t, s, tt.want)
			})
		})
	}
}

// TestProviderUnwrap: the wrapped provider is still found behind it.
func TestProviderUnwrap(t *testing.T) {
	p, err := local.New(local.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w := metrics.New().Provider(p)
	if w == provider.Provider(p) {
		t.Fatal("Provider returned p itself for a live Set")
	}
	if got, ok := provider.As[*local.Provider](w); !ok || got != p {
		t.Errorf("provider.As through the wrapper = %v, %v, want the local provider", got, ok)
	}
}

// blobSeries is the one operation a test made through the wrapper.
func blobSeries(op, outcome string, seconds float64, bytes int64) map[string]float64 {
	l := fmt.Sprintf(`{operation=%q,outcome=%q}`, op, outcome)
	m := map[string]float64{
		"darkroom_blob_operation_duration_seconds_count" + l: 1,
		"darkroom_blob_operation_duration_seconds_sum" + l:   seconds,
	}
	if bytes > 0 {
		m[fmt.Sprintf(`darkroom_blob_bytes_total{operation=%q}`, op)] = float64(bytes)
	}
	if outcome == "error" {
		m[fmt.Sprintf(`darkroom_storage_errors_total{component="blob",operation=%q}`, op)] = 1
	}
	return m
}

// slowReader gives body after wait on the bubble's clock.
type slowReader struct {
	wait time.Duration
	r    io.Reader
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(s.wait)
	s.wait = 0
	return s.r.Read(p)
}

// TestBlobsWrapper makes each operation on a local blob folder through the
// wrapper, in a synctest bubble so the time it records is exact. A missing
// key, a body over its cap and a cancelled caller are answers; a bad key,
// a corrupt file or a failed delete are storage errors.
func TestBlobsWrapper(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	type op func(ctx context.Context, b blob.Store) error
	tests := []struct {
		name    string
		op      op
		want    map[string]float64
		wantErr func(error) bool
	}{
		{"put", func(ctx context.Context, b blob.Store) error {
			o, err := b.Put(ctx, "o/b.png", &slowReader{1500 * time.Millisecond, strings.NewReader("hi there")}, "image/png", 0)
			if o.Size != 8 {
				t.Errorf("Put = %+v", o)
			}
			return err
		}, blobSeries("put", "ok", 1.5, 8), is(nil)},
		{"put too large", func(ctx context.Context, b blob.Store) error {
			_, err := b.Put(ctx, "o/b.png", strings.NewReader("hello"), "image/png", 2)
			return err
		}, blobSeries("put", "ok", 0, 0), is(blob.ErrTooLarge)},
		{"put canceled", func(_ context.Context, b blob.Store) error {
			_, err := b.Put(canceled, "o/b.png", strings.NewReader("hello"), "image/png", 0)
			return err
		}, blobSeries("put", "ok", 0, 0), is(context.Canceled)},
		{"put bad key", func(ctx context.Context, b blob.Store) error {
			_, err := b.Put(ctx, "../b.png", strings.NewReader("hello"), "image/png", 0)
			return err
		}, blobSeries("put", "error", 0, 0), is(blob.ErrInvalidKey)},
		{"open", func(ctx context.Context, b blob.Store) error {
			rc, _, err := b.Open(ctx, "o/a.png")
			if err != nil {
				return err
			}
			defer rc.Close()
			if data, err := io.ReadAll(rc); err != nil || string(data) != "hello" {
				t.Errorf("Open read %q, %v", data, err)
			}
			return nil
		}, blobSeries("open", "ok", 0, 0), is(nil)},
		{"open missing", func(ctx context.Context, b blob.Store) error {
			_, _, err := b.Open(ctx, "o/missing.png")
			return err
		}, blobSeries("open", "ok", 0, 0), is(blob.ErrNotFound)},
		{"open corrupt", func(ctx context.Context, b blob.Store) error {
			_, _, err := b.Open(ctx, "o/corrupt.png")
			return err
		}, blobSeries("open", "error", 0, 0), func(err error) bool { return err != nil && !errors.Is(err, blob.ErrNotFound) }},
		{"stat", func(ctx context.Context, b blob.Store) error {
			o, err := b.Stat(ctx, "o/a.png")
			if o.Size != 5 {
				t.Errorf("Stat = %+v", o)
			}
			return err
		}, blobSeries("stat", "ok", 0, 0), is(nil)},
		{"stat missing", func(ctx context.Context, b blob.Store) error {
			_, err := b.Stat(ctx, "o/missing.png")
			return err
		}, blobSeries("stat", "ok", 0, 0), is(blob.ErrNotFound)},
		{"stat corrupt", func(ctx context.Context, b blob.Store) error {
			_, err := b.Stat(ctx, "o/corrupt.png")
			return err
		}, blobSeries("stat", "error", 0, 0), func(err error) bool { return err != nil && !errors.Is(err, blob.ErrNotFound) }},
		{"delete", func(ctx context.Context, b blob.Store) error {
			return b.Delete(ctx, "o/a.png")
		}, blobSeries("delete", "ok", 0, 0), is(nil)},
		{"delete missing", func(ctx context.Context, b blob.Store) error {
			return b.Delete(ctx, "o/missing.png")
		}, blobSeries("delete", "ok", 0, 0), is(nil)},
		// "o" is a folder holding blobs: removing it fails.
		{"delete fails", func(ctx context.Context, b blob.Store) error {
			return b.Delete(ctx, "o")
		}, blobSeries("delete", "error", 0, 0), func(err error) bool { return err != nil }},
		// Signing is local: not timed.
		{"signed url", func(ctx context.Context, b blob.Store) error {
			_, _, err := b.SignedURL(ctx, "o/a.png", time.Minute)
			return err
		}, nil, is(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				l, err := blob.NewLocal(t.TempDir(), bytes.Repeat([]byte{7}, blob.MinSecretLen), "http://127.0.0.1:1")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.Put(ctx, "o/a.png", strings.NewReader("hello"), "image/png", 0); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(l.Dir(), "o", "corrupt.png"), []byte("no trailer"), 0o600); err != nil {
					t.Fatal(err)
				}
				s := metrics.New()
				if err := tt.op(ctx, s.Blobs(l)); !tt.wantErr(err) {
					t.Errorf("err = %v", err)
				}
				checkSeries(t, s, tt.want)
			})
		})
	}
}
