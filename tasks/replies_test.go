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
	c := newReplies()
	slot := ReplySlot{ID: "g1", Kind: 'r', Modern: true}
	c.Put(slot, key{"queued"}, []byte("a"))
	for _, tc := range []struct {
		name string
		slot ReplySlot
		key  any
		hit  bool
	}{
		{"same slot and key", slot, key{"queued"}, true},
		{"a changed key", slot, key{"running"}, false},
		{"another era", ReplySlot{ID: "g1", Kind: 'r'}, key{"queued"}, false},
		{"a task of the same id", ReplySlot{ID: "g1", Kind: 't', Modern: true}, key{"queued"}, false},
		{"another key type", slot, struct{ status string }{"queued"}, false},
	} {
		if _, ok := c.Get(tc.slot, tc.key); ok != tc.hit {
			t.Errorf("%s: hit %v, want %v", tc.name, ok, tc.hit)
		}
	}
	restore := caches.Disable(caches.Replies)
	if _, ok := c.Get(slot, key{"queued"}); ok {
		t.Error("answered with the cache off")
	}
	restore()
	max := caches.Replies.Spec().Entries
	for i := range max + 100 {
		s := ReplySlot{ID: fmt.Sprint("gen-", i), Kind: 'r'}
		c.Put(s, i, []byte("x"))
		if _, ok := c.Get(s, i); !ok {
			t.Fatalf("entry %d missing right after put", i)
		}
	}
	if n, _ := c.b.Len(); n != max {
		t.Fatalf("%d entries, want %d", n, max)
	}
}
