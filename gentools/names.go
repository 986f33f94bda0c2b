package gentools

import (
	"maps"
	"slices"
)

// Names lists the registered tools, sorted (a bounded label set for
// metrics).
func (t *Tools) Names() []string { return slices.Sorted(maps.Keys(t.classes)) }
