package generation

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/gif"  // DecodeConfig for output dimensions
	_ "image/jpeg" // likewise
	_ "image/png"  // likewise
	"io"
	"net/http"
	"strings"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/provider"
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

// copyOutputs streams every provider output into the blob store. A
// generation is completed only once all its outputs are ours.
func (r *Runner) copyOutputs(ctx context.Context, p provider.Provider, g *Generation, job provider.Job, outs []provider.Output) ([]Output, error) {
	if len(outs) == 0 {
		return nil, &provider.PermanentError{Message: "the provider reported success but returned no output"}
	}
	res := make([]Output, 0, len(outs))
	for i, o := range outs {
		out, err := r.copyOne(ctx, p, g, job, i, o)
		if err != nil {
			return nil, fmt.Errorf("copy output %d: %w", i, err)
		}
		res = append(res, out)
	}
	return res, nil
}

func (r *Runner) copyOne(ctx context.Context, p provider.Provider, g *Generation, job provider.Job, i int, o provider.Output) (Output, error) {
	rc, err := p.OpenOutput(ctx, job, o)
	if err != nil {
		return Output{}, err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	head, _ := br.Peek(64 << 10) // short read at EOF is fine
	mime := sniffMedia(head)
	if mime == "" {
		return Output{}, &provider.PermanentError{Message: "the provider returned an output that is not an image or video"}
	}
	out := Output{}
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(head)); err == nil {
		out.Width, out.Height = cfg.Width, cfg.Height
	}
	if g.Kind == provider.KindVideo {
		out.DurationSeconds = float64(g.Params.DurationSeconds)
	}
	key := blob.Key(g.Owner, g.ID, i, extFor(mime))
	src := &readErr{r: br}
	obj, err := r.s.cfg.Blobs.Put(ctx, key, src, mime, r.cfg.MaxOutputBytes)
	if src.err != nil {
		return Output{}, fmt.Errorf("read output from %s: %w", p.Name(), src.err) // the provider side failed, not storage
	}
	if errors.Is(err, blob.ErrTooLarge) {
		return Output{}, &provider.PermanentError{Message: fmt.Sprintf("output %d is larger than the %d-byte limit", i, r.cfg.MaxOutputBytes)}
	}
	if err != nil {
		return Output{}, &storageError{err}
	}
	out.StoredBlob = StoredBlob{Key: obj.Key, MimeType: obj.ContentType, Bytes: obj.Size, SHA256: obj.SHA256}
	out.Preview = r.s.makePreview(ctx, g, i, out.StoredBlob)
	return out, nil
}

// readErr remembers a read failure, to tell a provider download that broke
// from a storage write that failed.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// sniffMedia names the media type from magic bytes; "" when it is neither
// an image nor a video we hand out.
func sniffMedia(b []byte) string {
	if m := SniffImage(b); m != "" {
		return m
	}
	if len(b) >= 12 && string(b[4:8]) == "ftyp" {
		return "video/mp4"
	}
	switch m := http.DetectContentType(b); m {
	case "image/gif", "video/webm":
		return m
	}
	return ""
}

func extFor(mime string) string {
	switch mime {
	case "image/jpeg":
		return "jpg"
	default:
		_, ext, _ := strings.Cut(mime, "/")
		return ext
	}
}
