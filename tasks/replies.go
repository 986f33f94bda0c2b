package tasks

import (
	"encoding/json"
	"sync"

	"github.com/darkroom-mcp/darkroom/internal/caches"
)

// replyCache is the dispatcher's one cache of encoded replies
// (caches.Replies): per slot (a task's tasks/get, a generation's lean
// read per era) the last reply encoded and the key it was encoded for,
// reused only for an equal key. It is read only after the caller's own
// lookup found the task or generation, so it never answers for another
// owner. At most replyCacheMax slots; then a random one leaves.
type replyCache struct {
	mu sync.Mutex
	m  map[replySlot]replyEntry
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

const replyCacheMax = 8192

func (c *replyCache) get(s replySlot, key any) (json.RawMessage, bool) {
	if !caches.On(caches.Replies) {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.m[s]
	c.mu.Unlock()
	return e.b, ok && e.key == key
}

func (c *replyCache) put(s replySlot, key any, b json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[replySlot]replyEntry{}
	}
	if _, ok := c.m[s]; !ok && len(c.m) >= replyCacheMax {
		for old := range c.m { // a random entry leaves
			delete(c.m, old)
			break
		}
	}
	c.m[s] = replyEntry{key, b}
}
