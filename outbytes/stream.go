package outbytes

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Source is one blob a result carries, not yet read.
type Source struct {
	// Size and SHA256 (hex) are the blob's record: what is read must be
	// exactly these.
	Size   int64
	SHA256 string
	Open   func(ctx context.Context) (io.ReadCloser, error)
}

// ErrMismatch is a blob whose bytes are not its record's.
var ErrMismatch = errors.New("stored bytes do not match their record")

// EncodedLen is the length of n bytes in standard base64.
func EncodedLen(n int64) int64 { return (n + 2) / 3 * 4 }

// ResidentCost is what building the answer for a blob of n bytes in
// memory keeps resident at once on go-sdk's path: the raw bytes, and the
// base64 text three times (the result's encoding, the JSON-RPC message's,
// the transport's write).
func ResidentCost(n int64) int64 { return n + 3*EncodedLen(n) }

// Read reads src whole and checks it against its record: the blob as
// go-sdk's path needs it. The caller's share of ResidentCost(src.Size) is
// taken first, at once or refused (*Refused), and kept on ctx's hold
// (Keep): it lasts until the response is written.
func Read(ctx context.Context, b *Budget, caller string, src Source) ([]byte, error) {
	release, err := b.TryAcquire(caller, ResidentCost(src.Size))
	if err != nil {
		return nil, err
	}
	Keep(ctx, release)
	rc, err := src.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, src.Size+1)
	n, err := io.ReadFull(rc, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	if sum := sha256.Sum256(buf[:n]); int64(n) != src.Size || hex.EncodeToString(sum[:]) != src.SHA256 {
		return nil, fmt.Errorf("%w (%d bytes, sha256 %x; record: %d bytes, sha256 %s)", ErrMismatch, n, sum, src.Size, src.SHA256)
	}
	return buf[:n:n], nil
}

type deferKey struct{}

// Deferral collects the blobs of one result whose bytes are streamed into
// its response rather than put in it: each stands in the result as a
// unique sentinel, whose base64 the encoder then finds and replaces.
type Deferral struct {
	mu    sync.Mutex
	items []deferred
}

type deferred struct {
	quoted []byte // the sentinel's base64 as a JSON string
	src    Source
}

// sentinelBytes is a multiple of 3, so its base64 has no padding; 24
// random bytes make an accidental match impossible in practice.
const sentinelBytes = 24

// WithDeferral returns ctx asking Blob to defer its blobs into d.
func WithDeferral(ctx context.Context) (context.Context, *Deferral) {
	d := &Deferral{}
	return context.WithValue(ctx, deferKey{}, d), d
}

// Blob is the bytes a result carries for src: with a Deferral on ctx a
// sentinel that stands for them (nothing is read), else Read's.
func Blob(ctx context.Context, b *Budget, caller string, src Source) ([]byte, error) {
	d, ok := ctx.Value(deferKey{}).(*Deferral)
	if !ok || src.Size <= 0 {
		return Read(ctx, b, caller, src)
	}
	s := make([]byte, sentinelBytes)
	_, _ = rand.Read(s)
	q := make([]byte, 0, EncodedLen(sentinelBytes)+2)
	q = append(base64.StdEncoding.AppendEncode(append(q, '"'), s), '"')
	d.mu.Lock()
	d.items = append(d.items, deferred{quoted: q, src: src})
	d.mu.Unlock()
	return s, nil
}

// Deferred reports whether any blob was deferred.
func (d *Deferral) Deferred() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.items) > 0
}

// Chunk sizes of a stream: a multiple of 3 raw bytes, so that every
// chunk but the last encodes without padding.
const (
	rawChunk = 48 << 10
	encChunk = rawChunk / 3 * 4
)

// StreamCost is what one stream of an encoding of encodedLen bytes keeps
// resident: that encoding, and its chunk buffers.
func StreamCost(encodedLen int) int64 { return int64(encodedLen) + 2*rawChunk + encChunk }

var rawPool = sync.Pool{New: func() any { b := make([]byte, rawChunk); return &b }}
var encPool = sync.Pool{New: func() any { b := make([]byte, encChunk); return &b }}

// Plan is an encoding with its deferred blobs located, ready to stream.
type Plan struct {
	pieces [][]byte // the encoding between the blobs: len(srcs)+1
	srcs   []Source
	rcs    []io.ReadCloser
	// Len is the length of the whole text once the blobs are in.
	Len int64
}

// Plan finds each deferred blob's sentinel in enc (the JSON encoding of
// the result Blob's sentinels went into) exactly once, and opens the
// blobs; false (nothing left open) when a sentinel is missing or repeated,
// or a blob does not open.
func (d *Deferral) Plan(ctx context.Context, enc []byte) (*Plan, error) {
	d.mu.Lock()
	items := append([]deferred(nil), d.items...)
	d.mu.Unlock()
	type at struct {
		i   int
		pos int
	}
	locs := make([]at, 0, len(items))
	for i, it := range items {
		p := bytes.Index(enc, it.quoted)
		if p < 0 || bytes.Contains(enc[p+1:], it.quoted) {
			return nil, errors.New("outbytes: sentinel not found exactly once")
		}
		locs = append(locs, at{i, p})
	}
	// In the order they appear.
	for i := 1; i < len(locs); i++ {
		for j := i; j > 0 && locs[j].pos < locs[j-1].pos; j-- {
			locs[j], locs[j-1] = locs[j-1], locs[j]
		}
	}
	p := &Plan{}
	last := 0
	for _, l := range locs {
		it := items[l.i]
		p.pieces = append(p.pieces, enc[last:l.pos+1]) // through the opening quote
		p.srcs = append(p.srcs, it.src)
		last = l.pos + len(it.quoted) - 1 // from the closing quote
		p.Len += EncodedLen(it.src.Size)
	}
	p.pieces = append(p.pieces, enc[last:])
	p.Len += int64(len(enc)) - EncodedLen(sentinelBytes)*int64(len(locs))
	for _, s := range p.srcs {
		rc, err := s.Open(ctx)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.rcs = append(p.rcs, rc)
	}
	return p, nil
}

// Close closes the blobs Plan opened.
func (p *Plan) Close() {
	for _, rc := range p.rcs {
		_ = rc.Close()
	}
	p.rcs = nil
}

// WriteTo writes the text with each blob's base64 in place of its
// sentinel, through pooled chunk buffers. A blob that does not match its
// record fails with ErrMismatch before its last chunk is written, so a
// reader that checks the length never takes wrong bytes for right ones.
// It closes the blobs.
func (p *Plan) WriteTo(w io.Writer) (int64, error) {
	defer p.Close()
	cw := &countWriter{w: w}
	for i, piece := range p.pieces {
		if _, err := cw.Write(piece); err != nil {
			return cw.n, err
		}
		if i < len(p.srcs) {
			if err := stream(cw, p.rcs[i], p.srcs[i]); err != nil {
				return cw.n, err
			}
		}
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// stream writes r's base64, holding the last chunk back until the whole
// blob is checked against src.
func stream(w io.Writer, r io.Reader, src Source) error {
	a, b, e := rawPool.Get().(*[]byte), rawPool.Get().(*[]byte), encPool.Get().(*[]byte)
	defer rawPool.Put(a)
	defer rawPool.Put(b)
	defer encPool.Put(e)
	cur, next, enc := *a, *b, *e
	h := sha256.New()
	var total int64
	fill := func(buf []byte) (int, bool, error) {
		n, err := io.ReadFull(r, buf)
		h.Write(buf[:n])
		total += int64(n)
		if total > src.Size {
			return n, true, fmt.Errorf("%w (more than the record's %d bytes)", ErrMismatch, src.Size)
		}
		switch err {
		case nil:
			return n, false, nil
		case io.EOF, io.ErrUnexpectedEOF:
			return n, true, nil
		}
		return n, true, err
	}
	have, eof, err := fill(cur)
	for err == nil && !eof {
		var m int
		m, eof, err = fill(next)
		if err != nil || (m == 0 && eof) {
			break
		}
		base64.StdEncoding.Encode(enc, cur[:have]) // a full chunk: no padding
		if _, werr := w.Write(enc[:base64.StdEncoding.EncodedLen(have)]); werr != nil {
			return werr
		}
		cur, next, have = next, cur, m
	}
	if err != nil {
		return err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); total != src.Size || sum != src.SHA256 {
		return fmt.Errorf("%w (%d bytes, sha256 %s; record: %d bytes, sha256 %s)", ErrMismatch, total, sum, src.Size, src.SHA256)
	}
	base64.StdEncoding.Encode(enc, cur[:have])
	_, err = w.Write(enc[:base64.StdEncoding.EncodedLen(have)])
	return err
}
