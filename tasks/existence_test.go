package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingBackend counts the reads that reach the real engine: the read
// pool's Task and OwnedTask, and Update with its transaction's Task.
type countingBackend struct {
	Backend
	reads, updates, txReads atomic.Int64
}

func (c *countingBackend) Task(ctx context.Context, id string) (Row, error) {
	c.reads.Add(1)
	return c.Backend.Task(ctx, id)
}

func (c *countingBackend) OwnedTask(ctx context.Context, owner, id string) (Row, error) {
	c.reads.Add(1)
	return c.Backend.OwnedTask(ctx, owner, id)
}

func (c *countingBackend) Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	c.updates.Add(1)
	return c.Backend.Update(ctx, func(ctx context.Context, tx Tx) error { return fn(ctx, countingTx{tx, c}) })
}

type countingTx struct {
	Tx
	c *countingBackend
}

func (t countingTx) Task(ctx context.Context, id string) (Row, error) {
	t.c.txReads.Add(1)
	return t.Tx.Task(ctx, id)
}

// cost is what one lookup took from the engine.
type cost struct{ reads, updates, txReads int64 }

func (c *countingBackend) snapshot() cost {
	return cost{c.reads.Load(), c.updates.Load(), c.txReads.Load()}
}

func (c cost) minus(d cost) cost {
	return cost{c.reads - d.reads, c.updates - d.updates, c.txReads - d.txReads}
}

func newCountingStore(t testing.TB) (*Store, *countingBackend) {
	t.Helper()
	s, d, _ := newTestStore(t)
	cb := &countingBackend{Backend: d.Tasks()}
	return NewStore(cb, s.now), cb
}

// TestNoExistenceTell: a lookup by someone else of an id that exists,
// whether its owner's polling keeps it cached or not, takes exactly the
// path of a lookup of an id that does not exist (same engine reads, same
// answer) and leaves no trace in the cache; the owner's own polling is
// still answered from the cache.
func TestNoExistenceTell(t *testing.T) {
	ctx := context.Background()
	s, cb := newCountingStore(t)
	hour := time.Hour
	polled := mkTask(t, s, &Task{Owner: "alice", TTL: hour, StatusMessage: "running"})
	finished := mkTask(t, s, &Task{Owner: "alice", TTL: hour})
	if ok, err := finish(s, finished.ID, StatusCompleted, "done", json.RawMessage(`{"content":[{"type":"text","text":"`+strings.Repeat("x", 8<<10)+`"}]}`), nil); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	s.Notify(finished.ID)
	unread := mkTask(t, s, &Task{Owner: "bob", TTL: hour})
	expired := mkTask(t, s, &Task{Owner: "alice", TTL: time.Millisecond, CreatedAt: s.now().Add(-time.Hour)})
	for _, id := range []string{polled.ID, finished.ID, expired.ID} {
		if _, err := s.Lookup(ctx, "alice", id); err != nil && id != expired.ID {
			t.Fatal(err)
		}
	}
	unknown := NewID()

	cases := []struct{ name, id string }{
		{"unknown id", unknown},
		{"foreign id its owner polls (cached)", polled.ID},
		{"foreign completed id with a large result (cached)", finished.ID},
		{"foreign id nobody read (not cached)", unread.ID},
		{"foreign expired id", expired.ID},
		{"malformed id", "not-an-id"},
	}
	type outcome struct {
		lookup, update cost
		err            string
	}
	const tries = 3
	var want *outcome
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cached, _ := s.cache.Len()
			var got outcome
			for range tries {
				before := cb.snapshot()
				_, err := s.Lookup(ctx, "mallory", c.id)
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("Lookup: %v, want ErrNotFound", err)
				}
				got.lookup = got.lookup.add(cb.snapshot().minus(before))
				got.err = err.Error()

				before = cb.snapshot()
				_, _, err = s.answer(ctx, "mallory", c.id, map[string]json.RawMessage{"ask_1": json.RawMessage(`{}`)})
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("answer: %v, want ErrNotFound", err)
				}
				got.update = got.update.add(cb.snapshot().minus(before))
			}
			if want == nil {
				want = &got
				if got.lookup.reads != tries {
					t.Fatalf("an unknown id costs %+v over %d lookups, want one read each", got.lookup, tries)
				}
			} else if got != *want {
				t.Errorf("costs %+v, an unknown id costs %+v", got, *want)
			}
			if n, _ := s.cache.Len(); n != cached {
				t.Errorf("cache holds %d tasks after foreign lookups, had %d", n, cached)
			}
		})
	}

	// The owner's polling is still served by the cache, foreign lookups
	// notwithstanding.
	for _, id := range []string{polled.ID, finished.ID} {
		before := cb.snapshot()
		for range 10 {
			if _, err := s.Lookup(ctx, "alice", id); err != nil {
				t.Fatal(err)
			}
		}
		if c := cb.snapshot().minus(before); c != (cost{}) {
			t.Errorf("owner's polling of %s cost %+v, want the cache", id, c)
		}
	}
	// An owner's first read of a task is cached for the next poll; the
	// expired one reads as not found from the cache too.
	before := cb.snapshot()
	for range 3 {
		if _, err := s.Lookup(ctx, "bob", unread.ID); err != nil {
			t.Fatal(err)
		}
	}
	if c := cb.snapshot().minus(before); c.reads != 1 {
		t.Errorf("owner's three polls of an unread task cost %+v, want one read", c)
	}
	if _, err := s.Lookup(ctx, "alice", expired.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("expired own task: %v", err)
	}
}

func (c cost) add(d cost) cost {
	return cost{c.reads + d.reads, c.updates + d.updates, c.txReads + d.txReads}
}

// BenchmarkLookupTell times tasks/get's store path for an own id (cached
// by polling), a foreign id (cached by its owner's polling) and an
// unknown id, interleaved in rounds so drift hits all three alike, and
// reports the medians and the foreign/unknown ratio, which should be ≈ 1.
//
//	go test -run '^$' -bench LookupTell -benchtime 1x ./tasks/
func BenchmarkLookupTell(b *testing.B) {
	for _, bc := range []struct {
		name   string
		result int // bytes of stored result
	}{
		{"working task", 0},
		{"completed task with 16 KiB result", 16 << 10},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			s, _, _ := newTestStore(b)
			own := mkTask(b, s, &Task{Owner: "alice", TTL: time.Hour, StatusMessage: "running 40%"})
			if bc.result > 0 {
				res := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", bc.result) + `"}]}`)
				if ok, err := finish(s, own.ID, StatusCompleted, "done", res, nil); err != nil || !ok {
					b.Fatal(ok, err)
				}
				s.Notify(own.ID)
			}
			// Other tasks, so the id index is not trivially small.
			for i := range 2000 {
				mkTask(b, s, &Task{Owner: fmt.Sprintf("user-%d", i%50), TTL: time.Hour})
			}
			if _, err := s.Lookup(ctx, "alice", own.ID); err != nil {
				b.Fatal(err)
			}
			unknown := NewID()
			kinds := []struct {
				name, owner, id string
				wantErr         bool
			}{
				{"own", "alice", own.ID, false},
				{"foreign", "mallory", own.ID, true},
				{"unknown", "mallory", unknown, true},
			}
			const rounds, per = 400, 50
			samples := make([][]float64, len(kinds))
			for b.Loop() {
				for r := range rounds {
					for k := range kinds {
						i := (k + r) % len(kinds) // rotate the order
						kd := kinds[i]
						start := time.Now()
						for range per {
							_, err := s.Lookup(ctx, kd.owner, kd.id)
							if (err != nil) != kd.wantErr {
								b.Fatalf("%s: %v", kd.name, err)
							}
						}
						samples[i] = append(samples[i], float64(time.Since(start).Nanoseconds())/per)
					}
				}
			}
			med := make([]float64, len(kinds))
			for i, sm := range samples {
				slices.Sort(sm)
				med[i] = sm[len(sm)/2]
				b.ReportMetric(med[i], kinds[i].name+"-ns/lookup")
			}
			b.ReportMetric(med[1]/med[2], "foreign/unknown")
			b.ReportMetric(med[1]/med[0], "foreign/own")
			b.ReportMetric(0, "ns/op")
		})
	}
}
