package main

import (
	"fmt"
	"net/http"
	neturl "net/url"
	"testing"

	"github.com/darkroom-mcp/darkroom/tasks"
)

// TestCreateRateRoundTrips counts, through a TCP proxy (rtProxy), the
// round trips to PostgreSQL of one tools/call generate answered with a
// task (generation and task rows in one transaction) with the create rate
// in force, alone and with a daily budget and an idempotency key. One
// pooled connection, warmed, so that no statement is prepared while
// counting.
func TestCreateRateRoundTrips(t *testing.T) {
	u, err := neturl.Parse(sharedDatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := startRTProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("pool_max_conns", "1")
	u.RawQuery = q.Encode()
	caps := map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}
	for _, c := range []struct {
		name   string
		budget bool
		keyed  bool
		want   int64
	}{
		// [BEGIN, lock, take a token], [insert generation, insert task, COMMIT]
		{"rate", false, false, 2},
		// [BEGIN, lock, spent today], take, [inserts, COMMIT]
		{"rate and budget", true, false, 3},
		// [BEGIN, lock, key look-up], take, [inserts, COMMIT]
		{"rate and key", false, true, 3},
		// [BEGIN, lock, spent today and key look-up], take, [inserts, COMMIT]
		{"rate, budget and key", true, true, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startBenchServer(t, 1, false, nil, func(cfg *config) {
				cfg.DatabaseURL = u.String()
				if c.budget {
					b := int64(1 << 40)
					cfg.DailyBudget = &b
				}
			})
			hc := &http.Client{}
			create := func(i int) {
				args := map[string]any{"modelId": "local-sketch", "prompt": "counted"}
				if c.keyed {
					args["idempotencyKey"] = fmt.Sprintf("%s-%d", c.name, i)
				}
				code, resp, err := postRaw(hc, s.url+"/mcp", rpcBody(int64(i), "tools/call", map[string]any{"name": "generate", "arguments": args}, caps),
					rpcHeaders("tools/call", "generate", ""))
				if err != nil || code != 200 || createdID(resp) == "" {
					t.Fatalf("generate: %d %v %s", code, err, resp)
				}
			}
			for i := range 3 { // prepares the statements on the one connection
				create(i)
			}
			for i := 3; i < 13; i++ {
				before := proxy.trips.Load()
				create(i)
				if got := proxy.trips.Load() - before; got != c.want {
					t.Fatalf("create %d: %d round trips, want %d", i, got, c.want)
				}
			}
		})
	}
}
