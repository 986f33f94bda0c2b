package generation

import (
	"math"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
)

// repriced serves its provider's models at another price.
type repriced struct {
	provider.Provider
	credits int64
}

func (p repriced) Models() []provider.Model {
	ms := append([]provider.Model(nil), p.Provider.Models()...)
	for i := range ms {
		ms[i].Credits = p.credits
	}
	return ms
}

// TestPriceOutOfRangeRefused: a price that would wrap credits × count
// (an operator's catalog can say anything) is refused before any charge.
func TestPriceOutOfRangeRefused(t *testing.T) {
	for _, tt := range []struct {
		credits int64
		want    string
	}{
		{math.MaxInt64/2 + 1, "out of range for count 2"},
		{-5, "out of range"},
		{10, ""},
	} {
		e := newEnv(t, func(c *Config) { c.Providers = []provider.Provider{repriced{c.Providers[0], tt.credits}} })
		var m provider.Model
		for _, x := range e.svc.cfg.Providers[0].Models() {
			if x.MaxCount >= 2 && !x.NeedsInputImage {
				m = x
				break
			}
		}
		if m.ID == "" {
			t.Fatal("no model makes two outputs")
		}
		_, err := e.svc.Validate(&CreateRequest{ModelID: m.ID, Prompt: "p", Count: 2})
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("credits %d: %v; want %q", tt.credits, err, tt.want)
		}
	}
}
