package preview

import (
	"container/list"
	"sync"

	"github.com/darkroom-mcp/darkroom/internal/caches"
)

// Cache keeps preview bytes by blob key, least recently used out first,
// bounded by total bytes. Previews are immutable, so an entry never goes
// stale; a deleted output's entry ages out.
type Cache struct {
	mu    sync.Mutex
	max   int
	size  int
	order *list.List // front: most recent; values are *entry
	byKey map[string]*list.Element
}

type entry struct {
	key  string
	data []byte
}

// NewCache returns a cache holding at most maxBytes of previews.
func NewCache(maxBytes int) *Cache {
	return &Cache{max: maxBytes, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get returns the cached bytes of key.
func (c *Cache) Get(key string) ([]byte, bool) {
	if !caches.On(caches.Previews) {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*entry).data, true
	}
	return nil, false
}

// Put stores data under key, evicting the least recently used entries.
func (c *Cache) Put(key string, data []byte) {
	if len(data) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.byKey[key] = c.order.PushFront(&entry{key: key, data: data})
	c.size += len(data)
	for c.size > c.max {
		last := c.order.Back()
		en := last.Value.(*entry)
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
