package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/storage/postgres"
)

// TestGenerationCache: an owner's reads of a live generation are answered
// from the replica's cache while its fence is fresh; the replica that
// commits a change reads it at once, another replica once its listener
// has heard it, and a change nobody announced once the resync has read
// the versions; another owner's id reads as unknown; a purge is heard.
func TestGenerationCache(t *testing.T) {
	dbs := replicas(t, 2)
	a, b := dbs[0], dbs[1]
	heardB := listen(t, b)
	listen(t, a)
	ctx := context.Background()
	now := time.Now()
	gens := (*postgres.DB).Generations
	if err := gens(a).Update(ctx, func(ctx context.Context, tx generation.Tx) error {
		return tx.InsertGeneration(ctx, generation.Row{ID: "g", Owner: "alice", ModelID: "m", Provider: "local", Kind: "image",
			Params: "{}", Status: generation.StatusRunning, CreatedAt: now, UpdatedAt: now})
	}); err != nil {
		t.Fatal(err)
	}
	read := func(d generation.Store, owner string) (generation.Row, error) {
		return d.OwnedGeneration(ctx, owner, "g")
	}
	progress := func(d generation.Store, p float64) {
		t.Helper()
		if err := d.Update(ctx, func(ctx context.Context, tx generation.Tx) error {
			_, err := tx.Apply(ctx, generation.Change{ID: "g", Event: generation.EventProgress, From: []generation.Status{generation.StatusRunning},
				To: generation.StatusRunning, At: time.Now(), Progress: p})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	progressOf := func(d generation.Store) float64 {
		t.Helper()
		r, err := read(d, "alice")
		if err != nil {
			t.Fatal(err)
		}
		return r.Progress
	}
	// Both replicas cache it.
	if progressOf(gens(a)) != 0 || progressOf(gens(b)) != 0 {
		t.Fatal("initial progress")
	}

	// The committing replica reads its own change at once; the other once
	// it has heard it.
	progress(gens(a), 0.3)
	if p := progressOf(gens(a)); p != 0.3 {
		t.Fatalf("A after its own commit: %v", p)
	}
	for s := range heardB {
		if s == "g:g" {
			break
		}
	}
	if p := progressOf(gens(b)); p != 0.3 {
		t.Fatalf("B after hearing the change: %v", p)
	}

	// A change nobody announced (an UPDATE outside darkroom's writes): B
	// serves its cached row while the fence is fresh, which proves the
	// cache answers, until the resync reads the versions.
	eventually("B's fence is fresh", b.Fence().Fresh)
	if _, err := a.Pool.Exec(ctx, "UPDATE generations SET progress = 0.6 WHERE id = 'g'"); err != nil {
		t.Fatal(err)
	}
	if p := progressOf(gens(b)); p != 0.3 {
		t.Fatalf("B before the resync: %v, want its cached 0.3", p)
	}
	if err := b.RevalidateGenerations(ctx); err != nil {
		t.Fatal(err)
	}
	if p := progressOf(gens(b)); p != 0.6 {
		t.Fatalf("B after the resync: %v", p)
	}

	// Another owner's id is unknown, cached or not.
	if _, err := read(gens(b), "mallory"); !errors.Is(err, generation.ErrNotFound) {
		t.Fatalf("mallory's read: %v, want ErrNotFound", err)
	}

	// A purge (of a failed generation) is announced: B forgets the row.
	if err := gens(a).Update(ctx, func(ctx context.Context, tx generation.Tx) error {
		_, err := tx.Apply(ctx, generation.Change{ID: "g", Event: generation.EventFail, From: []generation.Status{generation.StatusRunning},
			At: time.Now(), ErrorKind: generation.ErrorKind("provider"), ErrorMessage: "refused"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	eventually("B reads the failure", func() bool {
		r, err := read(gens(b), "alice")
		return err == nil && r.Status == generation.StatusFailed
	})
	if err := gens(a).Update(ctx, func(ctx context.Context, tx generation.Tx) error {
		ok, err := tx.DeleteGeneration(ctx, "g")
		if err == nil && !ok {
			err = errors.New("not deleted")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	eventually("B forgets the purged row", func() bool {
		_, err := read(gens(b), "alice")
		return errors.Is(err, generation.ErrNotFound)
	})
}
