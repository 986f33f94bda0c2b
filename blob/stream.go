package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
)

// MaxKeyLen bounds a key's length; S3 allows 1024 bytes including any prefix.
const MaxKeyLen = 900

// ErrInvalidKey is returned for a key that is empty, too long, absolute,
// has an empty, "." or ".." segment, a segment starting with ".", or a
// character outside [A-Za-z0-9._/-].
var ErrInvalidKey = errors.New("blob: invalid key")

// ErrChecksum is returned by a reader from Open when the bytes read do not
// match the SHA-256 or size recorded at Put.
var ErrChecksum = errors.New("blob: checksum mismatch")

// ValidateKey reports whether key is acceptable to every backend. Segments
// starting with "." are refused so that backend-private names (temporary
// files, staging objects) can never collide with a caller's key.
func ValidateKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: length %d", ErrInvalidKey, len(key))
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '/' || c == '-') {
			return fmt.Errorf("%w: %q has a disallowed character", ErrInvalidKey, key)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg[0] == '.' {
			return fmt.Errorf("%w: %q has an empty or dot segment", ErrInvalidKey, key)
		}
	}
	return nil
}

// hashingReader reads from r, counting and hashing the bytes, and fails
// with ErrTooLarge once more than max bytes (when max > 0) have been read.
// It also stops with ctx's error once ctx is done.
type hashingReader struct {
	ctx  context.Context
	r    io.Reader
	max  int64
	n    int64
	h    hash.Hash
	err  error // sticky: the first non-EOF error returned
	done bool  // r returned io.EOF
}

func newHashingReader(ctx context.Context, r io.Reader, max int64) *hashingReader {
	return &hashingReader{ctx: ctx, r: r, max: max, h: sha256.New()}
}

func (h *hashingReader) Read(p []byte) (int, error) {
	if h.err != nil {
		return 0, h.err
	}
	if h.done {
		return 0, io.EOF
	}
	if err := h.ctx.Err(); err != nil {
		h.err = err
		return 0, err
	}
	if h.max > 0 && int64(len(p)) > h.max-h.n+1 {
		// Read at most one byte past the limit: enough to notice it.
		p = p[:h.max-h.n+1]
	}
	n, err := h.r.Read(p)
	h.n += int64(n)
	h.h.Write(p[:n])
	if h.max > 0 && h.n > h.max {
		h.err = ErrTooLarge
		return 0, h.err
	}
	switch {
	case err == io.EOF:
		h.done = true
	case err != nil:
		h.err = err
	}
	return n, err
}

func (h *hashingReader) sum() string { return hex.EncodeToString(h.h.Sum(nil)) }

// verifyingReader hashes what it passes through and, at EOF, compares the
// count and digest with the values recorded at Put. A mismatch turns the
// EOF into ErrChecksum, so a caller that reads to the end never mistakes a
// corrupted or truncated blob for a good one.
type verifyingReader struct {
	rc      io.ReadCloser
	key     string
	size    int64  // < 0: unknown, not checked
	sha256  string // empty: not recorded, only the size is checked
	n       int64
	h       hash.Hash
	checked error
	atEOF   bool
}

func newVerifyingReader(rc io.ReadCloser, o Object) *verifyingReader {
	return &verifyingReader{rc: rc, key: o.Key, size: o.Size, sha256: o.SHA256, h: sha256.New()}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.atEOF {
		if v.checked != nil {
			return 0, v.checked
		}
		return 0, io.EOF
	}
	n, err := v.rc.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	if v.size >= 0 && v.n > v.size {
		v.atEOF = true
		v.checked = fmt.Errorf("%w: %s: more than the recorded %d bytes", ErrChecksum, v.key, v.size)
		return n, v.checked
	}
	if err == io.EOF {
		v.atEOF = true
		switch got := hex.EncodeToString(v.h.Sum(nil)); {
		case v.size >= 0 && v.n != v.size:
			v.checked = fmt.Errorf("%w: %s: read %d bytes, recorded %d", ErrChecksum, v.key, v.n, v.size)
		case v.sha256 != "" && got != v.sha256:
			v.checked = fmt.Errorf("%w: %s: sha256 %s, recorded %s", ErrChecksum, v.key, got, v.sha256)
		}
		if v.checked != nil {
			return n, v.checked
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.rc.Close() }

// chunks holds a body read ahead in memory as a list of buffers, allocated
// as the body arrives (64 KiB doubling to 1 MiB), so that neither a small
// body nor a large one costs a full-size buffer plus the copies and the
// garbage of growing one slice.
type chunks struct {
	bufs [][]byte
	size int64
}

// readChunks reads from r until EOF or until limit bytes are held.
func readChunks(r io.Reader, limit int64) (*chunks, error) {
	c := &chunks{}
	next := int64(64 << 10)
	for c.size < limit {
		buf := make([]byte, min(next, limit-c.size))
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			c.bufs = append(c.bufs, buf[:n])
			c.size += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return c, nil
		}
		if err != nil {
			return nil, err
		}
		next = min(next*2, 1<<20)
	}
	return c, nil
}

// reader returns a fresh io.ReadSeeker over the chunks.
func (c *chunks) reader() *chunkReader { return &chunkReader{c: c} }

type chunkReader struct {
	c   *chunks
	off int64
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.off >= r.c.size {
		return 0, io.EOF
	}
	n, base := 0, int64(0)
	for _, b := range r.c.bufs {
		if len(p) == 0 {
			break
		}
		end := base + int64(len(b))
		if r.off < end {
			k := copy(p, b[r.off-base:])
			p = p[k:]
			r.off += int64(k)
			n += k
		}
		base = end
	}
	return n, nil
}

func (r *chunkReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.c.size
	default:
		return 0, errors.New("blob: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("blob: negative position")
	}
	r.off = offset
	return offset, nil
}
