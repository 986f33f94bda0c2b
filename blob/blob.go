// Package blob stores generation outputs and hands them out as short-lived
// signed links. Two implementations share one contract: a local folder
// (the embedded default, served by darkroom at /files with HMAC-signed
// links) and an S3-compatible bucket (presigned GET links).
package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strconv"
	"time"
)

// Object describes a stored blob.
type Object struct {
	Key         string
	Size        int64
	SHA256      string // lowercase hex
	ContentType string
}

// Store is the contract every blob backend implements. Keys are
// slash-separated relative paths built by the caller (see Key).
type Store interface {
	// Put streams r into key without buffering the whole body in memory,
	// computing size and SHA-256 on the way. A reader error or a size above
	// maxBytes (when > 0) leaves nothing visible under key.
	Put(ctx context.Context, key string, r io.Reader, contentType string, maxBytes int64) (Object, error)
	// SignedURL mints a link valid for ttl; links are never stored.
	SignedURL(ctx context.Context, key string, ttl time.Duration) (url string, expiresAt time.Time, err error)
	// Open streams the blob back. The caller closes the reader.
	Open(ctx context.Context, key string) (io.ReadCloser, Object, error)
	// Stat reports the blob without reading it.
	Stat(ctx context.Context, key string) (Object, error)
	// Delete removes the blob; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// ErrNotFound is returned by Open and Stat for a missing key.
var ErrNotFound = errors.New("blob: not found")

// ErrTooLarge is returned by Put when the body exceeds maxBytes.
var ErrTooLarge = errors.New("blob: object too large")

// Key builds the storage key of one output: {owner-hash}/{generationId}/{index}.{ext}.
// The owner is hashed so that keys neither leak principal names nor let one
// caller's objects sit beside another's. Backends may add their own prefix.
func Key(owner, generationID string, index int, ext string) string {
	return OwnerHash(owner) + "/" + generationID + "/" + strconv.Itoa(index) + "." + ext
}

// OwnerHash is the first 16 bytes of SHA-256(owner), hex-encoded.
func OwnerHash(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:16])
}
