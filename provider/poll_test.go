package provider_test

import (
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

func TestNextPoll(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name                 string
		expected, since      time.Duration
		checks               int
		progressed, webhooks bool
		want                 time.Duration
	}{
		{"video: first check at half the expected time", 180 * s, 0, 1, false, false, 90 * s},
		{"video: early progress does not hurry it", 180 * s, 10 * s, 2, true, false, 80 * s},
		{"video: backoff base", 180 * s, 90 * s, 2, false, false, 30 * s},
		{"video: capped at 30 s", 180 * s, 150 * s, 6, false, false, 30 * s},
		{"image: base", 2 * s, 1 * s, 2, false, false, 333333333},
		{"image: doubling", 2 * s, 2 * s, 3, false, false, 666666666},
		{"image: capped at 5 s", 2 * s, 30 * s, 12, false, false, 5 * s},
		{"image: progress resets", 2 * s, 30 * s, 12, true, false, 333333333},
		{"unknown expected", 0, 0, 1, false, false, 5 * s},
		{"webhooks: slow safety poll", 180 * s, 0, 1, false, true, 6 * time.Minute},
		{"webhooks: at least 2 min", 2 * s, 0, 1, false, true, 2 * time.Minute},
		{"webhooks: at most 10 min", time.Hour, 0, 1, false, true, 10 * time.Minute},
	}
	for _, tc := range tests {
		if got := provider.NextPoll(tc.expected, tc.since, tc.checks, tc.progressed, tc.webhooks, nil); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	for range 1000 {
		d := provider.Jitter(0.1)(10 * s)
		if d < 9*s || d > 11*s {
			t.Fatalf("jitter %v", d)
		}
	}
}

// simulate counts status checks for a job that completes after total,
// reporting progress on every check while running, as the runner would:
// one look right after submit, then NextPoll.
func simulate(expected, total time.Duration, webhooks bool, jitter func(time.Duration) time.Duration) int {
	now, checks, lastProg := time.Duration(0), 0, -1.0
	for {
		checks++ // a status check at now
		if now >= total {
			return checks
		}
		prog := float64(now) / float64(total)
		progressed := lastProg >= 0 && prog > lastProg
		lastProg = prog
		next := provider.NextPoll(expected, now, checks, progressed, webhooks, jitter)
		if webhooks && now+next >= total {
			return checks + 1 // the completion webhook wakes one re-check
		}
		now += next
	}
}

func TestPollBudget3MinVideo(t *testing.T) {
	for range 2000 {
		if n := simulate(3*time.Minute, 3*time.Minute, false, provider.Jitter(0.1)); n > 8 {
			t.Fatalf("polling: %d checks", n)
		}
		if n := simulate(3*time.Minute, 3*time.Minute, true, provider.Jitter(0.1)); n > 2 {
			t.Fatalf("webhooks: %d checks", n)
		}
	}
	// A job twice as slow as expected stays at the 30 s cap.
	if n := simulate(3*time.Minute, 6*time.Minute, false, nil); n > 16 {
		t.Fatalf("slow job: %d checks", n)
	}
}

func BenchmarkPoll3MinVideo(b *testing.B) {
	for _, c := range []struct {
		name     string
		webhooks bool
	}{{"adaptive", false}, {"webhooks", true}} {
		b.Run(c.name, func(b *testing.B) {
			total := 0
			for b.Loop() {
				total += simulate(3*time.Minute, 3*time.Minute, c.webhooks, provider.Jitter(0.1))
			}
			perGen := float64(total) / float64(b.N)
			b.ReportMetric(perGen, "status-calls/gen")
			// Polling once a second would make 180 calls: the share of that.
			b.ReportMetric(perGen/180, "ratio_vs_1s_polling")
		})
	}
}

func TestNextPollElapsed(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name                     string
		expected, since, running time.Duration
		progress                 float64
		webhooks                 bool
		want                     time.Duration
	}{
		{"video: first check at half the expected time", 180 * s, 0, 0, 0, false, 90 * s},
		{"video: a tenth of the time since submit", 180 * s, 100 * s, 0, 0, false, 10 * s},
		{"video: capped by PollCap", 240 * s, 400 * s, 0, 0, false, 30 * s},
		{"image: at least 1 s", 8 * s, 4 * s, 0, 0, false, 1 * s},
		{"image: a tenth once long", 8 * s, 20 * s, 0, 0, false, 2 * s},
		{"progress predicts an end sooner", 180 * s, 100 * s, 0, 0.95, false, 5263157894},
		{"progress predicts it later: the tenth holds", 180 * s, 100 * s, 0, 0.5, false, 10 * s},
		{"progress near the end: still 1 s apart", 180 * s, 100 * s, 0, 0.999, false, 1 * s},
		{"webhooks: slow safety poll", 180 * s, 0, 0, 0, true, 6 * time.Minute},
		// Replicate's started_at: queued 90 s, running 85 s of 90 expected.
		{"started: the look lands on the predicted end", 90 * s, 175 * s, 85 * s, 0, false, 5 * s},
		{"started, past the predicted end: a tenth of the running time", 90 * s, 200 * s, 110 * s, 0, false, 11 * s},
		{"started, progress: predicted from the running time", 180 * s, 200 * s, 100 * s, 0.95, false, 5263157894},
		{"started lately: the tenth since submit holds (its end is far)", 180 * s, 100 * s, 20 * s, 0, false, 10 * s},
	} {
		if got := provider.NextPollElapsed(tc.expected, tc.since, tc.running, tc.progress, tc.webhooks, nil); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestNextPollElapsedLag: for jobs ending between half and twice their
// expected duration, the elapsed-relative schedule sees the end within
// about a tenth of the job's length (at least 1 s, at most the cap), where
// NextPoll's could take up to its 30 s cap; the checks it costs are
// counted beside.
func TestNextPollElapsedLag(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		expected, total time.Duration
		maxChecks       int
	}{
		{180 * s, 90 * s, 3},
		{180 * s, 180 * s, 10},
		{180 * s, 360 * s, 18},
		{8 * s, 4 * s, 3},
		{8 * s, 20 * s, 16},
	} {
		now, checks := time.Duration(0), 0
		for {
			checks++
			if now >= tc.total {
				break
			}
			now += provider.NextPollElapsed(tc.expected, now, 0, 0, false, nil)
		}
		lag := now - tc.total
		bound := max(tc.total/10+tc.total/100, provider.ElapsedPollMin)
		if lag > bound || checks > tc.maxChecks {
			t.Errorf("expected %v, ends at %v: seen %v late (bound %v) after %d checks (at most %d)", tc.expected, tc.total, lag, bound, checks, tc.maxChecks)
		}
	}
}
