package main

// End-to-end tests of each provider's own completion signal without a
// public URL (issue 39): fal's status stream, Replicate's create held by
// Prefer: wait. The guarantees of the polled paths hold on them: a kill
// while one is held resumes with exactly one provider job, a cancel
// during a stream reaches the provider at once, a stream that stalls is
// polled, the in-flight cap and the bound on held calls hold.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// signalCatalog writes the curated entries of ids with their expected
// durations set to expected (short, so a Replicate image is submitted
// with its create held and polls come soon).
func signalCatalog(t testing.TB, expected float64, ids ...string) string {
	t.Helper()
	return writeCatalog(t, func(e *catalog.Entry) bool {
		e.ExpectedSeconds = expected
		return slices.Contains(ids, e.ID)
	})
}

// signalServer is darkroom in-process against rig's Replicate and fal,
// without webhooks.
func signalServer(t *testing.T, rig *emuRig, opts ...func(*config)) *testServer {
	t.Helper()
	models := signalCatalog(t, 2, "replicate-flux-dev", "fal-flux-dev")
	base := func(c *config) {
		c.ReplicateToken, c.ReplicateBaseURL = "r8_test", rig.Replicate.URL
		c.FalKey, c.FalQueueURL, c.FalJWKSURL = "fal_test", rig.Fal.URL, rig.FalJWKSURL()
		c.FalConcurrency = 16
		c.GeminiKey, c.OpenAIKey = "", ""
		c.UnsafeOutputFetch = true
		c.OutputHosts = []string{rig.filesHost()}
		c.ModelsFile = models
		c.PollRate, c.PollBurst = 1000, 1000
		c.CreateRate, c.CreateBurst = 1000, 1000
		c.MaxInFlight = 0
		c.Webhooks = false
	}
	return startServer(t, 0, append([]func(*config){base}, opts...)...)
}

// TestSignalPaths: each path ends as its polled twin would, with one job
// at the provider and the requests its signal promises.
func TestSignalPaths(t *testing.T) {
	for _, tt := range []struct {
		name, model, prov, prompt string
		opts                      func(*config)
		rules                     []emulator.Rule
		cancel                    bool // once the stream or create is held
		want                      string
		streams                   int // at least
		check                     func(t *testing.T, rig *emuRig)
	}{
		{name: "fal: the stream to the end", model: "fal-flux-dev", prov: "fal", prompt: "a heron [run=1s]", want: "completed", streams: 1,
			check: func(t *testing.T, rig *emuRig) {
				// submit, stream, result: no status poll.
				if s, r := rig.Count("fal", emulator.OpStatus), rig.Count("fal", emulator.OpResult); s != 0 || r != 1 {
					t.Fatalf("%d status calls and %d results, want 0 and 1", s, r)
				}
			}},
		{name: "fal: a stalled stream is polled", model: "fal-flux-dev", prov: "fal", prompt: "a heron [run=1s]", want: "completed", streams: 1,
			opts:  func(c *config) { c.falStreamStall = 100 * time.Millisecond },
			rules: []emulator.Rule{{Provider: "fal", Op: emulator.OpStream, Fault: emulator.FaultSlow, Times: 1}},
			check: func(t *testing.T, rig *emuRig) {
				if s := rig.Count("fal", emulator.OpStatus); s == 0 {
					t.Fatal("the stalled stream was not followed by a poll")
				}
			}},
		{name: "fal: a dropped stream is polled", model: "fal-flux-dev", prov: "fal", prompt: "a heron [drop-stream] [run=1s]", want: "completed", streams: 1,
			check: func(t *testing.T, rig *emuRig) {
				if s := rig.Count("fal", emulator.OpStatus); s == 0 {
					t.Fatal("the dropped stream was not followed by a poll")
				}
			}},
		{name: "fal: a cancel during the stream", model: "fal-flux-dev", prov: "fal", prompt: "a long heron [run=10m]", cancel: true, want: "cancelled", streams: 1,
			check: func(t *testing.T, rig *emuRig) {
				if c := rig.Count("fal", emulator.OpCancel); c != 1 {
					t.Fatalf("%d cancels at fal", c)
				}
			}},
		{name: "replicate: the create held to the end", model: "replicate-flux-dev", prov: "replicate", prompt: "a fox [run=1s]", want: "completed",
			check: func(t *testing.T, rig *emuRig) {
				if c, s := rig.Count("replicate", emulator.OpCreate), rig.Count("replicate", emulator.OpStatus); c != 1 || s != 0 {
					t.Fatalf("%d creates and %d gets, want 1 and 0", c, s)
				}
			}},
		{name: "replicate: a cancel during the held create", model: "replicate-flux-dev", prov: "replicate", prompt: "a long fox [run=10m]", cancel: true, want: "cancelled",
			check: func(t *testing.T, rig *emuRig) {
				if c := rig.Count("replicate", emulator.OpCancel); c != 1 {
					t.Fatalf("%d cancels at Replicate", c)
				}
			}},
		{name: "poll only: neither", model: "fal-flux-dev", prov: "fal", prompt: "a heron [run=1s]", want: "completed",
			opts: func(c *config) { c.pollOnly = true },
			check: func(t *testing.T, rig *emuRig) {
				if s := rig.Count("fal", emulator.OpStatus); s == 0 {
					t.Fatal("not polled")
				}
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rig := startEmulator(t, defaultTiming)
			opts := []func(*config){}
			if tt.opts != nil {
				opts = append(opts, tt.opts)
			}
			s := signalServer(t, rig, opts...)
			for _, r := range tt.rules {
				rig.Inject(r)
			}
			tc := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
			id := generateID(t, tc, tt.model, tt.prompt)
			if tt.cancel {
				// Held: the stream is open, or the create made its job.
				eventually(t, 10*time.Second, func() bool {
					if tt.prov == "fal" {
						return rig.Count("fal", emulator.OpStream) > 0
					}
					return rig.Jobs("replicate") > 0
				}, "the stream or create to be held")
				c := tc.tool("cancel_generation", map[string]any{"generationId": id})
				if c.Error != nil {
					t.Fatalf("cancel: %+v", c.Error)
				}
			}
			row := waitRow(t, s, id, tt.want, func(row generation.Row) bool { return row.Status == generation.Status(tt.want) })
			if n := rig.Jobs(tt.prov); n != 1 {
				t.Fatalf("%d jobs at %s, want 1 (%s)", n, tt.prov, row.StatusMessage)
			}
			if n := rig.Count(tt.prov, emulator.OpStream); n < tt.streams {
				t.Fatalf("%d streams, want at least %d", n, tt.streams)
			}
			if tt.check != nil {
				tt.check(t, rig)
			}
		})
	}
}

// TestSignalBounds: at most Held streams per provider are held (the next
// job is polled), and the owner's in-flight cap holds a generation queued
// while another's stream is held.
func TestSignalBounds(t *testing.T) {
	for _, tt := range []struct {
		name       string
		opts       func(*config)
		wantQueued bool // the second waits for the first (in-flight cap)
	}{
		{name: "one held stream", opts: func(c *config) { c.runnerHeld = 1 }},
		{name: "in-flight cap of one", opts: func(c *config) { c.MaxInFlight = 1 }, wantQueued: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rig := startEmulator(t, defaultTiming)
			s := signalServer(t, rig, tt.opts)
			tc := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
			var ids []string
			for _, p := range []string{"a heron [run=3s]", "an egret [run=3s]"} {
				ids = append(ids, generateID(t, tc, "fal-flux-dev", p))
			}
			for _, id := range ids {
				waitRow(t, s, id, "completed", func(row generation.Row) bool { return row.Status == generation.StatusCompleted })
			}
			if n := rig.Jobs("fal"); n != 2 {
				t.Fatalf("%d requests at fal, want 2", n)
			}
			streams, polls := rig.Count("fal", emulator.OpStream), rig.Count("fal", emulator.OpStatus)
			if tt.wantQueued {
				// One at a time, each streamed.
				if streams != 2 {
					t.Fatalf("%d streams, want 2 (one each, in turn)", streams)
				}
				return
			}
			// The second job found the one held call taken: it was polled
			// (and may have streamed once the first one's stream ended).
			if streams > 2 || polls == 0 {
				t.Fatalf("%d streams and %d polls: want the job beyond the one held stream polled", streams, polls)
			}
		})
	}
}

// TestSignalKillNine kills darkroom while a fal stream or a Replicate
// create is held, restarts it on the same data: the generation completes
// and the provider saw exactly one job.
func TestSignalKillNine(t *testing.T) {
	for _, tt := range []struct {
		name, model, prov, env string
	}{
		{"fal stream", "fal-flux-dev", "fal", "fal"},
		{"replicate create", "replicate-flux-dev", "replicate", "replicate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rig := startEmulator(t, defaultTiming)
			env := []string{"DARKROOM_UNSAFE_OUTPUT_FETCH=true", "DARKROOM_OUTPUT_HOSTS=" + rig.filesHost(),
				"DARKROOM_MODELS_FILE=" + signalCatalog(t, 2, "replicate-flux-dev", "fal-flux-dev"),
				"DARKROOM_REPLICATE_API_TOKEN=", "REPLICATE_API_TOKEN=", "DARKROOM_FAL_KEY=", "FAL_KEY=",
				"DARKROOM_GEMINI_API_KEY=", "GEMINI_API_KEY=", "DARKROOM_OPENAI_API_KEY=", "OPENAI_API_KEY="}
			if tt.env == "fal" {
				env = append(env, "DARKROOM_FAL_KEY=fal_test", "DARKROOM_FAL_QUEUE_URL="+rig.Fal.URL, "DARKROOM_FAL_WEBHOOK_JWKS_URL="+rig.FalJWKSURL())
			} else {
				env = append(env, "DARKROOM_REPLICATE_API_TOKEN=r8_test", "DARKROOM_REPLICATE_BASE_URL="+rig.Replicate.URL)
			}
			data := t.TempDir()
			p := startProcess(t, data, env...)
			cs := connect(t, p.url, "2026-07-28")
			var g genView
			if res := call(t, cs, "generate", map[string]any{"modelId": tt.model, "prompt": "a ferry leaving port [run=6s]"}, &g); res.IsError {
				t.Fatalf("generate: %s", text(res))
			}
			eventually(t, 20*time.Second, func() bool {
				if tt.prov == "fal" {
					return rig.Count("fal", emulator.OpStream) > 0
				}
				return rig.Jobs("replicate") > 0
			}, "the stream or create to be held")
			kill9(t, p)

			p2 := startProcess(t, data, env...)
			cs2 := connect(t, p2.url, "2026-07-28")
			var w genView
			call(t, cs2, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 60}, &w)
			if w.Status != "completed" || len(w.Outputs) != 1 {
				t.Fatalf("after restart: %+v", w)
			}
			checkFile(t, w.Outputs[0].URL, emulator.PNG())
			if n := rig.Jobs(tt.prov); n != 1 {
				t.Fatalf("%d jobs at %s, want exactly 1", n, tt.prov)
			}
			if tt.prov == "replicate" && !strings.Contains(w.StatusMessage, "completed") {
				t.Fatalf("message %q", w.StatusMessage)
			}
		})
	}
}
