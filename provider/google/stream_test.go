package google_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/google"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestGoogleWatch holds a Gemini Omni interaction's event stream
// (Watcher) on the emulator's clock: to its end (then one get reads the
// video), a late failure, a dropped stream, a stalled one, a cancel of
// the caller's context; a stream never makes an interaction.
func TestGoogleWatch(t *testing.T) {
	cases := []struct {
		name, prompt string
		slow         bool // the stream's request is held with no bytes
		cancel       bool
		want         provider.State
		wantErr      error
		wantMsg      string
	}{
		{name: "to the end", prompt: "a lighthouse at dusk", want: provider.StateCompleted},
		{name: "late failure", prompt: "a storm [fail]", want: provider.StateFailed, wantMsg: "Gemini failed: Video generation failed"},
		{name: "dropped", prompt: "a ferry [drop-stream]", wantErr: provider.ErrStreamEnded},
		{name: "stalled", prompt: "a quiet ferry", slow: true, wantErr: provider.ErrStreamStalled},
		{name: "cancelled by the caller", prompt: "a long take", cancel: true, wantErr: context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRigWith(t, func(cfg *google.Config) { cfg.StreamStall = 200 * time.Millisecond })
			m := r.model(t, "google-omni-1.2-flash")
			if s := r.p.Signal(m, true); s != provider.SignalStream {
				t.Fatalf("signal %s, want stream", s)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			job, err := r.p.Submit(ctx, provider.Request{IdempotencyKey: "gen-" + c.name, Model: m, Prompt: c.prompt, AspectRatio: "16:9", DurationSeconds: 8})
			if err != nil {
				t.Fatal(err)
			}
			if c.slow {
				r.em.Inject(emulator.Rule{Provider: "google", Op: emulator.OpStream, Fault: emulator.FaultSlow, Times: 1})
			}
			type result struct {
				st  provider.Status
				err error
			}
			done := make(chan result, 1)
			var seen []provider.State
			go func() {
				st, err := r.p.Watch(ctx, job, func(st provider.Status) { seen = append(seen, st.State) })
				done <- result{st, err}
			}()
			var res result
		loop:
			for {
				select {
				case res = <-done:
					break loop
				case <-time.After(20 * time.Millisecond):
					if c.cancel && r.em.Count("google", emulator.OpStream) > 0 {
						cancel()
					} else if !c.slow && !c.cancel {
						r.em.Advance(5 * time.Second) // the job runs 1 s queued, 40 s
					}
				}
			}
			if c.wantErr != nil {
				if !errors.Is(res.err, c.wantErr) {
					t.Fatalf("Watch: %+v %v, want %v", res.st, res.err, c.wantErr)
				}
			} else {
				if res.err != nil || res.st.State != c.want || !strings.Contains(res.st.Error, c.wantMsg) {
					t.Fatalf("Watch: %+v %v, want %s %q", res.st, res.err, c.want, c.wantMsg)
				}
				if len(seen) == 0 || seen[0] != provider.StateQueued || seen[len(seen)-1] != provider.StateRunning {
					t.Fatalf("progress saw %v, want queued then running", seen)
				}
				// One stream, then one get for the outputs.
				if s, g := r.em.Count("google", emulator.OpStream), r.em.Count("google", emulator.OpStatus); s != 1 || g != 1 {
					t.Fatalf("%d streams and %d gets, want 1 and 1", s, g)
				}
			}
			if res.st.State == provider.StateCompleted {
				if b := read(t, r.p, job, res.st.Outputs[0]); !bytes.Equal(b, emulator.MP4()) {
					t.Fatalf("video: %d bytes", len(b))
				}
			}
			if n := r.em.Jobs("google"); n != 1 {
				t.Fatalf("%d interactions", n)
			}
		})
	}
}
