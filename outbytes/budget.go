// Package outbytes bounds the output bytes darkroom holds in memory to
// answer reads (resources/read, view_generation with output): one
// process-wide Budget of shares, each held from the moment a blob is
// opened until its response is written; and the streaming of a blob's
// base64 into a response instead of building it in memory (Deferral).
package outbytes

import (
	"fmt"
	"sync"
	"time"
)

// DefaultTotal is the default process-wide budget.
const DefaultTotal = 256 << 20

// One caller may hold at most PerCallerNum/PerCallerDen of the budget (a
// caller holding nothing may still take one share up to the total, so one
// read larger than the fraction is possible at all), so while one key
// floods another key's read still finds room.
const (
	PerCallerNum = 1
	PerCallerDen = 2
)

// RetryAfter is the wait a refusal suggests: shares are held for as long
// as a response takes to write, typically well under a second.
const RetryAfter = time.Second

// Refused is a share refused: the budget, or the caller's fraction of it,
// is taken. It is retryable after RetryAfter.
type Refused struct {
	Caller     string
	Want       int64
	RetryAfter time.Duration
}

func (e *Refused) Error() string {
	return fmt.Sprintf("output bytes in flight at their limit: %d more bytes refused; retry after %s", e.Want, e.RetryAfter)
}

// Budget is the process-wide byte budget. Its zero value and nil refuse
// nothing.
type Budget struct {
	total, per int64
	mu         sync.Mutex
	used       int64
	held       map[string]int64
}

// New returns a budget of total bytes; total <= 0 is unlimited.
func New(total int64) *Budget {
	return &Budget{total: total, per: total / PerCallerDen * PerCallerNum, held: map[string]int64{}}
}

// Total is the budget's size in bytes (0: unlimited).
func (b *Budget) Total() int64 {
	if b == nil {
		return 0
	}
	return b.total
}

// Used is the bytes held now, in all and by caller.
func (b *Budget) Used(caller string) (all, mine int64) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.held[caller]
}

// TryAcquire takes a share of n bytes for caller, at once or not at all:
// it never waits. The release func returns it; calling it again does
// nothing.
func (b *Budget) TryAcquire(caller string, n int64) (release func(), err error) {
	if b == nil || b.total <= 0 || n <= 0 {
		return func() {}, nil
	}
	b.mu.Lock()
	mine := b.held[caller]
	if b.used+n > b.total || (mine > 0 && mine+n > b.per) {
		b.mu.Unlock()
		return nil, &Refused{Caller: caller, Want: n, RetryAfter: RetryAfter}
	}
	b.used += n
	b.held[caller] = mine + n
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.used -= n
			if b.held[caller] -= n; b.held[caller] <= 0 {
				delete(b.held, caller)
			}
		})
	}, nil
}
