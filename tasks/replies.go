package tasks

import (
	"encoding/json"

	"github.com/darkroom-mcp/darkroom/internal/caches"
)

// replyCache is the dispatcher's one cache of encoded replies
// (caches.Replies): per slot (a task's tasks/get, a generation's lean
// read per era) the last reply encoded and the key it was encoded for,
// reused only for an equal key. It is read only after the caller's own
// lookup found the task or generation, so it never answers for another
// owner.
type replyCache struct {
	b *caches.Bounded[replySlot, replyEntry]
}

func newReplyCache() replyCache {
	return replyCache{caches.New(caches.Replies, caches.Options[replySlot, replyEntry]{
		Size: func(s replySlot, e replyEntry) int { return len(s.id) + len(e.b) },
	})}
}

// replySlot is where one reply lives: the task or generation id, which
// of the two it is, and the era of the encoding.
type replySlot struct {
	id     string
	kind   byte // 't': tasks/get; 'r': a lean read
	modern bool
}

type replyEntry struct {
	key any // comparable
	b   json.RawMessage
}

func (c replyCache) get(s replySlot, key any) (json.RawMessage, bool) {
	e, ok := c.b.Get(s)
	if !ok || e.key != key {
		return nil, false
	}
	return e.b, true
}

func (c replyCache) put(s replySlot, key any, b json.RawMessage) {
	c.b.Put(s, replyEntry{key, b})
}
