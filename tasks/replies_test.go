package tasks

import (
	"fmt"
	"testing"

	"github.com/darkroom-mcp/darkroom/internal/caches"
)

// TestReplyCache: a reply is reused only for an equal key in its own
// slot (id, kind, era); past its Spec's entries one leaves for each new
// one and the newest is kept; with the cache off nothing is answered.
func TestReplyCache(t *testing.T) {
	type key struct{ status string }
	c := newReplyCache()
	slot := replySlot{id: "g1", kind: 'r', modern: true}
	c.put(slot, key{"queued"}, []byte("a"))
	for _, tc := range []struct {
		name string
		slot replySlot
		key  any
		hit  bool
	}{
		{"same slot and key", slot, key{"queued"}, true},
		{"a changed key", slot, key{"running"}, false},
		{"another era", replySlot{id: "g1", kind: 'r'}, key{"queued"}, false},
		{"a task of the same id", replySlot{id: "g1", kind: 't', modern: true}, key{"queued"}, false},
		{"another key type", slot, struct{ status string }{"queued"}, false},
	} {
		if _, ok := c.get(tc.slot, tc.key); ok != tc.hit {
			t.Errorf("%s: hit %v, want %v", tc.name, ok, tc.hit)
		}
	}
	restore := caches.Disable(caches.Replies)
	if _, ok := c.get(slot, key{"queued"}); ok {
		t.Error("answered with the cache off")
	}
	restore()
	max := caches.Replies.Spec().Entries
	for i := range max + 100 {
		s := replySlot{id: fmt.Sprint("gen-", i), kind: 'r'}
		c.put(s, i, []byte("x"))
		if _, ok := c.get(s, i); !ok {
			t.Fatalf("entry %d missing right after put", i)
		}
	}
	if n, _ := c.b.Len(); n != max {
		t.Fatalf("%d entries, want %d", n, max)
	}
}
