package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/darkroom-mcp/darkroom/internal/ratelimited"
	"github.com/darkroom-mcp/darkroom/server/auth"
)

// TestCreateRateExactAcrossReplicas: one caller sends 50 generates at once
// (2026-07-28 with the Tasks extension: the lean path) with a create burst
// of 5 and a rate too slow to refill meanwhile. Exactly 5 are created,
// whether one SQLite server takes them or three replicas on one PostgreSQL
// behind HAProxy (round-robin, no stickiness: each replica's flood guard,
// 4x the burst, would let ~17 each through). Every refusal is today's
// create-rate answer: HTTP 429, Retry-After, JSON-RPC -31429 with
// data.retryAfterMs; a legacy generate gets the same error. Nothing is
// created for them.
func TestCreateRateExactAcrossReplicas(t *testing.T) {
	if onPostgres() {
		t.Skip("engine-independent: runs in the default pass (the fleet case on PostgreSQL)")
	}
	keys, err := auth.ParseKeyList("rater=secret-rate-0001", "test")
	if err != nil {
		t.Fatal(err)
	}
	owner := keys[0].Principal().ID
	limits := func(c *config) {
		c.Auth = auth.Config{Keys: keys}
		c.CreateRate, c.CreateBurst = 0.001, 5
	}
	for _, tc := range []struct {
		name     string
		replicas int
	}{
		{"sqlite one server", 1}, // (no commas: the name is in HAProxy's socket path)
		{"postgres 3 replicas behind haproxy", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var servers []*testServer
			base := ""
			if tc.replicas == 1 {
				servers = append(servers, startServer(t, 0, limits))
				base = servers[0].url
			} else {
				shared := sharedDatabase(t)
				var backends []string
				for range tc.replicas {
					s := startServer(t, 0, shared, limits)
					servers = append(servers, s)
					backends = append(backends, strings.TrimPrefix(s.url, "http://"))
				}
				base, _ = startHAProxy(t, backends...)
			}
			const n = 50
			type answer struct {
				status     int
				retryAfter string
				body       []byte
				err        error
			}
			answers := make([]answer, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(genModern(i+1, modernCaps)))
					for k, v := range modernHeaders("tools/call", "generate") {
						req.Header.Set(k, v)
					}
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("Authorization", "Bearer secret-rate-0001")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						answers[i].err = err
						return
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					answers[i] = answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: b}
				})
			}
			close(start)
			wg.Wait()
			accepted := 0
			for i, a := range answers {
				if a.err != nil {
					t.Fatalf("request %d: %v", i, a.err)
				}
				var env struct {
					Result struct {
						ResultType string `json:"resultType"`
					} `json:"result"`
					Error *struct {
						Code    int64 `json:"code"`
						Message string
						Data    ratelimited.ErrorData
					} `json:"error"`
				}
				_ = json.Unmarshal(a.body, &env)
				switch {
				case a.status == 200 && env.Result.ResultType == "task":
					accepted++
				case a.status == 429 && env.Error != nil && env.Error.Code == ratelimited.Code && env.Error.Data.RetryAfterMs > 0 &&
					strings.HasPrefix(env.Error.Message, "rate limit exceeded: retry after ") && retryAfterSecs(a.retryAfter) >= 1:
				default:
					t.Fatalf("request %d: HTTP %d Retry-After %q %s; want a task or today's create-rate refusal", i, a.status, a.retryAfter, a.body)
				}
			}
			// A legacy generate: go-sdk answers the transaction's refusal with
			// the same error in a 200 (or the flood guard, once spent, a 429).
			status, body := postAs(t, base, "secret-rate-0001", rawPost{body: genLegacy(99)})
			if (status != 200 && status != 429) || !strings.Contains(string(body), fmt.Sprint(ratelimited.Code)) || !strings.Contains(string(body), "retryAfterMs") {
				t.Fatalf("legacy generate over the rate: HTTP %d %s", status, body)
			}
			gens, _, err := servers[0].app.svc.List(context.Background(), owner, "", "", 100)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d concurrent creates, burst 5: %d accepted, %d generations", n, accepted, len(gens))
			if accepted != 5 || len(gens) != 5 {
				t.Fatalf("%d accepted, %d generations; want exactly 5", accepted, len(gens))
			}
		})
	}
}

func retryAfterSecs(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return n
}
