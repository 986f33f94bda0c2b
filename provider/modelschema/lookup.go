package modelschema

import (
	"context"
	"strings"

	"github.com/darkroom-mcp/darkroom/provider/catalog"
)

// Lookup finds the catalog entry of a model id for provider name: its
// curated set, else an id qualified by name through resolve (nil: none).
func Lookup(ctx context.Context, models catalog.Set, resolve func(context.Context, string) (catalog.Entry, error), name, id string) (catalog.Entry, bool, error) {
	if e, ok := models.Get(id); ok {
		return e, true, nil
	}
	if resolve == nil || !strings.HasPrefix(id, name+":") {
		return catalog.Entry{}, false, nil
	}
	e, err := resolve(ctx, id)
	if err != nil {
		return catalog.Entry{}, false, err
	}
	return e, e.Provider == name, nil
}
