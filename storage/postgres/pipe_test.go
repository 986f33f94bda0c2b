package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/postgres"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
)

// TestPipeQueuedFailure: a queued insert that fails (a reused key) is
// reported by the statement that carried it, a read or the commit, as
// the insert's own error (not "transaction aborted"), and nothing of the
// transaction is kept; the pooled connection serves the next write.
func TestPipeQueuedFailure(t *testing.T) {
	ctx := context.Background()
	d, err := postgres.Open(ctx, pgtest.URL(t)+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	s := d.Generations()
	now := time.UnixMilli(1_800_000_000_000)
	row := func(id string) generation.Row {
		return generation.Row{ID: id, Owner: "alice", ModelID: "m", Provider: "p", Kind: "image", Prompt: "x", Params: "{}",
			Status: generation.StatusQueued, IdempotencyKey: "k", CreatedAt: now, UpdatedAt: now, NextCheckAt: now}
	}
	if err := s.Update(ctx, func(ctx context.Context, tx generation.Tx) error { return tx.InsertGeneration(ctx, row("g1")) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		then func(ctx context.Context, tx generation.Tx) error // after the duplicate insert
	}{
		{"reported by the commit", func(context.Context, generation.Tx) error { return nil }},
		{"reported by the next read", func(ctx context.Context, tx generation.Tx) error {
			// Its error is the insert's: Update maps it to ErrDuplicateKey
			// below (a "transaction aborted" error would not map).
			_, err := tx.Generation(ctx, "g1")
			if err == nil {
				t.Errorf("read after a failed queued insert succeeded")
			}
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := s.Update(ctx, func(ctx context.Context, tx generation.Tx) error {
				if err := tx.InsertGeneration(ctx, row("g2")); err != nil {
					return err
				}
				return c.then(ctx, tx)
			})
			if !errors.Is(err, generation.ErrDuplicateKey) {
				t.Fatalf("Update = %v, want ErrDuplicateKey", err)
			}
			if _, err := s.Generation(ctx, "g2"); !errors.Is(err, generation.ErrNotFound) {
				t.Fatalf("g2 after the failed write: %v, want ErrNotFound", err)
			}
			r := row("g3-" + c.name)
			r.IdempotencyKey = c.name
			if err := s.Update(ctx, func(ctx context.Context, tx generation.Tx) error { return tx.InsertGeneration(ctx, r) }); err != nil {
				t.Fatalf("the next write on the one connection: %v", err)
			}
		})
	}
}
