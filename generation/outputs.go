package generation

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	_ "image/gif"  // preview.Header for output dimensions
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

// copyOutputs streams the provider's outputs into the blob store, as
// many as the generation was charged for: a provider that returns more
// (its own count field, a hostile model) has the rest dropped, logged,
// and counted in extra. A generation is completed only once all its
// outputs are ours; an output darkroom refuses (refusedOutput) fails it
// and the outputs already stored are deleted.
func (r *Runner) copyOutputs(ctx context.Context, p provider.Provider, g *Generation, job provider.Job, outs []provider.Output) (_ []Output, extra int, _ error) {
	if len(outs) == 0 {
		return nil, 0, &provider.PermanentError{Message: "the provider reported success but returned no output"}
	}
	if charged := g.Params.Outputs(); len(outs) > charged {
		extra = len(outs) - charged
		r.cfg.Logger.Warn("runner: the provider returned more outputs than were charged; the rest are not kept",
			"generation", g.ID, "provider", p.Name(), "returned", len(outs), "charged", charged)
		outs = outs[:charged]
	}
	res := make([]Output, 0, len(outs))
	for i, o := range outs {
		out, err := r.copyOne(ctx, p, g, job, i, o)
		var refused *refusedOutput
		if errors.As(err, &refused) {
			for _, o := range res {
				if derr := r.s.deleteOutput(context.WithoutCancel(ctx), o); derr != nil {
					r.cfg.Logger.Warn("runner: delete the outputs of a refused generation", "generation", g.ID, "err", derr)
				}
			}
		}
		if err != nil {
			return nil, 0, fmt.Errorf("copy output %d: %w", i, err)
		}
		res = append(res, out)
	}
	return res, extra, nil
}

// refusedOutput is an output darkroom will not keep: not an image or a
// video, an image whose header does not read, or one past the size
// bound. Nothing of the generation is kept, so the caller is not
// charged: it fails refunded, whatever the vendor billed.
type refusedOutput struct{ msg string }

func (e *refusedOutput) Error() string { return e.msg }

// maxOutputBytes bounds one output of a generation of kind k.
func (r *Runner) maxOutputBytes(k provider.Kind) int64 {
	if r.cfg.MaxOutputBytes > 0 {
		return r.cfg.MaxOutputBytes
	}
	return provider.MaxOutputBytes(k)
}

func (r *Runner) copyOne(ctx context.Context, p provider.Provider, g *Generation, job provider.Job, i int, o provider.Output) (Output, error) {
	rc, err := p.OpenOutput(ctx, job, o)
	if err != nil {
		return Output{}, err
	}
	defer rc.Close()
	src := &readErr{r: rc}
	br := bufio.NewReaderSize(src, 64<<10)
	head, _ := br.Peek(512) // short read at EOF is fine
	mime := sniffMedia(head)
	if mime == "" {
		return Output{}, refusal(src, "output %d is not an image or a video", i+1)
	}
	out := Output{}
	body := io.Reader(br)
	if strings.HasPrefix(mime, "image/") {
		// An image must read as one (a "PNG" of zeros does not), and
		// its dimensions come from the same header.
		cfg, _, all, err := preview.Header(br)
		if err != nil {
			return Output{}, refusal(src, "output %d is not a readable %s (%v)", i+1, mime, err)
		}
		out.Width, out.Height, body = cfg.Width, cfg.Height, all
	}
	if g.Kind == provider.KindVideo {
		out.DurationSeconds = float64(g.Params.DurationSeconds)
	}
	key := blob.Key(g.Owner, g.ID, i, extFor(mime))
	limit := r.maxOutputBytes(g.Kind)
	obj, err := r.s.cfg.Blobs.Put(ctx, key, body, mime, limit)
	if src.err != nil {
		return Output{}, fmt.Errorf("read output from %s: %w", p.Name(), src.err) // the provider side failed, not storage
	}
	if errors.Is(err, blob.ErrTooLarge) {
		return Output{}, &refusedOutput{fmt.Sprintf("output %d is larger than the %d MiB an output may be", i+1, limit>>20)}
	}
	if err != nil {
		return Output{}, &storageError{err}
	}
	out.StoredBlob = StoredBlob{Key: obj.Key, MimeType: obj.ContentType, Bytes: obj.Size, SHA256: obj.SHA256}
	out.Preview = r.s.makePreview(ctx, g, i, out.StoredBlob)
	return out, nil
}

// refusal refuses an output for what its bytes are, unless reading them
// failed: then it is the download's error, to be retried.
func refusal(src *readErr, format string, args ...any) error {
	if src.err != nil {
		return src.err
	}
	return &refusedOutput{fmt.Sprintf(format, args...)}
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
