package metrics

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/provider"
)

// Provider counts and times every call to p. The result unwraps to p
// (provider.Wrapper), so provider.As still finds p's optional interfaces.
// With a nil Set it is p itself.
func (s *Set) Provider(p provider.Provider) provider.Provider {
	if s == nil {
		return p
	}
	return &instrumented{Provider: p, s: s}
}

type instrumented struct {
	provider.Provider
	s *Set
}

// Unwrap returns the provider counted.
func (p *instrumented) Unwrap() provider.Provider { return p.Provider }

func (p *instrumented) done(op string, start time.Time, err error) {
	p.s.ProviderCall(p.Name(), op, ProviderOutcome(err), time.Since(start))
}

// ProviderOutcome classifies a provider call's error for the outcome label.
func ProviderOutcome(err error) string {
	var perm *provider.PermanentError
	var retry *provider.RetryableError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, provider.ErrNotCreated):
		return "not_created"
	case errors.Is(err, provider.ErrUnsupported):
		return "unsupported"
	case errors.As(err, &perm):
		return "permanent"
	case errors.As(err, &retry):
		return "retryable"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "error"
}

func (p *instrumented) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	start := time.Now()
	j, err := p.Provider.Submit(ctx, req)
	p.done("submit", start, err)
	return j, err
}

func (p *instrumented) Find(ctx context.Context, key string) (provider.Job, bool, error) {
	start := time.Now()
	j, ok, err := p.Provider.Find(ctx, key)
	p.done("find", start, err)
	return j, ok, err
}

func (p *instrumented) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	start := time.Now()
	st, err := p.Provider.Status(ctx, job)
	p.done("status", start, err)
	return st, err
}

func (p *instrumented) Cancel(ctx context.Context, job provider.Job) (provider.Status, error) {
	start := time.Now()
	st, err := p.Provider.Cancel(ctx, job)
	p.done("cancel", start, err)
	return st, err
}

func (p *instrumented) OpenOutput(ctx context.Context, job provider.Job, out provider.Output) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := p.Provider.OpenOutput(ctx, job, out)
	p.done("open_output", start, err)
	return rc, err
}

// Blobs times every operation on b and counts the bytes put. A missing
// key (Open, Stat) and a body over its cap are answers, not storage
// errors. With a nil Set it is b itself.
func (s *Set) Blobs(b blob.Store) blob.Store {
	if s == nil {
		return b
	}
	return &blobs{Store: b, s: s}
}

type blobs struct {
	blob.Store
	s *Set
}

func storageErr(err error) error {
	if errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrTooLarge) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (b *blobs) Put(ctx context.Context, key string, r io.Reader, contentType string, maxBytes int64) (blob.Object, error) {
	start := time.Now()
	o, err := b.Store.Put(ctx, key, r, contentType, maxBytes)
	n := int64(0)
	if err == nil {
		n = o.Size
	}
	b.s.Blob("put", n, time.Since(start), storageErr(err))
	return o, err
}

func (b *blobs) Open(ctx context.Context, key string) (io.ReadCloser, blob.Object, error) {
	start := time.Now()
	rc, o, err := b.Store.Open(ctx, key)
	b.s.Blob("open", 0, time.Since(start), storageErr(err))
	return rc, o, err
}

func (b *blobs) Stat(ctx context.Context, key string) (blob.Object, error) {
	start := time.Now()
	o, err := b.Store.Stat(ctx, key)
	b.s.Blob("stat", 0, time.Since(start), storageErr(err))
	return o, err
}

func (b *blobs) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := b.Store.Delete(ctx, key)
	b.s.Blob("delete", 0, time.Since(start), storageErr(err))
	return err
}

// SignedURL is not timed: it is local signing, no storage round trip.
