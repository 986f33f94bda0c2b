package comfyui

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/providertest"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestContract runs the adapter through the contract every provider
// passes, against one emulated ComfyUI.
func TestContract(t *testing.T) {
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) providertest.Env {
			em := emulator.New(emulator.Options{})
			t.Cleanup(em.Close)
			c := em.ComfyUI(emulator.ComfyOptions{RunTime: 4 * time.Second})
			ws, err := LoadWorkflows("workflows")
			if err != nil {
				t.Fatal(err)
			}
			newP := func() provider.Provider {
				p, err := New(Config{URLs: []string{c.URL}, Workflows: ws, Now: em.Now, NoWebsocket: true})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			p := newP()
			var model provider.Model
			for _, m := range p.Models() {
				if m.ID == "comfyui:text-to-image" {
					model = m
				}
			}
			return providertest.Env{
				Provider: p, Model: model, VendorModel: "comfyui:text-to-image", Restart: newP,
				Vendor: providertest.Vendor{
					Prompt: func(o providertest.Outcome) string {
						switch o {
						case providertest.OutcomeFail:
							return "[fail]"
						case providertest.OutcomeLarge:
							return fmt.Sprintf("[large:%d]", providertest.LargeOutputBytes)
						}
						panic("no such outcome at ComfyUI: " + string(o))
					},
					Fault: func(op providertest.Op, f providertest.Fault, _ time.Duration) {
						route := map[providertest.Op]string{providertest.OpSubmit: "POST /prompt", providertest.OpStatus: "GET /api/jobs/{id}"}[op]
						c.Inject(route, map[providertest.Fault]emulator.Fault{providertest.FaultServer: emulator.Fault500,
							providertest.FaultLoseReply: emulator.FaultLoseReply, providertest.FaultDrop: emulator.FaultDrop}[f])
					},
					Down:     c.Down,
					Unlist:   func(string) { c.Uninstall("KSampler") }, // the workflow's sampler taken out
					Advance:  em.Advance,
					Jobs:     c.Jobs,
					Redirect: func(to string) string { return c.URL + "/redirect?to=" + url.QueryEscape(to) },
				},
			}
		},
		Lacks: map[providertest.Capability]string{
			providertest.CapQueued:   "an idle ComfyUI runs a prompt at once; one is queued only behind another (TestComfyRun sees its position)",
			providertest.CapSafety:   "ComfyUI runs the operator's own graph: it has no safety system of its own",
			providertest.CapQuota:    "a self-hosted ComfyUI has no account, quota or credit",
			providertest.CapAppError: "ComfyUI ends a run failed only by a node's error, the fail outcome",
			providertest.CapThrottle: "ComfyUI never answers 429: it queues every prompt",
		},
		// Nothing ComfyUI does is billed by a vendor: a failed run is refunded.
		NotBilled: []providertest.Outcome{providertest.OutcomeFail},
	})
}
