package gentools

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// readGeneration is getGeneration, with the result of a generation whose
// answer depends on its view alone kept in t.memo.
func (t *Tools) readGeneration(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, bool, error) {
	g, _, res, err := t.generationOf(ctx, req)
	if g == nil {
		return res, false, err
	}
	if len(g.Outputs) > 0 && !g.OutputsExpired {
		// Fresh links (and their validity in the text) per read.
		res, err := t.Result(ctx, g, nil)
		return res, false, err
	}
	// Without outputs there is nothing to sign and no preview: the result
	// is viewResult of the view, which Result would build as well.
	v, err := t.View(ctx, g)
	if err != nil {
		return nil, false, err
	}
	k := keyOf(v)
	if res := t.memo.get(g.ID, k); res != nil {
		return res, true, nil
	}
	res = viewResult(v)
	t.memo.put(g.ID, k, res)
	return res, true, nil
}

// viewKey is everything of a view without outputs that its result shows
// (TestViewKeyCoversTheView keeps it complete).
type viewKey struct {
	id, model, kind, status, message, created, updated, provider string
	progress                                                     float64
	credits                                                      int64
	hasError                                                     bool
	err                                                          ErrorView
	expired, upload, cancel                                      bool
	timedOut                                                     int8 // 0 nil, 1 false, 2 true
}

func keyOf(v *GenerationView) viewKey {
	k := viewKey{
		id: v.GenerationID, model: v.ModelID, kind: v.Kind, status: v.Status, message: v.StatusMessage,
		created: v.CreatedAt, updated: v.UpdatedAt, provider: v.provider,
		progress: v.Progress, credits: v.Credits,
		expired: v.OutputsExpired, upload: v.UploadRequired, cancel: v.CancelRequested,
	}
	if v.Error != nil {
		k.hasError, k.err = true, *v.Error
	}
	if v.TimedOut != nil {
		k.timedOut = 1
		if *v.TimedOut {
			k.timedOut = 2
		}
	}
	return k
}

// resultMemo holds the last shared result per generation id, at most
// memoMax (then a random one leaves). It is read only after the caller's
// own Get found the generation, so it never answers for another owner.
type resultMemo struct {
	mu sync.Mutex
	m  map[string]memoEntry
}

type memoEntry struct {
	key viewKey
	res *mcp.CallToolResult
}

const memoMax = 4096

func (c *resultMemo) get(id string, k viewKey) *mcp.CallToolResult {
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if !ok || e.key != k {
		return nil
	}
	return e.res
}

func (c *resultMemo) put(id string, k viewKey, res *mcp.CallToolResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]memoEntry{}
	}
	if _, ok := c.m[id]; !ok && len(c.m) >= memoMax {
		for old := range c.m { // a random entry leaves
			delete(c.m, old)
			break
		}
	}
	c.m[id] = memoEntry{k, res}
}
