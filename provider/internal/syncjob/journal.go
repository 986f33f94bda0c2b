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
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Journal records one provider's submit attempts in a spool.
type Journal struct {
	Spool    provider.Spool
	Provider string
}

type record struct {
	Attempts int           `json:"attempts"`
	Job      *provider.Job `json:"job,omitempty"`
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
	r, _, err := j.read(ctx, gen)
	if err == nil {
		r.Attempts++
		r.Job = nil
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
	_ = j.write(ctx, gen, record{Attempts: n - 1})
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
	case r.Attempts == 1:
		return provider.Job{}, false, provider.ErrResubmitOnce
	default:
		return provider.Job{}, false, provider.ErrUnsupported
	}
}

// Store streams every value sc yields, base64-decoded, into the spool as
// attempt n's outputs, at most max of them (0: no limit).
func (j Journal) Store(ctx context.Context, gen string, n int, sc *Scanner, max int) ([]provider.Output, error) {
	var outs []provider.Output
	for max <= 0 || len(outs) < max {
		_, v, err := sc.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		key := fmt.Sprintf("%s/out-%d-%d", j.dir(gen), n, len(outs))
		br := bufio.NewReaderSize(base64.NewDecoder(base64.StdEncoding, v), 32<<10)
		head, _ := br.Peek(512)
		mime := http.DetectContentType(head)
		if err := j.Spool.Put(ctx, key, br, mime); err != nil {
			return nil, fmt.Errorf("%s: spool output: %w", j.Provider, err)
		}
		outs = append(outs, provider.Output{URL: URLPrefix + key, MimeType: mime})
	}
	return outs, nil
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
