package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/darkroom-mcp/darkroom/generation"
)

// testLivePreview: the live preview of a generation is one row, replaced
// in place, written only while the generation is queued or running, bumping no version of
// the generation, and gone with its generation.
func testLivePreview(t *testing.T, e Engine) {
	s := e.Generations
	insert(t, s, genRow("run", "alice", generation.StatusRunning, at(0)), genRow("q", "alice", generation.StatusQueued, at(0)), genRow("res", "alice", generation.StatusReserved, at(0)),
		genRow("done", "alice", generation.StatusCompleted, at(0)))
	put := func(id string, jpeg []byte, frames int64) bool {
		return do(t, s, func(ctx context.Context, tx generation.Tx) (bool, error) {
			return tx.PutLivePreview(ctx, id, jpeg, frames, at(5))
		})
	}
	frames := func(id string) int64 {
		return do(t, s, func(ctx context.Context, tx generation.Tx) (int64, error) { return tx.LivePreviewFrames(ctx, id) })
	}
	version := get(t, s, "run").Version
	for _, c := range []struct {
		id     string
		jpeg   string
		frames int64
		want   bool
	}{
		{"run", "frame-1", 1, true},
		{"run", "frame-7", 7, true},  // replaced, not appended
		{"q", "frame-2", 2, true},    // a synchronous call held while queued
		{"res", "frame-1", 1, false}, // not at the provider
		{"done", "frame-1", 1, false},
		{"missing", "frame-1", 1, false},
	} {
		if got := put(c.id, []byte(c.jpeg), c.frames); got != c.want {
			t.Errorf("PutLivePreview(%s, %s) = %v, want %v", c.id, c.jpeg, got, c.want)
		}
	}
	b, n, err := s.LivePreview(t.Context(), "run")
	if err != nil || !bytes.Equal(b, []byte("frame-7")) || n != 7 || frames("run") != 7 {
		t.Errorf("LivePreview(run) = %q, %d, %v (frames %d); want frame-7, 7", b, n, err, frames("run"))
	}
	if v := get(t, s, "run").Version; v != version {
		t.Errorf("a frame bumped the generation's version %d → %d", version, v)
	}
	for _, id := range []string{"res", "done", "missing"} {
		if _, _, err := s.LivePreview(t.Context(), id); !errors.Is(err, generation.ErrNotFound) {
			t.Errorf("LivePreview(%s): %v, want ErrNotFound", id, err)
		}
		if n := frames(id); n != 0 {
			t.Errorf("LivePreviewFrames(%s) = %d, want 0", id, n)
		}
	}
	update(t, s, func(ctx context.Context, tx generation.Tx) error { return tx.DeleteLivePreview(ctx, "run") })
	if _, _, err := s.LivePreview(t.Context(), "run"); !errors.Is(err, generation.ErrNotFound) {
		t.Errorf("after DeleteLivePreview: %v, want ErrNotFound", err)
	}
	if !put("run", []byte("frame-8"), 8) {
		t.Fatal("PutLivePreview after the delete refused")
	}
	// A purged generation takes its frame along (ON DELETE CASCADE).
	if !apply(t, s, change("run", generation.EventAbandon, generation.StatusFailed, at(6))) {
		t.Fatal("abandon refused")
	}
	if !do(t, s, func(ctx context.Context, tx generation.Tx) (bool, error) { return tx.DeleteGeneration(ctx, "run") }) {
		t.Fatal("DeleteGeneration refused")
	}
	if e.Rows != nil {
		if n := e.Rows(t, "live_previews"); n != 1 {
			t.Errorf("%d live_previews rows after the purge, want 1 (q's)", n)
		}
	}
}
