package google_test

import (
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/fetch"
	"github.com/darkroom-mcp/darkroom/provider/google"
	"github.com/darkroom-mcp/darkroom/provider/providertest"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestContract runs the provider contract against the emulator's Gemini
// API (a synchronous image model and an Interactions API video model)
// and Vertex AI (a Veo operation).
func TestContract(t *testing.T) {
	const sync = "the Gemini API answers the image in the generateContent reply: Submit returns the finished job"
	both := map[providertest.Capability]string{
		providertest.CapQuota:    "Google's quota refusal is its 429 RESOURCE_EXHAUSTED (Throttled)",
		providertest.CapAppError: "a 5xx from Google is a retried fault (ServerError); a job that fails is Failed",
	}
	with := func(m map[providertest.Capability]string) map[providertest.Capability]string {
		for k, v := range both {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name, model, vendorModel, vendor string
		vertex                           bool
		lacks                            map[providertest.Capability]string
	}{
		{"GeminiImage", "google-gemini-3.1-flash-image", "gemini-3.1-flash-image", "google", false, with(map[providertest.Capability]string{
			providertest.CapAsync: sync, providertest.CapQueued: sync, providertest.CapCancel: sync,
			providertest.CapFail: "the Gemini API fails an image call only by refusing it (Safety)",
		})},
		{"Interactions", "google-omni-1.2-flash", "gemini-omni-1.2-flash", "google", false, with(map[providertest.Capability]string{
			providertest.CapQueued: "an Interactions API interaction is in_progress from the start",
		})},
		{"VertexVeo", "google-veo-3.1-fast", "veo-3.1-fast-generate-001", "vertex", true, with(map[providertest.Capability]string{
			providertest.CapQueued:      "a Veo operation is running (done: false) from the start",
			providertest.CapCancel:      "Vertex AI has no cancel for a Veo operation",
			providertest.CapSafety:      "the emulator scripts no Veo safety refusal",
			providertest.CapListing:     "darkroom reads no Vertex AI model list (Listed leaves Vertex entries out)",
			providertest.CapLargeOutput: "the emulator's Veo operation answers one fixed 1 KiB video (the spool it streams into is GeminiImage's, checked there)",
			providertest.CapPing:        "Ping checks the Vertex AI sign-in, whose token is cached for its life: it does not reach Vertex each time",
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			providertest.Run(t, providertest.Harness{
				New: func(t *testing.T) providertest.Env {
					em := emulator.New(emulator.Options{
						Clock:  emulator.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)),
						Timing: func(string) (time.Duration, time.Duration) { return time.Second, 40 * time.Second },
					})
					t.Cleanup(em.Close)
					spool := provider.DirSpool(t.TempDir())
					newP := func() *google.Provider {
						cfg := google.Config{
							Spool: spool, RequestsPerMinute: -1, Now: em.Now,
							Fetch: fetch.Options{Hosts: []string{"127.0.0.1"}, AllowHTTP: true, AllowPrivate: true},
						}
						if c.vertex {
							cfg.Vertex = &google.Vertex{Project: emulator.DefaultVertexProject, Location: emulator.DefaultVertexLocation, BaseURL: em.Vertex.URL, Credentials: em.ServiceAccountJSON()}
						} else {
							cfg.Key, cfg.BaseURL = "gemini_test", em.Google.URL
						}
						p, err := google.New(cfg)
						if err != nil {
							t.Fatal(err)
						}
						return p
					}
					p := newP()
					var m provider.Model
					for _, pm := range p.Models() {
						if pm.ID == c.model {
							m = pm
						}
					}
					if m.ID == "" {
						t.Fatalf("no model %s", c.model)
					}
					srv := em.Google
					if c.vertex {
						srv = em.Vertex
					}
					return providertest.Env{
						Provider: p, Model: m, VendorModel: c.vendorModel,
						Restart: func() provider.Provider { return newP() },
						Vendor:  providertest.Emulated(em, c.vendor, srv),
					}
				},
				Lacks:     c.lacks,
				NotBilled: []providertest.Outcome{providertest.OutcomeFail, providertest.OutcomeSafety},
			})
		})
	}
}
