package fal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestWatch holds fal's status stream: to the end, the result read once
// and every earlier status handed on; a stream that stalls, drops or
// cannot be opened is an error the runner polls after, and none of them
// makes a second request at fal.
func TestWatch(t *testing.T) {
	for _, tt := range []struct {
		name       string
		fault      emulator.Fault // on the stream
		prompt     string
		want       provider.State // "" : an error
		wantErr    error
		progressed bool // statuses before the end reached progress
		results    int  // GET response_url
	}{
		{name: "to the end", prompt: "a heron [run=3s]", want: provider.StateCompleted, progressed: true, results: 1},
		{name: "fails at fal", prompt: "a heron [fail] [run=2s]", want: provider.StateFailed, progressed: true, results: 1},
		{name: "stalls", fault: emulator.FaultSlow, prompt: "a heron [run=3s]", wantErr: provider.ErrStreamStalled},
		{name: "drops", prompt: "a heron [drop-stream] [run=3s]", wantErr: provider.ErrStreamEnded, progressed: true},
		{name: "refused", fault: emulator.Fault500, prompt: "a heron [run=3s]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			em, p := setup(t, emulator.Options{}, func(c *fal.Config) { c.StreamStall = 100 * time.Millisecond })
			ctx := context.Background()
			job, err := p.Submit(ctx, req(t, p, "fal-flux-dev", "gen-w", tt.prompt))
			if err != nil {
				t.Fatal(err)
			}
			if tt.fault != "" {
				em.Inject(emulator.Rule{Provider: "fal", Op: emulator.OpStream, Fault: tt.fault, Times: 1})
			}
			type outcome struct {
				st  provider.Status
				err error
			}
			done := make(chan outcome, 1)
			seen := make(chan provider.Status, 64)
			go func() {
				st, err := p.Watch(ctx, job, func(st provider.Status) { seen <- st })
				done <- outcome{st, err}
			}()
			progressed := false
			var out outcome
		loop:
			for {
				select {
				case <-seen:
					progressed = true
					em.Advance(time.Second) // the next change
				case out = <-done:
					// A status handed on just before the end may still
					// wait in seen: select picks among ready cases at
					// random, so look once more.
					progressed = progressed || len(seen) > 0
					break loop
				}
			}
			if tt.want == "" {
				if out.err == nil {
					t.Fatalf("no error: %+v", out.st)
				}
				if tt.wantErr != nil && !errors.Is(out.err, tt.wantErr) {
					t.Fatalf("error %v, want %v", out.err, tt.wantErr)
				}
			} else if out.err != nil || out.st.State != tt.want {
				t.Fatalf("watch: %+v %v, want %s", out.st, out.err, tt.want)
			}
			if tt.want == provider.StateCompleted && len(out.st.Outputs) != 1 {
				t.Fatalf("outputs %+v", out.st.Outputs)
			}
			if progressed != tt.progressed {
				t.Fatalf("progress handed on: %v, want %v", progressed, tt.progressed)
			}
			if n := em.Count("fal", emulator.OpStream); n != 1 {
				t.Fatalf("%d streams, want 1", n)
			}
			if n, m := em.Count("fal", emulator.OpResult), em.Count("fal", emulator.OpStatus); n != tt.results || m != 0 {
				t.Fatalf("%d results and %d status calls, want %d and 0", n, m, tt.results)
			}
			if n := em.Jobs("fal"); n != 1 {
				t.Fatalf("%d requests at fal", n)
			}
		})
	}
}

// TestWatchEndsWithItsContext: a watch whose context ends (the runner's
// lease lost, a cancel asked, a drain) returns at once with its error.
func TestWatchEndsWithItsContext(t *testing.T) {
	em, p := setup(t, emulator.Options{}, nil)
	job, err := p.Submit(context.Background(), req(t, p, "fal-flux-dev", "gen-c", "a heron [run=30s]"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Watch(ctx, job, func(provider.Status) { cancel() })
		done <- err
	}()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v, want context.Canceled", err)
	}
	_ = em
}

func TestSignal(t *testing.T) {
	_, p := setup(t, emulator.Options{}, nil)
	m := model(t, p, "fal-kling-1.6")
	for _, tt := range []struct {
		webhook bool
		want    provider.Signal
	}{{false, provider.SignalStream}, {true, provider.SignalWebhook}} {
		if got := provider.SignalOf(p, m, tt.webhook); got != tt.want {
			t.Errorf("webhook %v: %s, want %s", tt.webhook, got, tt.want)
		}
	}
}
