package generation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

func withBudget(limit int64) envOption {
	return func(c *Config) {
		c.Budget = func(context.Context, string) *int64 { return &limit }
	}
}

// TestBudgetDecidedInTransaction: concurrent creates against a daily
// budget that fits exactly five accept exactly five, with or without
// (fresh) idempotency keys and with one output or three (each charged),
// and never report more spent than the limit.
func TestBudgetDecidedInTransaction(t *testing.T) {
	for _, c := range []struct {
		keyed bool
		count int
	}{{false, 1}, {true, 1}, {false, 3}, {true, 3}} {
		t.Run(fmt.Sprintf("keys=%v/count=%d", c.keyed, c.count), func(t *testing.T) {
			fits := int64(5 * c.count)
			e := newEnv(t, withBudget(fits)) // local-sketch costs 1 an output
			ctx := context.Background()
			const n = 50
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					req := CreateRequest{ModelID: "local-sketch", Prompt: "budget", Count: c.count}
					if c.keyed {
						req.IdempotencyKey = fmt.Sprintf("fresh-%d", i)
					}
					_, _, err := e.svc.Create(ctx, "alice", req)
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			accepted := 0
			for err := range errs {
				var ie *InputError
				switch {
				case err == nil:
					accepted++
				case errors.As(err, &ie) && strings.Contains(ie.Msg, "nothing was generated"):
				default:
					t.Fatalf("unexpected error: %v", err)
				}
			}
			spent, err := e.svc.Spent(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			if accepted != 5 || spent != fits || e.count("") != 5 {
				t.Fatalf("accepted %d, spent %d, rows %d; want 5, %d, 5", accepted, spent, e.count(""), fits)
			}
		})
	}
}

// TestIdempotentRepeatUnderBudget: a repeat with the same arguments
// returns the earlier generation even when the budget is spent, and
// charges nothing; a new key is refused.
func TestIdempotentRepeatUnderBudget(t *testing.T) {
	e := newEnv(t, withBudget(1))
	ctx := context.Background()
	req := CreateRequest{ModelID: "local-sketch", Prompt: "once", IdempotencyKey: "k"}
	first, _, err := e.svc.Create(ctx, "alice", req)
	if err != nil {
		t.Fatal(err)
	}
	again, existing, err := e.svc.Create(ctx, "alice", req)
	if err != nil || !existing || again.ID != first.ID {
		t.Fatalf("repeat: %v existing=%v", err, existing)
	}
	if spent, _ := e.svc.Spent(ctx, "alice"); spent != 1 {
		t.Fatalf("spent %d after a repeat, want 1", spent)
	}
	req.IdempotencyKey = "other"
	if _, _, err := e.svc.Create(ctx, "alice", req); err == nil {
		t.Fatal("a new key past the budget was accepted")
	}
}

// TestConcurrentUploads: of concurrent upload_input calls for one
// reserved generation exactly one wins, the others get an InputError, and
// the record's sha256 is that of the file it names, which holds the
// winner's bytes; the losers' files are gone.
func TestConcurrentUploads(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	g := e.create("alice", CreateRequest{ModelID: "local-animate", Prompt: "upload race"})
	base := pngBytes(t)
	const n = 8
	type result struct {
		data []byte
		g    *Generation
		err  error
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for i := range n {
		data := append(append([]byte{}, base...), byte(i)) // distinct files
		wg.Go(func() {
			got, err := e.svc.UploadInput(ctx, "alice", g.ID, "", InputImage{Data: data})
			results <- result{data, got, err}
		})
	}
	wg.Wait()
	close(results)
	var winner *result
	for r := range results {
		var ie *InputError
		switch {
		case r.err == nil:
			if winner != nil {
				t.Fatal("two uploads won")
			}
			winner = &r
		case !errors.As(r.err, &ie):
			t.Fatalf("a losing upload: %v, want an InputError", r.err)
		}
	}
	if winner == nil {
		t.Fatal("no upload won")
	}
	after, err := e.svc.Get(ctx, "alice", g.ID)
	if err != nil || after.Status != StatusQueued || after.Params.InputImage == nil {
		t.Fatalf("after the race: %v %+v", err, after)
	}
	in := after.Params.InputImage
	rc, _, err := e.blobs.Open(ctx, in.Key)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := io.ReadAll(rc)
	_ = rc.Close()
	sum := sha256.Sum256(stored)
	want := sha256.Sum256(winner.data)
	if hex.EncodeToString(sum[:]) != in.SHA256 || sum != want {
		t.Fatalf("record sha256 %s, stored file %x, winner %x", in.SHA256, sum, want)
	}
	if files := countFiles(t, e.blobs.Dir()); files != 1 {
		t.Fatalf("%d files stored, want only the winner's", files)
	}
}
