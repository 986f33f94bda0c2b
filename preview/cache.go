package preview

import (
	"container/list"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/internal/rowcache"
)

// Cache keeps preview bytes by blob key, least recently used out first,
// bounded by total bytes. Previews are immutable, so an entry never goes
// stale; a deleted output's entry ages out. Like the polling caches, it
// drops what nobody read for rowcache.PollIdle: it holds the previews of
// what is being looked at, not of everything since the start, so a
// replica's memory follows its load instead of filling to the bound.
type Cache struct {
	mu    sync.Mutex
	max   int
	size  int
	order *list.List // front: most recent; values are *entry
	byKey map[string]*list.Element
	// now is the clock (tests set it).
	now func() time.Time
}

type entry struct {
	key  string
	data []byte
	seen time.Time // last Put or Get
}

// NewCache returns a cache holding at most maxBytes of previews.
func NewCache(maxBytes int) *Cache {
	return &Cache{max: maxBytes, order: list.New(), byKey: map[string]*list.Element{}, now: time.Now}
}

// Get returns the cached bytes of key.
func (c *Cache) Get(key string) ([]byte, bool) {
	if !caches.On(caches.Previews) {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		e.Value.(*entry).seen = c.now()
		c.order.MoveToFront(e)
		return e.Value.(*entry).data, true
	}
	return nil, false
}

// Put stores data under key, evicting the least recently used entries
// past the byte bound and those idle past rowcache.PollIdle.
func (c *Cache) Put(key string, data []byte) {
	if len(data) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if e, ok := c.byKey[key]; ok {
		e.Value.(*entry).seen = now
		c.order.MoveToFront(e)
		return
	}
	c.byKey[key] = c.order.PushFront(&entry{key: key, data: data, seen: now})
	c.size += len(data)
	// The back is the least recently seen: evict from it while over the
	// bound or idle.
	for last := c.order.Back(); last != nil; last = c.order.Back() {
		en := last.Value.(*entry)
		if c.size <= c.max && now.Sub(en.seen) <= rowcache.PollIdle {
			break
		}
		c.order.Remove(last)
		delete(c.byKey, en.key)
		c.size -= len(en.data)
	}
}

// Len is the number of cached previews.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
