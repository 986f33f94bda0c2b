package tasks

import (
	"encoding/json"

	"github.com/darkroom-mcp/darkroom/internal/caches"
)

// Replies is the dispatcher's one cache of encoded replies
// (caches.Replies): per slot (a task's tasks/get, a generation's lean
// read per era) the last reply encoded and the key it was encoded for,
// reused only for an equal key. It is read only after the caller's own
// lookup found the task or generation, so it never answers for another
// owner.
type Replies struct {
	b *caches.Bounded[ReplySlot, replyEntry]
}

func newReplies() Replies {
	return Replies{caches.New(caches.Replies, caches.Options[ReplySlot, replyEntry]{
		Size: func(s ReplySlot, e replyEntry) int { return len(s.ID) + len(e.b) },
	})}
}

// ReplySlot is where one reply lives: the task or generation id, which
// of the two it is, and the era of the encoding.
type ReplySlot struct {
	ID     string
	Kind   byte // 't': tasks/get; 'r': a lean read
	Modern bool
}

type replyEntry struct {
	key any // comparable
	b   json.RawMessage
}

// Get is the reply kept in s, if it was encoded for an equal key.
func (c Replies) Get(s ReplySlot, key any) (json.RawMessage, bool) {
	e, ok := c.b.Get(s)
	if !ok || e.key != key {
		return nil, false
	}
	return e.b, true
}

// Put keeps b, encoded for key, in s.
func (c Replies) Put(s ReplySlot, key any, b json.RawMessage) {
	c.b.Put(s, replyEntry{key, b})
}
