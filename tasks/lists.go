package tasks

import (
	"bytes"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// legacyResult hides the 2026-07-28 cache hints (ttlMs, cacheScope) of a
// result sent to a pre-2026 client: go-sdk fills them on every era, and
// they are no part of the older schemas.
type legacyResult struct{ mcp.Result }

func (r legacyResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.Result)
	if err != nil || !bytes.HasPrefix(b, []byte("{")) {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "ttlMs")
	delete(m, "cacheScope")
	return json.Marshal(m)
}

// shapeLegacy returns a cacheable result (server/discover, the lists) as
// the request's era expects it. A resources/read result is gentools's to
// shape: go-sdk looks inside it (multi round-trip for old clients), which
// the wrapper would hide.
func shapeLegacy(req mcp.Request, res mcp.Result) mcp.Result {
	if Version(req) >= TasksVersion {
		return res
	}
	if _, read := res.(*mcp.ReadResourceResult); read {
		return res
	}
	if _, ok := res.(mcp.CacheableResult); !ok {
		return res
	}
	return legacyResult{res}
}
