package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/postgres"
	"github.com/darkroom-mcp/darkroom/storage/postgres/pgtest"
)

// TestOwnerBatch: one owner's writes that wait while one of theirs runs
// share one transaction, and each still decides in turn (a bucket of 10
// create tokens gives exactly 10 of 20 writes a token). A write that fails
// in a batch (its own error, or a queued insert's reused key that only
// the commit reports) fails alone: the batch runs again write by write,
// every other write's outcome stands and nothing of the failed ones is
// kept.
func TestOwnerBatch(t *testing.T) {
	ctx := context.Background()
	d, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	var mu sync.Mutex
	var batches []int // writes per committed transaction
	d.OnCommit(func(n int, _ time.Duration, err error) {
		if err == nil {
			mu.Lock()
			batches = append(batches, n)
			mu.Unlock()
		}
	})
	s := d.Generations()
	now := time.UnixMilli(1_800_000_000_000)
	row := func(owner, id, key string) generation.Row {
		return generation.Row{ID: id, Owner: owner, ModelID: "m", Provider: "p", Kind: "image", Prompt: "x", Params: "{}",
			Status: generation.StatusQueued, IdempotencyKey: key, CreatedAt: now, UpdatedAt: now, NextCheckAt: now}
	}
	const n = 20
	// batch runs n writes of owner while a first one holds its batch open,
	// so that all n wait for it and share the next batch.
	batch := func(owner string, fn func(ctx context.Context, i int, tx generation.Tx) error) []error {
		t.Helper()
		inFirst, release, first := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			first <- s.UpdateOwner(ctx, owner, func(ctx context.Context, tx generation.Tx) error {
				close(inFirst)
				<-release
				return tx.InsertGeneration(ctx, row(owner, owner+"-first", owner+"-first"))
			})
		}()
		<-inFirst
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				errs[i] = s.UpdateOwner(ctx, owner, func(ctx context.Context, tx generation.Tx) error { return fn(ctx, i, tx) })
			})
		}
		for d.OwnerWaiting(owner) < n {
			time.Sleep(time.Millisecond)
		}
		close(release)
		wg.Wait()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		return errs
	}
	id := func(owner string, i int) string { return fmt.Sprint(owner, "-g", i) }
	exists := func(owner string, i int) bool {
		_, err := s.Generation(ctx, id(owner, i))
		if err != nil && !errors.Is(err, generation.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	t.Run("each decides in turn, in one transaction", func(t *testing.T) {
		tokens := make([]bool, n)
		errs := batch("alice", func(ctx context.Context, i int, tx generation.Tx) error {
			tokens[i] = false
			if err := tx.LockOwner(ctx, "alice"); err != nil {
				return err
			}
			wait, err := tx.TakeCreateToken(ctx, "alice", generation.Rate{PerSecond: 0.001, Burst: 10}, now)
			if err != nil || wait > 0 {
				return err
			}
			tokens[i] = true
			return tx.InsertGeneration(ctx, row("alice", id("alice", i), id("alice", i)))
		})
		created := 0
		for i, err := range errs {
			if err != nil || tokens[i] != exists("alice", i) {
				t.Fatalf("write %d: %v; took a token %v, its row exists %v", i, err, tokens[i], exists("alice", i))
			}
			if tokens[i] {
				created++
			}
		}
		if created != 10 {
			t.Errorf("%d created from a bucket of 10", created)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(batches, n) {
			t.Errorf("transactions held %v writes: the %d waiting writes did not share one", batches, n)
		}
	})

	t.Run("a failing write fails alone", func(t *testing.T) {
		const failing, reused = 3, 7
		errBoom := errors.New("boom")
		errs := batch("bob", func(ctx context.Context, i int, tx generation.Tx) error {
			switch i {
			case failing:
				if err := tx.InsertGeneration(ctx, row("bob", id("bob", i), id("bob", i))); err != nil {
					return err
				}
				return errBoom
			case reused: // the first write's key: the commit reports it
				return tx.InsertGeneration(ctx, row("bob", id("bob", i), "bob-first"))
			}
			return tx.InsertGeneration(ctx, row("bob", id("bob", i), id("bob", i)))
		})
		for i, err := range errs {
			switch i {
			case failing:
				if !errors.Is(err, errBoom) || exists("bob", i) {
					t.Errorf("failing write: %v, its row kept %v", err, exists("bob", i))
				}
			case reused:
				if !errors.Is(err, generation.ErrDuplicateKey) || exists("bob", i) {
					t.Errorf("reused key: %v, its row kept %v", err, exists("bob", i))
				}
			default:
				if err != nil || !exists("bob", i) {
					t.Errorf("write %d: %v, its row kept %v", i, err, exists("bob", i))
				}
			}
		}
	})
}
