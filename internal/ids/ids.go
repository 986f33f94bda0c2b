// Package ids makes the ids darkroom hands out: generation and task ids.
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// New returns a 44-character hex id: the current unix millisecond time
// (48 bits) followed by 128 random bits from crypto/rand.
//
// The random part makes the id unguessable (the spec asks for at least 128
// bits; a task id can act as a bearer handle). The time prefix makes ids
// sort in creation order, so a batch of new rows lands on the same few
// B-tree pages of each id index instead of one random page per row: the
// group-commit writer then writes a few WAL frames per batch, not a few per
// creation.
func New() string { return at(time.Now()) }

func at(t time.Time) string {
	var b [22]byte
	ms := uint64(t.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
