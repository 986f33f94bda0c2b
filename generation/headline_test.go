package generation

import "testing"

// TestHeadline: the line a person reads of a live generation names no id,
// says no word twice and shows one percentage, floored (never 100% while
// running), whatever the provider's message says.
func TestHeadline(t *testing.T) {
	for _, c := range []struct {
		status   Status
		msg      string
		progress float64
		want     string
	}{
		{StatusQueued, "queued", 0, "Queued"},
		{StatusQueued, "", 0, "Queued"},
		{StatusQueued, "position 3 in line", 0, "Queued: position 3 in line"},
		{StatusQueued, "queued, position 3", 0, "Queued: position 3"},
		{StatusQueued, "submitted to replicate", 0, "Queued: submitted to replicate"},
		{StatusQueued, "2 of your outputs are in flight (limit 2); this one starts when one finishes", 0,
			"Queued: 2 of your outputs are in flight (limit 2); this one starts when one finishes"},
		{StatusQueued, "queuedness", 0, "Queued: queuedness"}, // a longer word is kept
		{StatusRunning, "rendering", 0.45, "Running: rendering, 45%"},
		{StatusRunning, "rendering", 0.999, "Running: rendering, 99%"},
		{StatusRunning, "running", 0.5, "Running: 50%"},
		{StatusRunning, "running", 0, "Running"},
		{StatusRunning, "running: 40%", 0.4, "Running: 40%"}, // the provider's own percentage, not a second one
		{StatusRunning, "Running - starting", 0, "Running: starting"},
		{StatusReserved, msgAwaitsImage, 0, "Waiting for an input image: call upload_input with this generationId"},
		{StatusReserved, "waiting for approval to spend 25 credits", 0, "Waiting for approval to spend 25 credits"},
		{StatusCompleted, "completed", 1, "Completed"},
		{StatusCancelled, "cancelled by the provider at our request", 0.3, "Cancelled: by the provider at our request"},
	} {
		g := &Generation{ID: "g-1234567890abcdef1234567890abcdef12345678", Status: c.status, StatusMessage: c.msg, Progress: c.progress}
		if got := g.Headline(); got != c.want {
			t.Errorf("%s %q %v: %q, want %q", c.status, c.msg, c.progress, got, c.want)
		}
	}
}
