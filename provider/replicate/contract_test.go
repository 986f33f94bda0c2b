package replicate_test

import (
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/providertest"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestContract runs the provider contract against the emulator's
// Replicate.
func TestContract(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) providertest.Env {
			em, p := setup(t, emulator.Options{}, nil)
			return providertest.Env{
				Provider: p, Model: model(t, p, "replicate-flux-schnell"), VendorModel: "black-forest-labs/flux-schnell",
				Restart: func() provider.Provider { return newProvider(t, em, nil) },
				Vendor:  providertest.Emulated(em, "replicate", em.Replicate),
			}
		},
		Lacks: map[providertest.Capability]string{
			providertest.CapQuota:    "the emulator scripts no Replicate credit refusal (402)",
			providertest.CapAppError: "Replicate bills a failed prediction's run time however it failed (Failed covers it)",
		},
	})
}
