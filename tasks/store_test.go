package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
)

func newClock() *testclock.Clock { return testclock.New(time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)) }

func newTestStore(t testing.TB) (*Store, TestEngine, *testclock.Clock) {
	t.Helper()
	d, err := OpenTestEngine(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	c := newClock()
	return NewStore(d.Tasks(), c.Now), d, c
}

// mkTask creates t in its own committed transaction.
func mkTask(tb testing.TB, s *Store, task *Task) *Task {
	tb.Helper()
	if task.Ref == "" {
		task.Ref = "test:" + NewID()
	}
	if err := s.db.Update(context.Background(), func(ctx context.Context, tx Tx) error { return s.Create(ctx, tx, task) }); err != nil {
		tb.Fatal(err)
	}
	return task
}

func finish(s *Store, id string, st Status, msg string, result json.RawMessage, terr *Error) (bool, error) {
	var ok bool
	err := s.db.Update(context.Background(), func(ctx context.Context, tx Tx) error {
		var err error
		ok, err = s.Finish(ctx, tx, id, st, msg, result, terr)
		return err
	})
	return ok, err
}

func TestCreateAndGetRoundTrip(t *testing.T) {
	s, _, c := newTestStore(t)
	in := &Task{Owner: "alice", Ref: "test:1", TTL: time.Hour, PollInterval: 1500 * time.Millisecond,
		ClientCaps: json.RawMessage(`{"extensions":{}}`)}
	key := in.AddInputRequest("ask", map[string]any{"method": "elicitation/create"})
	in.Status = StatusInputRequired
	mkTask(t, s, in)
	got, err := s.Get(context.Background(), in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "alice" || got.Ref != "test:1" || got.Status != StatusInputRequired || got.TTL != time.Hour ||
		got.PollInterval != 1500*time.Millisecond || !got.CreatedAt.Equal(c.Now()) || got.KeySeq != 1 ||
		len(got.InputRequests) != 1 || got.InputRequests[key] == nil || string(got.ClientCaps) != `{"extensions":{}}` {
		t.Fatalf("round trip: %+v", got)
	}
	if !got.ExpiresAt().Equal(c.Now().Add(time.Hour)) {
		t.Fatalf("ExpiresAt = %v", got.ExpiresAt())
	}
	// Defaults: working, 1 s poll, no TTL.
	d := mkTask(t, s, &Task{Owner: "alice"})
	if d.Status != StatusWorking || d.PollInterval != time.Second || !d.ExpiresAt().IsZero() || d.Expired(c.Now().Add(1000*time.Hour)) {
		t.Fatalf("defaults: %+v", d)
	}
}

// TestTerminalImmutableUnderRace races a completion against a cancel on
// many tasks: exactly one wins, and nothing changes the task afterwards.
func TestTerminalImmutableUnderRace(t *testing.T) {
	s, _, _ := newTestStore(t)
	const iterations = 150
	wins := map[Status]int{}
	for i := range iterations {
		task := mkTask(t, s, &Task{Owner: "alice", TTL: time.Hour})
		contenders := []struct {
			status Status
			msg    string
			result json.RawMessage
		}{
			{StatusCompleted, "done", json.RawMessage(`{"content":[],"resultType":"complete"}`)},
			{StatusCancelled, "cancelled by the client", nil},
		}
		if i%2 == 1 { // alternate who starts first
			contenders[0], contenders[1] = contenders[1], contenders[0]
		}
		start := make(chan struct{})
		won := make([]bool, len(contenders))
		var wg sync.WaitGroup
		for j, c := range contenders {
			wg.Go(func() {
				<-start
				ok, err := finish(s, task.ID, c.status, c.msg, c.result, nil)
				if err != nil {
					t.Errorf("finish %s: %v", c.status, err)
				}
				won[j] = ok
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for j, ok := range won {
			if ok {
				if winner >= 0 {
					t.Fatalf("iteration %d: both %s and %s won", i, contenders[winner].status, contenders[j].status)
				}
				winner = j
			}
		}
		if winner < 0 {
			t.Fatalf("iteration %d: nobody won", i)
		}
		w := contenders[winner]
		wins[w.status]++
		check := func(when string) {
			got, err := s.Get(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != w.status || got.StatusMessage != w.msg || string(got.Result) != string(w.result) || got.Error != nil {
				t.Fatalf("iteration %d %s: task is %s %q %s, winner was %s", i, when, got.Status, got.StatusMessage, got.Result, w.status)
			}
		}
		check("after the race")
		// Late arrivals of every kind are refused and change nothing.
		for _, st := range []Status{StatusCompleted, StatusCancelled, StatusFailed} {
			if ok, err := finish(s, task.ID, st, "late", json.RawMessage(`{"late":true}`), &Error{Code: -1, Message: "late"}); ok || err != nil {
				t.Fatalf("late Finish(%s) = %v, %v", st, ok, err)
			}
		}
		err := s.db.Update(context.Background(), func(ctx context.Context, tx Tx) error {
			late := &Task{ID: task.ID, InputRequests: map[string]json.RawMessage{"k_9": json.RawMessage(`{}`)}, PollInterval: time.Second}
			ok, err := s.SetActive(ctx, tx, late, StatusInputRequired, "late")
			if ok {
				return errors.New("SetActive moved a terminal task")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		check("after late writes")
	}
	t.Logf("winners over %d races: %v", iterations, wins)
}

func TestFinishAndSetActiveRefuseWrongStatuses(t *testing.T) {
	s, _, _ := newTestStore(t)
	task := mkTask(t, s, &Task{Owner: "alice"})
	err := s.db.Update(context.Background(), func(ctx context.Context, tx Tx) error {
		if _, err := s.Finish(ctx, tx, task.ID, StatusWorking, "", nil, nil); err == nil {
			return errors.New("Finish accepted a live status")
		}
		if _, err := s.SetActive(ctx, tx, task, StatusCompleted, ""); err == nil {
			return errors.New("SetActive accepted a terminal status")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(context.Background(), task.ID); got.Status != StatusWorking {
		t.Fatalf("status changed to %s", got.Status)
	}
}

func TestLookupHidesForeignAndExpired(t *testing.T) {
	s, _, c := newTestStore(t)
	ctx := context.Background()
	live := mkTask(t, s, &Task{Owner: "alice", TTL: time.Minute})
	forever := mkTask(t, s, &Task{Owner: "alice"})
	done := mkTask(t, s, &Task{Owner: "alice", TTL: time.Hour})
	if ok, err := finish(s, done.ID, StatusCompleted, "done", json.RawMessage(`{}`), nil); !ok || err != nil {
		t.Fatal(ok, err)
	}
	cases := []struct {
		name    string
		owner   string
		id      string
		advance time.Duration
		found   bool
	}{
		{"own live", "alice", live.ID, 0, true},
		{"own terminal", "alice", done.ID, 0, true},
		{"foreign", "bob", live.ID, 0, false},
		{"unknown", "alice", "0123456789abcdef0123456789abcdef", 0, false},
		{"empty id", "alice", "", 0, false},
		{"just before expiry", "alice", live.ID, time.Minute - time.Millisecond, true},
		{"at expiry", "alice", live.ID, time.Millisecond, false},
		{"expired, foreign", "bob", live.ID, 0, false},
		{"no TTL never expires", "alice", forever.ID, 1000 * time.Hour, true},
	}
	for _, tc := range cases {
		c.Advance(tc.advance)
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Lookup(ctx, tc.owner, tc.id)
			if tc.found {
				if err != nil || got.ID != tc.id {
					t.Fatalf("Lookup = %v, %v; want the task", got, err)
				}
				return
			}
			if !errors.Is(err, ErrNotFound) || got != nil {
				t.Fatalf("Lookup = %v, %v; want ErrNotFound", got, err)
			}
		})
	}
}

func countTasks(t *testing.T, d TestEngine, where string) int {
	t.Helper()
	n, err := d.QueryInt("SELECT COUNT(*) FROM tasks " + where)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSweep fails live tasks past their TTL (in batches larger than one
// sweep transaction), leaves the rest alone, and purges expired rows only
// after PurgeGrace.
func TestSweep(t *testing.T) {
	s, d, c := newTestStore(t)
	ctx := context.Background()
	const expiring = sweepBatch*2 + 17 // three batches
	// Bulk insert in a few transactions.
	for start := 0; start < expiring; start += 400 {
		err := d.Tasks().Update(ctx, func(ctx context.Context, tx Tx) error {
			for i := start; i < min(start+400, expiring); i++ {
				task := &Task{Owner: "alice", Ref: fmt.Sprintf("test:%d", i), TTL: time.Minute}
				if i%3 == 0 {
					task.Status = StatusInputRequired
					task.AddInputRequest("k", map[string]any{})
				}
				if err := s.Create(ctx, tx, task); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	watched := mkTask(t, s, &Task{Owner: "alice", TTL: time.Minute})
	forever := mkTask(t, s, &Task{Owner: "alice"})
	longer := mkTask(t, s, &Task{Owner: "alice", TTL: 3 * time.Hour})
	doneEarly := mkTask(t, s, &Task{Owner: "alice", TTL: time.Minute})
	if ok, err := finish(s, doneEarly.ID, StatusCompleted, "done", json.RawMessage(`{"ok":true}`), nil); !ok || err != nil {
		t.Fatal(ok, err)
	}
	sub := s.broker.subscribe([]string{watched.ID})
	defer s.broker.unsubscribe(sub, []string{watched.ID})

	// Nothing is due yet.
	if f, p, err := s.Sweep(ctx); f != 0 || p != 0 || err != nil {
		t.Fatalf("early sweep: failed %d purged %d err %v", f, p, err)
	}
	c.Advance(2 * time.Minute)
	f, p, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f != expiring+1 || p != 0 {
		t.Fatalf("sweep after TTL: failed %d purged %d, want %d and 0", f, p, expiring+1)
	}
	select {
	case <-sub.wake:
		if ids := sub.take(); len(ids) != 1 || ids[0] != watched.ID {
			t.Fatalf("notified %v", ids)
		}
	default:
		t.Fatal("a listener was not told its task expired")
	}
	got, err := s.Get(ctx, watched.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusFailed || got.Error == nil || got.Error.Code != CodeInternal || len(got.InputRequests) != 0 {
		t.Fatalf("expired task: %+v", got)
	}
	if n := countTasks(t, d, "WHERE status IN ('working','input_required') AND expires_at IS NOT NULL AND expires_at <= "+fmt.Sprint(c.Now().UnixMilli())); n != 0 {
		t.Fatalf("%d expired tasks are still live", n)
	}
	if got, _ := s.Get(ctx, doneEarly.ID); got.Status != StatusCompleted || string(got.Result) != `{"ok":true}` {
		t.Fatalf("a terminal task was rewritten by the sweep: %+v", got)
	}
	for _, id := range []string{forever.ID, longer.ID} {
		if got, _ := s.Get(ctx, id); got.Status != StatusWorking {
			t.Fatalf("an unexpired task was swept: %+v", got)
		}
	}
	// A second sweep finds nothing new.
	if f, p, err := s.Sweep(ctx); f != 0 || p != 0 || err != nil {
		t.Fatalf("repeat sweep: failed %d purged %d err %v", f, p, err)
	}
	// Past the grace, every row expired for longer than PurgeGrace goes.
	c.Advance(PurgeGrace)
	f, p, err = s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f != 0 || p != expiring+2 {
		t.Fatalf("purge: failed %d purged %d, want 0 and %d", f, p, expiring+2)
	}
	if n := countTasks(t, d, ""); n != 2 {
		t.Fatalf("%d rows left, want the 2 unexpired", n)
	}
	// The 3 h task: failed at 3 h, purged at 4 h.
	c.Advance(3 * time.Hour)
	if f, p, err := s.Sweep(ctx); f != 1 || p != 1 || err != nil {
		t.Fatalf("late sweep: failed %d purged %d err %v", f, p, err)
	}
	if _, err := s.Get(ctx, forever.ID); err != nil {
		t.Fatalf("the task without TTL was purged: %v", err)
	}
}
