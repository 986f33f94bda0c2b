package generation

import (
	"context"
	"time"

	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/provider"
)

// LivePreviewer is implemented by providers that keep the latest preview
// frame of a job they are making (ComfyUI's websocket previews, OpenAI's partial
// images), already made small by package preview (a JPEG of at most
// 512 px and 64 KB). It is never an output: it decorates a running
// generation only. The provider keeps it in its process; the runner of
// the lease holder copies it into the store (pumpPreviews), where every
// replica reads it (Service.LivePreview). The provider knows no storage.
type LivePreviewer interface {
	// LivePreview is the latest frame of the job of generation id, and
	// how many frames came; ok is false when there is none.
	LivePreview(generationID string) (jpeg []byte, frames int, ok bool)
}

// The stored frame is a row of its own (live_previews, migration 0016),
// one a generation, replaced in place: written only while the
// generation is Previewing (Tx.PutLivePreview's condition), deleted in the
// transaction that ends it (change), and read only while it is. A
// frame is no status change, so it bumps no generations.version (the
// read caches keep the row) and is announced only through what the
// Observer writes (a task's status message naming the preview).

// Previewing reports whether g is where a live preview may be: at the
// provider, queued (a synchronous call, OpenAI's, is held while the
// generation is queued) or running. Tx.PutLivePreview's condition is the
// same.
func (g *Generation) Previewing() bool {
	return g.Status == StatusQueued || g.Status == StatusRunning
}

// previewEvery bounds the writes of one generation's frames: at most one
// a second, whatever the provider sends.
const previewEvery = time.Second

// livePreviews reports whether provider name makes live previews.
func (s *Service) livePreviews(name string) bool {
	p, ok := s.providers[name]
	if !ok {
		return false
	}
	_, ok = provider.As[LivePreviewer](p)
	return ok
}

// LivePreview is the latest stored preview frame of a generation at its
// provider and how many frames the provider sent (ok false: none, or g
// is not Previewing). Every reader (the tools' results, the viewer, the preview
// resource) reads through it, on whichever replica.
func (s *Service) LivePreview(ctx context.Context, g *Generation) (jpeg []byte, frames int, ok bool) {
	if !g.Previewing() || !s.livePreviews(g.Provider) {
		return nil, 0, false
	}
	b, n, err := s.store.LivePreview(ctx, g.ID)
	if err != nil || len(b) == 0 {
		return nil, 0, false // none; an error only loses a decoration
	}
	return b, int(n), true
}

// putLivePreview stores frame number frames of generation id, replacing
// the one before; the Observer then sees the generation with its new
// PreviewFrames. Nothing is written once it is not Previewing.
func (s *Service) putLivePreview(ctx context.Context, id string, jpeg []byte, frames int) error {
	_, err := s.change(ctx, id, func(ctx context.Context, tx Tx, at time.Time) (bool, error) {
		return tx.PutLivePreview(ctx, id, jpeg, int64(frames), at)
	})
	return err
}

// previewMark is the last frame count the runner stored for a
// generation, and when.
type previewMark struct {
	frames int
	at     time.Time
}

// pumpPreviews copies g's provider's latest frame into the store while
// the step runs (a held call, a synchronous one, a stream), checking once
// every previewEvery and once more when the step ends; stop ends it.
// Nothing runs for a provider that makes no previews.
func (r *Runner) pumpPreviews(ctx context.Context, g *Generation) (stop func()) {
	lp, ok := provider.As[LivePreviewer](r.s.providers[g.Provider])
	if !ok {
		return func() {}
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(previewEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.savePreview(ctx, lp, g.ID)
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if parent.Err() == nil { // else the lease is lost: its new holder writes
			r.savePreview(parent, lp, g.ID)
		}
	}
}

// forgetPreview drops the mark of a generation that ended.
func (r *Runner) forgetPreview(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.previewMarks, id)
}

// savePreview stores the provider's latest frame of id if it is new and
// the last write of id is previewEvery old.
func (r *Runner) savePreview(ctx context.Context, lp LivePreviewer, id string) {
	jpeg, frames, ok := lp.LivePreview(id)
	// A frame above package preview's bound is a provider's bug: it must
	// not fill the table.
	if !ok || len(jpeg) > preview.MaxBytes {
		return
	}
	now := r.s.cfg.Now()
	r.mu.Lock()
	m, seen := r.previewMarks[id]
	if seen && (m.frames == frames || now.Sub(m.at) < previewEvery) {
		r.mu.Unlock()
		return
	}
	for k, old := range r.previewMarks {
		if now.Sub(old.at) >= time.Hour { // a generation this runner no longer steps
			delete(r.previewMarks, k)
		}
	}
	r.previewMarks[id] = previewMark{frames: frames, at: now}
	r.mu.Unlock()
	if err := r.s.putLivePreview(ctx, id, jpeg, frames); err != nil && ctx.Err() == nil {
		r.cfg.Logger.Warn("runner: store the preview frame", "generation", id, "err", err)
	}
}
