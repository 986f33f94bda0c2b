package tasks

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/internal/rowcache"
)

// replyCache is the dispatcher's one cache of encoded replies
// (caches.Replies): per slot (a task's tasks/get, a generation's lean
// read per era) the last reply encoded and the key it was encoded for,
// reused only for an equal key. It is read only after the caller's own
// lookup found the task or generation, so it never answers for another
// owner. At most replyCacheMax slots; then a random one leaves. A slot
// nobody read for rowcache.PollIdle leaves too, so that the cache holds
// what is being polled now.
type replyCache struct {
	mu    sync.Mutex
	m     map[replySlot]replyEntry
	swept time.Time // when put last dropped the idle slots
}

// replySlot is where one reply lives: the task or generation id, which
// of the two it is, and the era of the encoding.
type replySlot struct {
	id     string
	kind   byte // 't': tasks/get; 'r': a lean read
	modern bool
}

type replyEntry struct {
	key  any // comparable
	b    json.RawMessage
	seen time.Time // last put or read
}

const replyCacheMax = 8192

func (c *replyCache) get(s replySlot, key any) (json.RawMessage, bool) {
	if !caches.On(caches.Replies) {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[s]
	if !ok || e.key != key {
		return nil, false
	}
	e.seen = time.Now()
	c.m[s] = e
	return e.b, true
}

func (c *replyCache) put(s replySlot, key any, b json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[replySlot]replyEntry{}
	}
	now := time.Now()
	if now.Sub(c.swept) >= rowcache.PollIdle/4 {
		c.swept = now
		for old, e := range c.m {
			if now.Sub(e.seen) > rowcache.PollIdle {
				delete(c.m, old)
			}
		}
	}
	if _, ok := c.m[s]; !ok && len(c.m) >= replyCacheMax {
		for old := range c.m { // a random entry leaves
			delete(c.m, old)
			break
		}
	}
	c.m[s] = replyEntry{key, b, now}
}
