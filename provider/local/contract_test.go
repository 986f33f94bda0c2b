package local_test

import (
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
	"github.com/darkroom-mcp/darkroom/provider/providertest"
)

// TestContract runs the provider contract against the local provider:
// its "vendor" is its own folder and clock.
func TestContract(t *testing.T) {
	const noVendor = "the local provider renders in-process: no vendor to script"
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) providertest.Env {
			clock := testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			dir := t.TempDir()
			newP := func() *local.Provider {
				p, err := local.New(local.Options{Dir: dir, Scale: 1, Now: clock.Now})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := newP()
			var m provider.Model
			for _, pm := range p.Models() {
				if pm.ID == "local-sketch" {
					m = pm
				}
			}
			return providertest.Env{
				Provider: p, Model: m,
				Restart: func() provider.Provider { return newP() },
				Vendor: providertest.Vendor{
					Prompt: func(o providertest.Outcome) string {
						if o != providertest.OutcomeFail {
							t.Fatalf("local has no outcome %s", o)
						}
						return "[fail]"
					},
					Advance: clock.Advance,
					Jobs:    p.JobCount,
				},
			}
		},
		Lacks: map[providertest.Capability]string{
			providertest.CapLostReply:   noVendor,
			providertest.CapSafety:      "the local provider has no safety system",
			providertest.CapQuota:       "the local provider has no quota",
			providertest.CapAppError:    "the local provider's one failure is [fail] (Failed)",
			providertest.CapThrottle:    noVendor,
			providertest.CapServerError: noVendor,
			providertest.CapOutage:      noVendor,
			providertest.CapRedirect:    "outputs are local: files, never URLs",
			providertest.CapLargeOutput: "outputs are rendered here at a fixed small size; no vendor can send a large one",
			providertest.CapListing:     "the local provider implements no provider.Lister (its models are its own)",
		},
	})
}
