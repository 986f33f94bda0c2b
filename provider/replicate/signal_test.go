package replicate_test

import (
	"context"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestSubmitWait: a create held by Prefer: wait answers with the
// prediction's end when it ends within the wait (one request in all),
// else with its current state; either way one prediction exists.
func TestSubmitWait(t *testing.T) {
	for _, tt := range []struct {
		name    string
		prompt  string
		wait    time.Duration
		advance time.Duration // the clock, once the create is held
		want    provider.State
	}{
		{"ends within the wait", "a fox [run=3s]", 10 * time.Second, 3 * time.Second, provider.StateCompleted},
		{"fails within the wait", "a fox [fail] [run=2s]", 10 * time.Second, 2 * time.Second, provider.StateFailed},
		{"the wait runs out", "a fox [run=40s]", 5 * time.Second, 5 * time.Second, provider.StateRunning},
		{"over the most, held 60 s", "a fox [run=59s]", 5 * time.Minute, 59 * time.Second, provider.StateCompleted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			em, p := setup(t, emulator.Options{}, nil)
			type outcome struct {
				job provider.Job
				st  provider.Status
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				job, st, err := p.SubmitWait(context.Background(), req(t, p, "replicate-flux-dev", "gen-w", tt.prompt), tt.wait)
				done <- outcome{job, st, err}
			}()
			for em.Jobs("replicate") == 0 {
				select {
				case o := <-done:
					t.Fatalf("answered before the prediction existed: %+v", o)
				default:
					em.Advance(0)
				}
			}
			em.Advance(tt.advance)
			o := <-done
			if o.err != nil || o.job.ID == "" || o.st.State != tt.want {
				t.Fatalf("SubmitWait: %+v %+v %v, want %s", o.job, o.st, o.err, tt.want)
			}
			if tt.want == provider.StateCompleted && len(o.st.Outputs) != 1 {
				t.Fatalf("outputs %+v", o.st.Outputs)
			}
			if c, s := em.Count("replicate", emulator.OpCreate), em.Count("replicate", emulator.OpStatus); c != 1 || s != 0 {
				t.Fatalf("%d creates and %d gets, want 1 and 0", c, s)
			}
		})
	}
}

func TestSignal(t *testing.T) {
	_, p := setup(t, emulator.Options{}, nil)
	for _, tt := range []struct {
		model   string
		webhook bool
		want    provider.Signal
	}{
		{"replicate-flux-dev", false, provider.SignalWaitOnCreate},
		{"replicate-kling-1.6", false, provider.SignalPoll},
		{"replicate-flux-dev", true, provider.SignalWebhook},
		{"replicate-kling-1.6", true, provider.SignalWebhook},
	} {
		if got := provider.SignalOf(p, model(t, p, tt.model), tt.webhook); got != tt.want {
			t.Errorf("%s, webhook %v: %s, want %s", tt.model, tt.webhook, got, tt.want)
		}
	}
}
