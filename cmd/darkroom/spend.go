package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// spendCheck is one provider's part of `models check --spend-cents`: its
// cheapest curated model run once, end to end, with this server's key.
type spendCheck struct {
	Provider string `json:"provider"`
	ModelID  string `json:"modelId,omitempty"`
	// Cents is darkroom's price of the run (its credits at
	// DARKROOM_CREDITS_PER_USD): the vendor's own charge is not in any of
	// their replies, so this is what the run is expected to cost.
	Cents float64 `json:"cents"`
	// State: "completed", "failed: ...", or "skipped: ..." (over the
	// budget left, or no curated model).
	State   string  `json:"state"`
	Seconds float64 `json:"seconds,omitempty"` // submit to the output read
	Bytes   int64   `json:"bytes,omitempty"`   // of the outputs read
}

// spendTimeout bounds one provider's run.
const spendTimeout = 5 * time.Minute

// checkSpend runs each provider's cheapest curated image model once
// (video when it has none) while the budget lasts: the one check that
// proves a key end to end. Opt-in, and never run by CI against a vendor.
func checkSpend(ctx context.Context, budgetCents int, creditsPerUSD float64, providers []provider.Provider) []spendCheck {
	left := float64(budgetCents)
	var out []spendCheck
	for _, p := range providers {
		sc := spendCheck{Provider: p.Name()}
		models := slices.Clone(p.Models())
		video := func(m provider.Model) bool { return m.Kind != provider.KindImage }
		slices.SortStableFunc(models, func(a, b provider.Model) int {
			return cmp.Or(cmp.Compare(b2i(video(a)), b2i(video(b))), cmp.Compare(a.Credits, b.Credits)) // images first, cheapest first
		})
		models = slices.DeleteFunc(models, func(m provider.Model) bool { return m.NeedsInputImage })
		switch {
		case len(models) == 0:
			sc.State = "skipped: no model runs without an input image"
		default:
			m := models[0]
			sc.ModelID, sc.Cents = m.ID, math.Ceil(float64(m.Credits)*100/creditsPerUSD)
			if sc.Cents > left {
				sc.State = fmt.Sprintf("skipped: %.0f cents, over the %.0f left of the budget", sc.Cents, left)
				break
			}
			left -= sc.Cents
			sc.State, sc.Seconds, sc.Bytes = spendOnce(ctx, p, m)
		}
		out = append(out, sc)
	}
	return out
}

// spendOnce submits one small request for m and follows it to its end,
// reading every output.
func spendOnce(ctx context.Context, p provider.Provider, m provider.Model) (state string, seconds float64, n int64) {
	ctx, cancel := context.WithTimeout(ctx, spendTimeout)
	defer cancel()
	start := time.Now()
	req := provider.Request{IdempotencyKey: fmt.Sprintf("models-check-%d", start.UnixNano()), Model: m, Prompt: "a small red circle on a white background"}
	if len(m.AspectRatios) > 0 {
		req.AspectRatio = m.AspectRatios[0]
	}
	if len(m.Durations) > 0 {
		req.DurationSeconds = m.Durations[0]
	}
	job, err := p.Submit(ctx, req)
	for try := 0; err != nil && errors.Is(err, provider.ErrNotCreated) && try < 3; try++ {
		job, err = p.Submit(ctx, req) // surely no job was made: throttled or refused before it
	}
	if err != nil {
		return "failed: " + err.Error(), time.Since(start).Seconds(), 0
	}
	var st provider.Status
	for checks := 0; ; checks++ {
		if st, err = p.Status(ctx, job); err == nil && st.State.Terminal() {
			break
		}
		wait := provider.NextPoll(m.ExpectedDuration, time.Since(start), checks, false, false, nil)
		select {
		case <-ctx.Done():
			_, _ = p.Cancel(context.WithoutCancel(ctx), job)
			return "failed: no result within " + spendTimeout.String() + "; cancelled", time.Since(start).Seconds(), 0
		case <-time.After(wait):
		}
	}
	if st.State != provider.StateCompleted {
		return fmt.Sprintf("failed: %s %s", st.State, st.Error), time.Since(start).Seconds(), 0
	}
	for _, o := range st.Outputs {
		rc, err := p.OpenOutput(ctx, job, o)
		if err != nil {
			return "failed: output: " + err.Error(), time.Since(start).Seconds(), n
		}
		k, err := io.Copy(io.Discard, rc)
		rc.Close()
		n += k
		if err != nil {
			return "failed: output: " + err.Error(), time.Since(start).Seconds(), n
		}
	}
	return "completed", time.Since(start).Seconds(), n
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
