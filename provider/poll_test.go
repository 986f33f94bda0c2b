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
