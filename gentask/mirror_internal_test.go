package gentask

import (
	"testing"

	"github.com/darkroom-mcp/darkroom/generation"
)

// TestStatusMessageNamesThePreview: a working task carries nothing but
// its status message, so a running generation's live preview is named
// there, with the URI resources/read serves; nothing when there is none
// or the generation does not run.
func TestStatusMessageNamesThePreview(t *testing.T) {
	for _, tc := range []struct {
		status generation.Status
		frames int
		want   string
	}{
		{generation.StatusRunning, 7, "Running: 40% · preview 7 frames: darkroom://generations/g1/preview"},
		{generation.StatusRunning, 1, "Running: 40% · preview 1 frame: darkroom://generations/g1/preview"},
		{generation.StatusRunning, 0, "Running: 40%"},
		{generation.StatusQueued, 2, "Queued: 40% · preview 2 frames: darkroom://generations/g1/preview"}, // a held synchronous call
		{generation.StatusCompleted, 7, "Completed"},
	} {
		g := &generation.Generation{ID: "g1", Status: tc.status, Progress: 0.4, PreviewFrames: tc.frames}
		if got := statusMessage(g); got != tc.want {
			t.Errorf("%s with %d frames: %q, want %q", tc.status, tc.frames, got, tc.want)
		}
	}
}
