package openai_test

import (
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/openai"
	"github.com/darkroom-mcp/darkroom/provider/providertest"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestContract runs the provider contract against the emulator's OpenAI
// image API.
func TestContract(t *testing.T) {
	const sync = "OpenAI answers the image in the reply: Submit returns the finished job"
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) providertest.Env {
			em := emulator.New(emulator.Options{Clock: emulator.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))})
			t.Cleanup(em.Close)
			spool := provider.DirSpool(t.TempDir())
			newP := func() *openai.Provider {
				p, err := openai.New(openai.Config{Key: "sk-test", BaseURL: em.OpenAI.URL, Spool: spool, RequestsPerMinute: -1, Now: em.Now})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := newP()
			return providertest.Env{
				Provider: p, Model: model(t, p, "openai-gpt-image-2"), VendorModel: "gpt-image-2",
				Restart: func() provider.Provider { return newP() },
				Vendor:  providertest.Emulated(em, "openai", em.OpenAI),
			}
		},
		Lacks: map[providertest.Capability]string{
			providertest.CapAsync: sync, providertest.CapQueued: sync, providertest.CapCancel: sync,
			providertest.CapFail:     "OpenAI fails an image call only by refusing it (Safety, Quota)",
			providertest.CapAppError: "a 5xx from OpenAI is a retried fault (ServerError), never a job's end",
		},
		NotBilled: []providertest.Outcome{providertest.OutcomeSafety, providertest.OutcomeQuota},
	})
}
