package preview

import "github.com/darkroom-mcp/darkroom/internal/caches"

// Cache keeps preview bytes by blob key (caches.Previews). Previews are
// immutable, so an entry never goes stale; a deleted output's entry ages
// out.
type Cache = caches.Bounded[string, []byte]

// NewCache returns an empty preview cache, bounded as caches.Previews
// says.
func NewCache() *Cache {
	return caches.New(caches.Previews, caches.Options[string, []byte]{Size: func(_ string, b []byte) int { return len(b) }})
}
