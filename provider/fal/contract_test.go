package fal_test

import (
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/provider/providertest"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestContract runs the provider contract against the emulator's fal
// (queue and Platform API on one server).
func TestContract(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) providertest.Env {
			em := emulator.New(emulator.Options{})
			t.Cleanup(em.Close)
			newP := func() *fal.Provider {
				return newProvider(t, em, func(c *fal.Config) { c.APIURL = em.Fal.URL })
			}
			p := newP()
			return providertest.Env{
				Provider: p, Model: model(t, p, "fal-flux-schnell"), VendorModel: "fal-ai/flux/schnell",
				Restart: func() provider.Provider { return newP() },
				Vendor:  providertest.Emulated(em, "fal", em.Fal),
			}
		},
		Lacks: map[providertest.Capability]string{
			providertest.CapQuota: "the emulator scripts no fal balance refusal",
		},
		// fal bills no 5xx ("Server errors (HTTP 500+) are never charged").
		NotBilled: []providertest.Outcome{providertest.OutcomeAppError},
	})
}
