package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/server/auth"
)

// TestTrustedProxiesWired: --trusted-proxies (DARKROOM_TRUSTED_PROXIES)
// reaches the guess guard of the built app: forwarding headers name the
// throttled client only when the peer is a listed proxy.
func TestTrustedProxiesWired(t *testing.T) {
	const burst = 3
	cases := []struct {
		name    string
		proxies string
		// after the guesser at guessPeer (naming 192.0.2.10) is throttled,
		// a guess from probePeer naming probeXFF answers wantProbe.
		guessPeer, probePeer, probeXFF string
		wantProbe                      int
	}{
		{"not set: a forged header moves nothing", "", "203.0.113.5:1", "203.0.113.5:2", "192.0.2.99", http.StatusTooManyRequests},
		{"not set: the named client is not throttled", "", "203.0.113.5:1", "192.0.2.10:1", "", http.StatusUnauthorized},
		{"untrusted peer: a forged header moves nothing", "10.0.0.0/8", "203.0.113.5:1", "203.0.113.5:2", "192.0.2.99", http.StatusTooManyRequests},
		{"trusted proxy: the named client is throttled", "10.0.0.0/8", "10.0.0.1:1", "10.0.0.2:1", "192.0.2.10", http.StatusTooManyRequests},
		{"trusted proxy: another client is not", "10.0.0.0/8", "10.0.0.1:1", "10.0.0.1:1", "192.0.2.11", http.StatusUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearSettingsEnv(t)
			cfg, err := parseConfig("test", []string{"--trusted-proxies", c.proxies})
			if err != nil {
				t.Fatal(err)
			}
			cfg.DataDir = t.TempDir()
			cfg.LocalLatency = 0
			key, err := auth.NewAPIKey("alice", []byte("alice-valid-secret"), auth.Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			cfg.Auth = auth.Config{Keys: []auth.APIKey{key}}
			a, err := build(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.close() })
			a.limits.PreAuth.Rate, a.limits.PreAuth.Burst = 1e-9, burst // no refill within the test
			h := a.handler()
			call := func(peer, token, xff string) int {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
				r.RemoteAddr = peer
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Accept", "application/json, text/event-stream")
				r.Header.Set("Authorization", "Bearer "+token)
				if xff != "" {
					r.Header.Set("X-Forwarded-For", xff)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				return rec.Code
			}
			statuses := map[int]int{}
			for i := range 3 * burst {
				statuses[call(c.guessPeer, fmt.Sprintf("guess-%d", i), "192.0.2.10")]++
				if got := call(c.guessPeer, "alice-valid-secret", "192.0.2.10"); got != http.StatusOK {
					t.Fatalf("valid key beside guess %d: %d", i, got)
				}
			}
			if statuses[http.StatusUnauthorized] != burst || statuses[http.StatusTooManyRequests] != 2*burst {
				t.Fatalf("guesses answered %v, want %d×401 then 429", statuses, burst)
			}
			if got := call(c.probePeer, "probe", c.probeXFF); got != c.wantProbe {
				t.Errorf("probe from %s naming %q: %d, want %d", c.probePeer, c.probeXFF, got, c.wantProbe)
			}
		})
	}
}
