package main

// Three replicas on one PostgreSQL, no public URL (issue 39 §3): only the
// replica holding a generation's lease holds its fal stream or its
// Replicate create; a cancel asked on another replica reaches the held
// call at once (the ask's NOTIFY wakes the holder's watch, signal.go); a
// replica killed while it holds one hands the job to another, which
// resumes it with exactly one provider job.

import (
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// signalReplicas starts three replicas of one deployment against rig,
// without webhooks, each listening for the others' changes.
func signalReplicas(t *testing.T, rig *emuRig) []*testServer {
	t.Helper()
	shared := sharedDatabase(t)
	rs := make([]*testServer, 3)
	for i := range rs {
		// No resync while the test runs: what reaches another replica
		// comes by NOTIFY.
		rs[i] = signalServer(t, rig, shared, func(c *config) { c.listenResync = time.Hour })
	}
	for _, r := range rs {
		listening(t, r, 0)
	}
	return rs
}

// holder waits until exactly one replica holds a call of prov and returns
// its index; no other replica ever holds one meanwhile.
func holder(t *testing.T, rs []*testServer, prov string) int {
	t.Helper()
	at := -1
	eventually(t, 10*time.Second, func() bool {
		n := 0
		for i, r := range rs {
			if h := r.app.runner.Held(prov); h > 0 {
				n += h
				at = i
			}
		}
		if n > 1 {
			t.Fatalf("%d calls of %s held across the replicas, want 1", n, prov)
		}
		return n == 1
	}, "one replica to hold the "+prov+" call")
	return at
}

// generateID starts a generation through tc's generate tool and returns
// its id.
func generateID(t *testing.T, tc *rpcClient, model, prompt string) string {
	t.Helper()
	r := tc.tool("generate", map[string]any{"modelId": model, "prompt": prompt})
	sc, _ := r.Result["structuredContent"].(map[string]any)
	id, _ := sc["generationId"].(string)
	if id == "" {
		t.Fatalf("generate: %+v %v", r.Error, r.Result)
	}
	return id
}

// signalModels: a model each of the providers with a signal of their own.
var signalModels = []struct{ prov, model string }{
	{"fal", "fal-flux-dev"},
	{"replicate", "replicate-flux-dev"},
}

// held is the emulator's count of prov's held calls: fal's streams,
// Replicate's creates (each held with Prefer: wait).
func held(rig *emuRig, prov string) int {
	if prov == "fal" {
		return rig.Count("fal", emulator.OpStream)
	}
	return rig.Count("replicate", emulator.OpCreate)
}

// TestSignalReplicas: (a) a job submitted through one replica is held by
// exactly one replica, once, and completes; (b) a cancel asked on a
// replica that does not hold the call ends the held call promptly: the
// provider job is cancelled exactly once and the credits are refunded.
func TestSignalReplicas(t *testing.T) {
	for _, sm := range signalModels {
		t.Run(sm.prov, func(t *testing.T) {
			rig := startEmulator(t, defaultTiming)
			rs := signalReplicas(t, rig)
			tc := &rpcClient{t: t, url: rs[0].url, caps: map[string]any{}}

			t.Run("one holder", func(t *testing.T) {
				id := generateID(t, tc, sm.model, "a heron [run=2s]")
				holder(t, rs, sm.prov)
				waitRow(t, rs[0], id, "completed", func(row generation.Row) bool { return row.Status == generation.StatusCompleted })
				if n, h := rig.Jobs(sm.prov), held(rig, sm.prov); n != 1 || h != 1 {
					t.Fatalf("%d jobs and %d held calls at %s, want 1 and 1", n, h, sm.prov)
				}
			})

			t.Run("cancel on another replica", func(t *testing.T) {
				jobs, calls := rig.Jobs(sm.prov), held(rig, sm.prov)
				id := generateID(t, tc, sm.model, "a long heron [run=10m]")
				h := holder(t, rs, sm.prov)
				eventually(t, 10*time.Second, func() bool { return rig.Jobs(sm.prov) > jobs }, "the provider job")
				other := rs[(h+1)%len(rs)]
				oc := &rpcClient{t: t, url: other.url, caps: map[string]any{}}
				t0 := time.Now()
				if c := oc.tool("cancel_generation", map[string]any{"generationId": id}); c.Error != nil {
					t.Fatalf("cancel: %+v", c.Error)
				}
				eventually(t, 10*time.Second, func() bool { return rig.Count(sm.prov, emulator.OpCancel) > 0 }, "the cancel at "+sm.prov)
				lag := time.Since(t0)
				row := waitRow(t, other, id, "cancelled", func(row generation.Row) bool { return row.Status == generation.StatusCancelled })
				t.Logf("cancel asked on replica %d, held on %d: at %s after %v", (h+1)%len(rs), h, sm.prov, lag)
				// The holder learns of the ask through NOTIFY (milliseconds);
				// without it, only its resync (every 2 s by default, an hour
				// here) or the lease's renewal would.
				if lag > time.Second {
					t.Errorf("the cancel reached %s %v after it was asked on another replica, want under 1 s", sm.prov, lag)
				}
				if c := rig.Count(sm.prov, emulator.OpCancel); c != 1 {
					t.Errorf("%d cancels at %s, want 1", c, sm.prov)
				}
				if n, c := rig.Jobs(sm.prov)-jobs, held(rig, sm.prov)-calls; n != 1 || c != 1 {
					t.Errorf("%d jobs and %d held calls at %s for the cancelled generation, want 1 and 1", n, c, sm.prov)
				}
				if row.Charged != 0 {
					t.Errorf("cancelled, still charged %d credits", row.Charged)
				}
				for _, r := range rs {
					if n := r.app.runner.Held(sm.prov); n != 0 {
						t.Errorf("a replica still holds %d calls", n)
					}
				}
			})
		})
	}
}

// TestSignalReplicasKill: replica A holds a job's fal stream or Replicate
// create while replicas B and C run beside it on the same PostgreSQL; A
// is killed (-9). Once A's lease expires (3 s) B or C takes the job over
// and resumes it: it completes, the provider saw exactly one job, and
// the held calls are A's and at most one more.
func TestSignalReplicasKill(t *testing.T) {
	for _, sm := range signalModels {
		t.Run(sm.prov, func(t *testing.T) {
			rig := startEmulator(t, defaultTiming)
			env := []string{"DARKROOM_DATABASE_URL=" + sharedDatabaseURL(t), "DARKROOM_RUNNER_LEASE=3s",
				"DARKROOM_UNSAFE_OUTPUT_FETCH=true", "DARKROOM_OUTPUT_HOSTS=" + rig.filesHost(),
				"DARKROOM_MODELS_FILE=" + signalCatalog(t, 2, sm.model),
				"DARKROOM_REPLICATE_API_TOKEN=", "REPLICATE_API_TOKEN=", "DARKROOM_FAL_KEY=", "FAL_KEY=",
				"DARKROOM_GEMINI_API_KEY=", "GEMINI_API_KEY=", "DARKROOM_OPENAI_API_KEY=", "OPENAI_API_KEY=",
				"DARKROOM_METRICS_ADDR=off"}
			if sm.prov == "fal" {
				env = append(env, "DARKROOM_FAL_KEY=fal_test", "DARKROOM_FAL_QUEUE_URL="+rig.Fal.URL, "DARKROOM_FAL_WEBHOOK_JWKS_URL="+rig.FalJWKSURL())
			} else {
				env = append(env, "DARKROOM_REPLICATE_API_TOKEN=r8_test", "DARKROOM_REPLICATE_BASE_URL="+rig.Replicate.URL)
			}
			// A alone first, so the holder is known: the one replica up.
			a := startProcess(t, t.TempDir(), env...)
			cs := connect(t, a.url, "2026-07-28")
			var g genView
			if res := call(t, cs, "generate", map[string]any{"modelId": sm.model, "prompt": "a ferry leaving port [run=12s]"}, &g); res.IsError {
				t.Fatalf("generate: %s", text(res))
			}
			eventually(t, 20*time.Second, func() bool { return held(rig, sm.prov) > 0 && rig.Jobs(sm.prov) > 0 }, "A to hold the call")
			b := startProcess(t, t.TempDir(), env...)
			startProcess(t, t.TempDir(), env...)
			var mid genView
			call(t, connect(t, b.url, "2026-07-28"), "get_generation", map[string]any{"generationId": g.GenerationID}, &mid)
			if mid.Status == "completed" {
				t.Fatal("completed before the kill; lengthen the run")
			}
			kill9(t, a)

			var w genView
			call(t, connect(t, b.url, "2026-07-28"), "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 60}, &w)
			if w.Status != "completed" || len(w.Outputs) != 1 {
				t.Fatalf("after the kill: %s (%s)", w.Status, w.StatusMessage)
			}
			// fal: A's stream and the taker's; Replicate: A's create only
			// (the taker finds the prediction and polls it).
			most := map[string]int{"fal": 2, "replicate": 1}[sm.prov]
			if n, h := rig.Jobs(sm.prov), held(rig, sm.prov); n != 1 || h > most {
				t.Fatalf("%d jobs and %d held calls at %s, want 1 job and at most %d held calls", n, h, sm.prov, most)
			}
		})
	}
}
