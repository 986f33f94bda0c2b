// Package syncjob is what the google and openai adapters share to make a
// synchronous vendor call (Imagen predict, Gemini generateContent, OpenAI
// images) a durable job: a journal of submit attempts in a
// provider.Spool, and the streaming of the reply's base64 files into it.
//
// The call runs inside Submit, under the runner's renewed lease. Before
// it, the journal counts the attempt; after it, the job is recorded.
// Find (the runner's question after a crash between the two) answers:
// the recorded job if there is one; "none" if no attempt began;
// provider.ErrResubmitOnce after one interrupted attempt; and
// provider.ErrUnsupported after two, so the vendor sees at most two calls
// for one generation, and the second is announced.
package syncjob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/provider"
)

// Journal records one provider's submit attempts in a spool.
type Journal struct {
	Spool    provider.Spool
	Provider string
	// MaxBytes bounds one spooled image (0: provider.MaxOutputBytes of
	// an image; tests lower it).
	MaxBytes int64
}

type record struct {
	Attempts int           `json:"attempts"`
	Job      *provider.Job `json:"job,omitempty"`
	// Once marks a call that starts a long paid job (a video operation):
	// after an interrupted attempt Find answers ErrUnsupported, never
	// ErrResubmitOnce, so the runner does not start a second one.
	Once bool `json:"once,omitempty"`
}

// URLPrefix marks an output served from the spool.
const URLPrefix = "spool:"

// dir is a generation's spool folder: its id when that is a plain key
// segment (blob keys allow [A-Za-z0-9._/-]), else a digest of it.
func (j Journal) dir(gen string) string {
	seg := gen
	if seg == "" || seg[0] == '.' || strings.IndexFunc(seg, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}) >= 0 {
		h := sha256.Sum256([]byte(gen))
		seg = hex.EncodeToString(h[:16])
	}
	return "spool/" + j.Provider + "/" + seg
}

func (j Journal) read(ctx context.Context, gen string) (record, bool, error) {
	var r record
	rc, err := j.Spool.Open(ctx, j.dir(gen)+"/journal.json")
	if errors.Is(err, provider.ErrNotFound) {
		return r, false, nil
	}
	if err != nil {
		return r, false, &provider.RetryableError{Err: fmt.Errorf("%s: read submit journal: %w", j.Provider, err)}
	}
	defer rc.Close()
	if err := json.NewDecoder(io.LimitReader(rc, 1<<20)).Decode(&r); err != nil {
		return r, false, &provider.RetryableError{Err: fmt.Errorf("%s: decode submit journal: %w", j.Provider, err)}
	}
	return r, true, nil
}

func (j Journal) write(ctx context.Context, gen string, r record) error {
	b, _ := json.Marshal(r)
	if err := j.Spool.Put(ctx, j.dir(gen)+"/journal.json", strings.NewReader(string(b)), "application/json"); err != nil {
		return fmt.Errorf("%s: write submit journal: %w", j.Provider, err)
	}
	return nil
}

// Begin counts an attempt before the vendor is called and returns its
// number (1 for the first). A failure to write it is a RetryableError
// wrapping ErrNotCreated: nothing was sent.
func (j Journal) Begin(ctx context.Context, gen string) (int, error) {
	return j.begin(ctx, gen, false)
}

// BeginOnce is Begin for a call that starts a long paid job at the
// vendor (an asynchronous operation whose create cannot be looked up):
// an interrupted one is never made again (Find: ErrUnsupported).
func (j Journal) BeginOnce(ctx context.Context, gen string) (int, error) {
	return j.begin(ctx, gen, true)
}

func (j Journal) begin(ctx context.Context, gen string, once bool) (int, error) {
	r, _, err := j.read(ctx, gen)
	if err == nil {
		r.Attempts++
		r.Job = nil
		r.Once = r.Once || once
		err = j.write(ctx, gen, r)
	}
	if err != nil {
		return 0, &provider.RetryableError{Err: fmt.Errorf("%w: %w", provider.ErrNotCreated, err)}
	}
	return r.Attempts, nil
}

// Undo takes back attempt n when the vendor surely made nothing (a
// refused connection, a 429), so a retry is not counted as a resubmit.
func (j Journal) Undo(ctx context.Context, gen string, n int) {
	r, _, err := j.read(ctx, gen)
	if err != nil {
		return
	}
	_ = j.write(ctx, gen, record{Attempts: n - 1, Once: r.Once})
}

// Done records the job the attempt made.
func (j Journal) Done(ctx context.Context, gen string, n int, job provider.Job) error {
	return j.write(ctx, gen, record{Attempts: n, Job: &job})
}

// Forget removes the journal once the runner has recorded the job (its
// first Status call): only a submit whose outcome is unknown needs it.
func (j Journal) Forget(ctx context.Context, gen string) {
	_ = j.Spool.Delete(ctx, j.dir(gen)+"/journal.json")
}

// Find answers the runner's reconcile question (see the package comment).
func (j Journal) Find(ctx context.Context, gen string) (provider.Job, bool, error) {
	r, ok, err := j.read(ctx, gen)
	switch {
	case err != nil:
		return provider.Job{}, false, err
	case !ok || r.Attempts == 0:
		return provider.Job{}, false, nil
	case r.Job != nil:
		return *r.Job, true, nil
	case r.Attempts == 1 && !r.Once:
		return provider.Job{}, false, provider.ErrResubmitOnce
	default:
		return provider.Job{}, false, provider.ErrUnsupported
	}
}

// MaxOutputs bounds the images one reply may leave in the spool, whatever
// the caller asks: no model makes more in one call (the catalog's and the
// qualified models' MaxCount are at most 16).
const MaxOutputs = 16

// Store streams the values sc yields, base64-decoded, into the spool as
// attempt n's outputs: the first max of them (at most MaxOutputs; 0 means
// MaxOutputs), the count the generation was charged for. The rest of the
// reply is not read: what a vendor returns beyond what was asked is not
// kept. Each is checked as it streams: an image header first (bytes that
// are no image are refused before any is spooled), then at most
// provider.MaxOutputBytes; a refusal is a provider.PermanentError, and
// this attempt's spooled files are removed on any error.
func (j Journal) Store(ctx context.Context, gen string, n int, sc *Scanner, max int) (outs []provider.Output, err error) {
	return j.store(ctx, gen, n, sc, max, provider.KindImage)
}

// StoreVideo is Store for a reply that carries videos inline (Vertex
// AI's Veo): each is checked for an MP4 (ISO BMFF) header and bounded by
// the video limit.
func (j Journal) StoreVideo(ctx context.Context, gen string, n int, sc *Scanner, max int) (outs []provider.Output, err error) {
	return j.store(ctx, gen, n, sc, max, provider.KindVideo)
}

func (j Journal) store(ctx context.Context, gen string, n int, sc *Scanner, max int, kind provider.Kind) (outs []provider.Output, err error) {
	if max <= 0 || max > MaxOutputs {
		max = MaxOutputs
	}
	defer func() {
		if err != nil {
			for _, o := range outs {
				_ = j.Spool.Delete(context.WithoutCancel(ctx), strings.TrimPrefix(o.URL, URLPrefix))
			}
			outs = nil
		}
	}()
	for len(outs) < max {
		_, v, err := sc.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return outs, err
		}
		key := fmt.Sprintf("%s/out-%d-%d", j.dir(gen), n, len(outs))
		out, err := j.storeOne(ctx, key, v, len(outs), kind)
		if err != nil {
			return outs, err
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// storeOne spools one base64 value as key, checked as Store says.
func (j Journal) storeOne(ctx context.Context, key string, v io.Reader, i int, kind provider.Kind) (provider.Output, error) {
	limit := j.MaxBytes
	if limit <= 0 {
		limit = provider.MaxOutputBytes(kind)
	}
	src := &sourceErr{r: v}
	dec := &capped{r: base64.NewDecoder(base64.StdEncoding, src), left: limit}
	noun, mime, all, headErr := "an image", "", io.Reader(nil), error(nil)
	if kind == provider.KindVideo {
		noun, mime = "a video", "video/mp4"
		all, headErr = mp4Header(dec)
	} else {
		var format string
		_, format, all, headErr = preview.Header(dec)
		mime = "image/" + format
	}
	var err error
	if headErr == nil {
		err = j.Spool.Put(ctx, key, all, mime)
	}
	switch {
	case src.err != nil:
		return provider.Output{}, src.err // the reply broke off
	case dec.over:
		return provider.Output{}, &provider.PermanentError{Message: fmt.Sprintf("%s returned %s (number %d) larger than the %d MiB an output may be; nothing was kept", j.Provider, noun, i+1, limit>>20)}
	case headErr != nil:
		return provider.Output{}, &provider.PermanentError{Message: fmt.Sprintf("%s returned %s (number %d) that is not %s (%v); nothing was kept", j.Provider, noun, i+1, strings.TrimPrefix(noun, "a "), headErr)}
	case err != nil:
		return provider.Output{}, fmt.Errorf("%s: spool output: %w", j.Provider, err)
	}
	return provider.Output{URL: URLPrefix + key, MimeType: mime}, nil
}

// mp4Header reads an ISO BMFF header (a first box of type "ftyp") and
// returns a reader of the whole file again.
func mp4Header(r io.Reader) (io.Reader, error) {
	head := make([]byte, 12)
	n, err := io.ReadFull(r, head)
	if err != nil || string(head[4:8]) != "ftyp" {
		if err == nil || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = errors.New("no MP4 header")
		}
		return nil, err
	}
	return io.MultiReader(bytes.NewReader(head[:n]), r), nil
}

// sourceErr remembers a failure to read the reply itself (not its
// content's), to tell a reply that broke off from one refused.
type sourceErr struct {
	r   io.Reader
	err error
}

func (s *sourceErr) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// errTooLarge ends a capped read.
var errTooLarge = errors.New("output larger than its bound")

// capped reads r up to left bytes; one more is errTooLarge, and over
// says so.
type capped struct {
	r    io.Reader
	left int64
	over bool
}

func (c *capped) Read(p []byte) (int, error) {
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	if int64(n) > c.left {
		c.over = true
		return int(c.left), errTooLarge
	}
	c.left -= int64(n)
	return n, err
}

// Open streams a spooled output; the file is removed once it has been
// read to its end and closed (the runner copied it).
func (j Journal) Open(ctx context.Context, out provider.Output) (io.ReadCloser, error) {
	key, ok := strings.CutPrefix(out.URL, URLPrefix)
	if !ok || !strings.HasPrefix(key, "spool/"+j.Provider+"/") || strings.Contains(key, "..") {
		return nil, &provider.PermanentError{Message: fmt.Sprintf("%s: output %q is not in its spool", j.Provider, out.URL)}
	}
	rc, err := j.Spool.Open(ctx, key)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, &provider.PermanentError{Message: fmt.Sprintf("%s: the spooled output is gone (it was copied, or its spool was lost)", j.Provider)}
	}
	if err != nil {
		return nil, &provider.RetryableError{Err: fmt.Errorf("%s: open spooled output: %w", j.Provider, err)}
	}
	return &spooled{rc: rc, del: func() { _ = j.Spool.Delete(context.WithoutCancel(ctx), key) }}, nil
}

type spooled struct {
	rc  io.ReadCloser
	eof bool
	del func()
}

func (s *spooled) Read(p []byte) (int, error) {
	n, err := s.rc.Read(p)
	if errors.Is(err, io.EOF) {
		s.eof = true
	}
	return n, err
}

func (s *spooled) Close() error {
	err := s.rc.Close()
	if s.eof {
		s.del()
	}
	return err
}
