package limit

import "sync"

// Owed remembers, per key, the tokens of the last request of unknown
// cost (a listen: its ids are in its body) that the key's bucket refused,
// until one is admitted. The next such request is then refused before its
// body is read while the bucket holds fewer than that: a caller flooding
// thousand-id listens pays one read and parse per refill, not one per
// request. It is safe for concurrent use; a key that owes nothing takes no
// memory.
type Owed struct {
	mu sync.Mutex
	m  map[string]int
}

// owedMax bounds the keys remembered (then all are forgotten: at worst a
// listen is read once more).
const owedMax = 1 << 16

// Note remembers that key was refused a request costing n tokens.
func (o *Owed) Note(key string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil || len(o.m) >= owedMax {
		o.m = map[string]int{}
	}
	o.m[key] = n
}

// Paid forgets key's refusal: a request like it was admitted.
func (o *Owed) Paid(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
}

// Of is the tokens key was last refused, or 1 when it owes nothing.
func (o *Owed) Of(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n, ok := o.m[key]; ok {
		return n
	}
	return 1
}
