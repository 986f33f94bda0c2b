package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgdb"
	"github.com/darkroom-mcp/darkroom/storage/rows"
)

// The running generations' latest preview frames (live_previews,
// migration 0016): not announced, since the frame is no generation
// change (the task mirror announces its status message).

func (r reads) LivePreview(ctx context.Context, genID string) ([]byte, int64, error) {
	row, err := r.q.LivePreview(ctx, genID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, generation.ErrNotFound
	}
	return row.Jpeg, row.Frames, err
}

func (r reads) LivePreviewFrames(ctx context.Context, genID string) (int64, error) {
	return r.q.LivePreviewFrames(ctx, genID)
}

func (t *Tx) PutLivePreview(ctx context.Context, genID string, jpeg []byte, frames int64, now time.Time) (bool, error) {
	return rows.Changed(t.q.PutLivePreview(ctx, pgdb.PutLivePreviewParams{ID: genID, Jpeg: jpeg, Frames: frames, Now: now.UnixMilli()}))
}

func (t *Tx) DeleteLivePreview(ctx context.Context, genID string) error {
	return t.q.DeleteLivePreview(ctx, genID)
}
