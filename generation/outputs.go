package generation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/storage/blob"
)

// ErrOutputGone is returned when an output's file is no longer in the
// blob store (retention deleted it, before or after the record says so).
var ErrOutputGone = errors.New("generation: output file deleted")

// OpenOutput streams a stored output back from the blob store. The caller
// closes the reader.
func (s *Service) OpenOutput(ctx context.Context, b StoredBlob) (io.ReadCloser, error) {
	rc, _, err := s.cfg.Blobs.Open(ctx, b.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, ErrOutputGone
	}
	return rc, err
}

// previewSuffix names a preview's key: beside its output's.
const previewSuffix = ".preview.jpg"

// makePreview stores the inline preview of output i (read back from the
// blob store, so the copy stays streaming). It is nil when previews are
// off, the media has none (a non-GIF video) or making it failed: a
// preview is never worth failing the generation for.
func (s *Service) makePreview(ctx context.Context, g *Generation, i int, b StoredBlob) *Preview {
	if !s.cfg.InlinePreview || !preview.Supported(b.MimeType) {
		return nil
	}
	p, err := s.storePreview(ctx, b)
	if err != nil {
		s.log().Warn("no inline preview", "generation", g.ID, "output", i, "err", err)
		return nil
	}
	return p
}

func (s *Service) storePreview(ctx context.Context, b StoredBlob) (*Preview, error) {
	rc, _, err := s.cfg.Blobs.Open(ctx, b.Key)
	if err != nil {
		return nil, err
	}
	img, err := preview.Make(rc, b.MimeType)
	rc.Close()
	if err != nil {
		return nil, err
	}
	obj, err := s.cfg.Blobs.Put(ctx, b.Key+previewSuffix, bytes.NewReader(img.Data), preview.MimeType, preview.MaxBytes)
	if err != nil {
		return nil, err
	}
	return &Preview{Key: obj.Key, MimeType: preview.MimeType, Bytes: obj.Size, Width: img.Width, Height: img.Height}, nil
}

// previewCacheBytes bounds the in-process preview cache (256 previews of
// the largest size).
const previewCacheBytes = 256 * preview.MaxBytes

// InlinePreviews reports whether results show previews.
func (s *Service) InlinePreviews() bool { return s.cfg.InlinePreview }

// Preview returns the bytes of an output's stored preview, from memory
// after the first read.
func (s *Service) Preview(ctx context.Context, p *Preview) ([]byte, error) {
	if b, ok := s.previews.Get(p.Key); ok {
		return b, nil
	}
	b, err := s.readPreview(ctx, p)
	if err == nil {
		s.previews.Put(p.Key, b)
	}
	return b, err
}

func (s *Service) readPreview(ctx context.Context, p *Preview) ([]byte, error) {
	rc, _, err := s.cfg.Blobs.Open(ctx, p.Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, ErrOutputGone
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, preview.MaxBytes+1))
	if err == nil && int64(len(b)) != p.Bytes {
		err = fmt.Errorf("preview %s is %d bytes, its record says %d", p.Key, len(b), p.Bytes)
	}
	return b, err
}

// deleteOutput removes an output's file and its preview.
func (s *Service) deleteOutput(ctx context.Context, o Output) error {
	if o.Preview != nil {
		if err := s.cfg.Blobs.Delete(ctx, o.Preview.Key); err != nil {
			return fmt.Errorf("delete expired preview %s: %w", o.Preview.Key, err)
		}
	}
	if err := s.cfg.Blobs.Delete(ctx, o.Key); err != nil {
		return fmt.Errorf("delete expired output %s: %w", o.Key, err)
	}
	return nil
}
