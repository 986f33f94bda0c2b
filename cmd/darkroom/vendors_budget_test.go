package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestVendorBudget: 50 concurrent creates against a daily budget that
// holds exactly n of a vendor model: n are accepted, each made exactly
// one vendor job, and the spend is exactly n × credits.
func TestVendorBudget(t *testing.T) {
	cases := []struct {
		vendor, model string
		credits, n    int64
	}{
		{"google", "google-gemini-3.1-flash-image", 39, 7},
		{"google", "google-omni-1.1-flash", 800, 3},
		{"openai", "openai-gpt-image-2", 50, 9},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			t.Parallel()
			rig := startEmulator(t, defaultTiming)
			budget := c.n*c.credits + c.credits - 1 // one more would not fit
			s := vendorServer(t, rig, c.vendor, func(cfg *config) { cfg.DailyBudget = &budget })
			cl := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
			var mu sync.Mutex
			var accepted []string
			refused := 0
			var wg sync.WaitGroup
			for i := range 50 {
				wg.Go(func() {
					r := cl.tool("generate", map[string]any{"modelId": c.model, "prompt": fmt.Sprintf("budget %d", i)})
					mu.Lock()
					defer mu.Unlock()
					switch sc, _ := r.Result["structuredContent"].(map[string]any); {
					case r.Result["isError"] != true && sc["generationId"] != nil:
						accepted = append(accepted, sc["generationId"].(string))
					case strings.Contains(fmt.Sprint(r.Result["content"]), "balance"):
						refused++
					default:
						t.Errorf("create %d: %+v %v", i, r.Error, r.Result)
					}
				})
			}
			wg.Wait()
			if int64(len(accepted)) != c.n || refused != 50-int(c.n) {
				t.Fatalf("%d accepted, %d refused; want exactly %d accepted", len(accepted), refused, c.n)
			}
			for _, id := range accepted {
				w := cl.tool("wait_generation", map[string]any{"generationId": id, "timeoutSeconds": 30})
				if sc, _ := w.Result["structuredContent"].(map[string]any); sc["status"] != "completed" {
					t.Fatalf("generation %s: %v", id, w.Result)
				}
			}
			cr := cl.tool("get_credits", nil).Result["structuredContent"].(map[string]any)
			if cr["spent"].(float64) != float64(c.n*c.credits) {
				t.Fatalf("spent %v, want %d", cr["spent"], c.n*c.credits)
			}
			if n := rig.Jobs(c.vendor); int64(n) != c.n {
				t.Fatalf("%d vendor jobs, want %d", n, c.n)
			}
		})
	}
}
