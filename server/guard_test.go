package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
	"github.com/darkroom-mcp/darkroom/server/limit"
)

const (
	guardBurst  = 5
	validSecret = "alice-valid-secret"
)

// guardRig is darkroom's real HTTP chain (Origin, guess guard, API-key
// auth, per-caller limits, go-sdk) with the limiters on a fake clock.
type guardRig struct {
	h   http.Handler
	clk *testclock.Clock
}

func newGuardRig(t *testing.T, proxies string) *guardRig {
	t.Helper()
	tools, _ := realTools(t)
	a := aliceKeyOnly(t)
	tp, err := limit.ParseTrustedProxies(proxies)
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.New(time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC))
	limits := limit.NewClasses(limit.Options{Now: clk.Now})
	limits.PreAuth.Rate, limits.PreAuth.Burst = 1, guardBurst
	limits.Poll.Rate, limits.Poll.Burst = 1e9, 1e9 // the key's own pings (charged like every method) are not the subject
	cfg := Config{Version: "test", Tools: tools, Auth: a, ResourceURL: "https://darkroom.example/mcp",
		Limits: limits, TrustedProxies: tp, Logger: discard}
	return &guardRig{h: Handler(cfg, New(cfg)), clk: clk}
}

// call sends one JSON-RPC ping to /mcp from peer with the given bearer
// token ("" for none) and extra headers ("Name: value").
func (g *guardRig) call(peer, token string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	r.RemoteAddr = peer
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		r.Header.Add(k, v)
	}
	rec := httptest.NewRecorder()
	g.h.ServeHTTP(rec, r)
	return rec
}

// TestGuessGuardNeverSlowsValidKey: a guesser far past the guard's limit
// on address A is throttled, while a valid key on the same address A is
// never refused nor delayed, whether it was in use before the guessing
// began or arrives in the middle of it.
func TestGuessGuardNeverSlowsValidKey(t *testing.T) {
	const guesses = 200
	cases := []struct {
		name string
		// validEvery: the valid caller calls after every n-th guess
		// (0: only once the guesser is done); validFirst: it also calls
		// before the first guess.
		validEvery int
		validFirst bool
		peer       string
	}{
		{"interleaved, v4", 1, true, "203.0.113.5:4000"},
		{"interleaved, v6 (same /64)", 1, true, "[2001:db8:1:2::5]:4000"},
		{"valid key arrives during the attack", 10, false, "203.0.113.5:4000"},
		{"valid key arrives after the attack", 0, false, "203.0.113.5:4000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newGuardRig(t, "")
			var valid, valid429, guess401, guess429 int
			validCall := func() {
				// In a synctest bubble time moves only when every goroutine
				// waits on it: a served request that took fake time was
				// delayed.
				synctest.Test(t, func(t *testing.T) {
					start := time.Now()
					rec := g.call(c.peer, validSecret)
					valid++
					if rec.Code == http.StatusTooManyRequests {
						valid429++
					}
					if rec.Code != http.StatusOK {
						t.Errorf("valid key: status %d: %s", rec.Code, rec.Body)
					}
					if d := time.Since(start); d != 0 {
						t.Errorf("valid key delayed by %v", d)
					}
				})
			}
			if c.validFirst {
				validCall()
			}
			for i := range guesses {
				rec := g.call(c.peer, fmt.Sprintf("guess-%d", i))
				switch rec.Code {
				case http.StatusUnauthorized:
					guess401++
				case http.StatusTooManyRequests:
					guess429++
					if rec.Header().Get("Retry-After") == "" {
						t.Errorf("guess %d: 429 without Retry-After", i)
					}
				default:
					t.Fatalf("guess %d: status %d", i, rec.Code)
				}
				if c.validEvery > 0 && i%c.validEvery == 0 {
					validCall()
				}
			}
			validCall()
			if valid429 != 0 {
				t.Errorf("valid caller refused %d times out of %d", valid429, valid)
			}
			// Guesses are still throttled: only the burst is answered 401
			// (the fake clock does not move).
			if guess401 != guardBurst || guess429 != guesses-guardBurst {
				t.Errorf("guesses: %d answered 401, %d answered 429; want %d and %d", guess401, guess429, guardBurst, guesses-guardBurst)
			}
			// The bucket refills with time: one more guess is answered.
			g.clk.Advance(time.Second)
			if rec := g.call(c.peer, "guess-after-refill"); rec.Code != http.StatusUnauthorized {
				t.Errorf("after refill: status %d, want 401", rec.Code)
			}
			if rec := g.call(c.peer, "guess-after-refill-2"); rec.Code != http.StatusTooManyRequests {
				t.Errorf("second after refill: status %d, want 429", rec.Code)
			}
		})
	}
}

// TestGuessGuardCounts: only a presented token that fails counts; a
// request without a token (an OAuth client discovering the server) keeps
// getting its challenge on a throttled address, and other addresses keep
// their own bucket.
func TestGuessGuardCounts(t *testing.T) {
	g := newGuardRig(t, "")
	const a, b = "203.0.113.5:1", "203.0.113.6:1"
	for i := range 3 * guardBurst {
		if rec := g.call(a, ""); rec.Code != http.StatusUnauthorized {
			t.Fatalf("no token %d: status %d", i, rec.Code)
		}
		if rec := g.call(a, validSecret); rec.Code != http.StatusOK {
			t.Fatalf("valid %d: status %d", i, rec.Code)
		}
	}
	for i := range guardBurst {
		if rec := g.call(a, "bad"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("guess %d within the burst: status %d", i, rec.Code)
		}
	}
	if rec := g.call(a, "bad"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("guess past the burst: status %d", rec.Code)
	}
	rec := g.call(a, "")
	if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("no token on a throttled address: status %d, challenge %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
	if rec := g.call(b, "bad"); rec.Code != http.StatusUnauthorized {
		t.Errorf("guess from another address: status %d", rec.Code)
	}
}

// TestGuessGuardAddress: the address the guard throttles is the peer,
// whatever X-Forwarded-For or Forwarded say, unless the peer is a
// trusted proxy; then it is the client the proxy names.
func TestGuessGuardAddress(t *testing.T) {
	cases := []struct {
		name    string
		proxies string
		// guess returns the peer and headers of the guesser's i-th request.
		guess func(i int) (string, []string)
		// probe is one more failing request once the guesser is throttled.
		probePeer    string
		probeHeaders []string
		wantProbe    int
	}{
		{
			name:    "untrusted peer rotating X-Forwarded-For is still throttled",
			proxies: "",
			guess: func(i int) (string, []string) {
				return "203.0.113.5:1", []string{fmt.Sprintf("X-Forwarded-For: 198.51.100.%d", i)}
			},
			probePeer: "203.0.113.5:2", probeHeaders: []string{"X-Forwarded-For: 198.51.100.250"}, wantProbe: http.StatusTooManyRequests,
		},
		{
			name:    "untrusted peer rotating Forwarded is still throttled",
			proxies: "10.0.0.0/8",
			guess: func(i int) (string, []string) {
				return "203.0.113.5:1", []string{fmt.Sprintf(`Forwarded: for="[2001:db8:%x::1]:80"`, i)}
			},
			probePeer: "203.0.113.5:2", wantProbe: http.StatusTooManyRequests,
		},
		{
			name:    "untrusted peer naming a victim does not throttle the victim",
			proxies: "10.0.0.0/8",
			guess: func(int) (string, []string) {
				return "203.0.113.5:1", []string{"X-Forwarded-For: 192.0.2.10", "Forwarded: for=192.0.2.10"}
			},
			probePeer: "192.0.2.10:1", wantProbe: http.StatusUnauthorized,
		},
		{
			name:    "no trusted proxies: clients behind a proxy share its address",
			proxies: "",
			guess: func(int) (string, []string) {
				return "10.0.0.1:1", []string{"X-Forwarded-For: 192.0.2.10"}
			},
			probePeer: "10.0.0.1:2", probeHeaders: []string{"X-Forwarded-For: 192.0.2.11"}, wantProbe: http.StatusTooManyRequests,
		},
		{
			name:    "trusted proxy: the client it names is throttled",
			proxies: "10.0.0.0/8",
			guess: func(int) (string, []string) {
				return "10.0.0.1:1", []string{"X-Forwarded-For: 6.6.6.6, 192.0.2.10"}
			},
			probePeer: "10.0.0.2:1", probeHeaders: []string{"X-Forwarded-For: 192.0.2.10"}, wantProbe: http.StatusTooManyRequests,
		},
		{
			name:    "trusted proxy: another client behind it keeps its own bucket",
			proxies: "10.0.0.0/8",
			guess: func(int) (string, []string) {
				return "10.0.0.1:1", []string{"X-Forwarded-For: 192.0.2.10"}
			},
			probePeer: "10.0.0.1:1", probeHeaders: []string{"X-Forwarded-For: 192.0.2.11"}, wantProbe: http.StatusUnauthorized,
		},
		{
			name:    "trusted proxy (Forwarded, IPv6): same /64 throttled",
			proxies: "10.0.0.1",
			guess: func(i int) (string, []string) {
				return "10.0.0.1:1", []string{fmt.Sprintf(`Forwarded: for="[2001:db8:1:2::%x]:443";proto=https`, i+1)}
			},
			probePeer: "10.0.0.1:1", probeHeaders: []string{"Forwarded: for=2001:db8:1:2::ffff"}, wantProbe: http.StatusTooManyRequests,
		},
		{
			name:    "trusted proxy (Forwarded, IPv6): another /64 keeps its bucket",
			proxies: "10.0.0.1",
			guess: func(i int) (string, []string) {
				return "10.0.0.1:1", []string{fmt.Sprintf(`Forwarded: for="[2001:db8:1:2::%x]:443"`, i+1)}
			},
			probePeer: "10.0.0.1:1", probeHeaders: []string{`Forwarded: for="[2001:db8:1:3::1]"`}, wantProbe: http.StatusUnauthorized,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newGuardRig(t, c.proxies)
			answered := 0
			for i := range 4 * guardBurst {
				peer, h := c.guess(i)
				switch rec := g.call(peer, "bad", h...); rec.Code {
				case http.StatusUnauthorized:
					answered++
				case http.StatusTooManyRequests:
				default:
					t.Fatalf("guess %d: status %d", i, rec.Code)
				}
				// The valid key on the guesser's own address is never refused.
				if rec := g.call(peer, validSecret, h...); rec.Code != http.StatusOK {
					t.Fatalf("valid key beside guess %d: status %d", i, rec.Code)
				}
			}
			if answered != guardBurst {
				t.Errorf("%d guesses answered 401, want %d (the rest throttled)", answered, guardBurst)
			}
			if rec := g.call(c.probePeer, "bad", c.probeHeaders...); rec.Code != c.wantProbe {
				t.Errorf("probe from %s %v: status %d, want %d", c.probePeer, c.probeHeaders, rec.Code, c.wantProbe)
			}
		})
	}
}
