package storetest

// The task state machine (tasks.Backend and tasks.Tx).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/tasks"
)

func testTaskInsertRead(t *testing.T, e Engine) {
	b, ctx := e.Tasks, t.Context()
	full := taskRow("t1", "gen:1", tasks.StatusWorking, at(0))
	full.InputRequests, full.KeySeq = `{"q_1":{"message":"which?"}}`, 1
	withResult := taskRow("t2", "gen:2", tasks.StatusCompleted, at(1))
	withResult.Result = json.RawMessage(`{"content":[{"type":"text","text":"done"}],"isError":false}`)
	withError := taskRow("t3", "gen:3", tasks.StatusFailed, at(2))
	withError.Error = json.RawMessage(`{"code":-32603,"message":"boom"}`)
	bare := taskRow("t4", "gen:4", tasks.StatusWorking, at(3))
	bare.TTL, bare.ExpiresAt, bare.Result, bare.Error = 0, time.Time{}, nil, json.RawMessage{}

	var inTx, inTxByRef tasks.Row
	var inTxMissing, inTxMissingRef error
	update(t, b, func(ctx context.Context, tx tasks.Tx) error {
		for _, r := range []tasks.Row{full, withResult, withError, bare} {
			if err := tx.InsertTask(ctx, r); err != nil {
				return err
			}
		}
		var err error
		if inTx, err = tx.Task(ctx, "t1"); err != nil {
			return fmt.Errorf("read own write: %w", err)
		}
		if inTxByRef, err = tx.TaskByRef(ctx, "gen:2"); err != nil {
			return fmt.Errorf("read own write by ref: %w", err)
		}
		_, inTxMissing = tx.Task(ctx, "nope")
		_, inTxMissingRef = tx.TaskByRef(ctx, "gen:nope")
		return nil
	})
	for _, want := range []tasks.Row{full, withResult, withError, bare} {
		got := getTask(t, b, want.TaskID)
		if d := diff(want, got, taskJSON); len(d) > 0 {
			t.Errorf("Task(%s) differs from the inserted row: %v", want.TaskID, d)
		}
		byRef, err := b.TaskByRef(ctx, want.Ref)
		if err != nil {
			t.Errorf("TaskByRef(%s): %v", want.Ref, err)
		} else if d := diff(want, byRef, taskJSON); len(d) > 0 {
			t.Errorf("TaskByRef(%s) differs from the inserted row: %v", want.Ref, d)
		}
	}
	// NULL round trips: nothing stays nothing.
	got := getTask(t, b, "t4")
	if got.TTL != 0 || !got.ExpiresAt.IsZero() || len(got.Result) != 0 || len(got.Error) != 0 {
		t.Errorf("t4: TTL %v, ExpiresAt %v, Result %q, Error %q; want all empty", got.TTL, got.ExpiresAt, got.Result, got.Error)
	}
	if got := getTask(t, b, "t2"); len(got.Error) != 0 {
		t.Errorf("t2 Error = %q, want empty", got.Error)
	}
	if got := getTask(t, b, "t3"); len(got.Result) != 0 {
		t.Errorf("t3 Result = %q, want empty", got.Result)
	}
	if d := diff(full, inTx, taskJSON); len(d) > 0 {
		t.Errorf("tx.Task(t1) differs from the inserted row: %v", d)
	}
	if inTxByRef.TaskID != "t2" {
		t.Errorf("tx.TaskByRef(gen:2) = %q, want t2", inTxByRef.TaskID)
	}
	for name, err := range map[string]error{"tx.Task": inTxMissing, "tx.TaskByRef": inTxMissingRef} {
		if !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("%s of an unknown task = %v, want tasks.ErrNotFound", name, err)
		}
	}
	if r, err := b.Task(ctx, "nope"); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("Task(nope) = %+v, %v; want tasks.ErrNotFound", r, err)
	}
	if r, err := b.TaskByRef(ctx, "gen:nope"); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("TaskByRef(gen:nope) = %+v, %v; want tasks.ErrNotFound", r, err)
	}
}

// testOwnedTask: OwnedTask answers the owner's task and nothing else: a
// foreign id is ErrNotFound, exactly as an unknown one.
func testOwnedTask(t *testing.T, e Engine) {
	b, ctx := e.Tasks, t.Context()
	mine := taskRow("t1", "gen:1", tasks.StatusWorking, at(0))
	bobs := taskRow("t2", "gen:2", tasks.StatusWorking, at(1))
	bobs.Owner = "bob"
	insertTasks(t, b, mine, bobs)
	got, err := b.OwnedTask(ctx, "alice", "t1")
	if err != nil {
		t.Fatalf("OwnedTask(alice, t1): %v", err)
	}
	if d := diff(mine, got, taskJSON); len(d) > 0 {
		t.Errorf("OwnedTask(alice, t1) differs from the inserted row: %v", d)
	}
	for _, c := range []struct{ owner, id string }{
		{"alice", "t2"}, {"bob", "t1"}, {"alice", "nope"}, {"", "t1"}, {"Alice", "t1"}, {"alic", "t1"}, {"alice ", "t1"}, {"alice", "T1"},
	} {
		if r, err := b.OwnedTask(ctx, c.owner, c.id); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("OwnedTask(%q, %q) = %+v, %v; want tasks.ErrNotFound", c.owner, c.id, r, err)
		}
	}
}

func testTaskTransitions(t *testing.T, e Engine) {
	b := e.Tasks
	insertTasks(t, b, taskRow("t1", "gen:1", tasks.StatusWorking, at(0)))
	unchanged := func(what string, before tasks.Row) {
		t.Helper()
		if d := diff(before, getTask(t, b, "t1"), taskJSON); len(d) > 0 {
			t.Errorf("%s changed the task: %v", what, d)
		}
	}

	before := getTask(t, b, "t1")
	if taskOp(t, b, setAnswers, tasks.Row{TaskID: "t1", InputRequests: "{}", AnsweredKeys: `["x"]`, InputResponses: `{"x":1}`, LastUpdatedAt: at(5)}) {
		t.Error("SetTaskAnswers on a working task = true, want false")
	}
	unchanged("SetTaskAnswers on a working task", before)

	active := tasks.Row{TaskID: "t1", Status: tasks.StatusInputRequired, StatusMessage: "need input",
		InputRequests: `{"q_1":{"message":"which?"}}`, KeySeq: 1, PollInterval: 3 * time.Second, LastUpdatedAt: at(10)}
	if !taskOp(t, b, setActive, active) {
		t.Fatal("SetTaskActive(input_required) on a working task = false")
	}
	want := before
	want.Status, want.StatusMessage, want.InputRequests, want.KeySeq, want.PollInterval, want.LastUpdatedAt =
		active.Status, active.StatusMessage, active.InputRequests, active.KeySeq, active.PollInterval, active.LastUpdatedAt
	want.Version = before.Version + 1 // every change bumps the version (the engine's trigger), a refused one not
	if d := diff(want, getTask(t, b, "t1"), taskJSON); len(d) > 0 {
		t.Errorf("after SetTaskActive: %v", d)
	}

	answers := tasks.Row{TaskID: "t1", InputRequests: "{}", AnsweredKeys: `["q_1"]`, InputResponses: `{"q_1":{"action":"accept"}}`, LastUpdatedAt: at(20)}
	if !taskOp(t, b, setAnswers, answers) {
		t.Fatal("SetTaskAnswers on an input_required task = false")
	}
	want.InputRequests, want.AnsweredKeys, want.InputResponses, want.LastUpdatedAt = answers.InputRequests, answers.AnsweredKeys, answers.InputResponses, answers.LastUpdatedAt
	want.Version++
	if d := diff(want, getTask(t, b, "t1"), taskJSON); len(d) > 0 {
		t.Errorf("after SetTaskAnswers: %v", d)
	}

	working := tasks.Row{TaskID: "t1", Status: tasks.StatusWorking, StatusMessage: "back to work", InputRequests: "{}", KeySeq: 1, PollInterval: time.Second, LastUpdatedAt: at(30)}
	if !taskOp(t, b, setActive, working) {
		t.Fatal("SetTaskActive(working) on an input_required task = false")
	}
	if r := getTask(t, b, "t1"); r.Status != tasks.StatusWorking || r.PollInterval != time.Second || !r.LastUpdatedAt.Equal(at(30)) || r.Version != want.Version+1 {
		t.Errorf("after SetTaskActive(working): status %s, poll %v, updated %v, version %d (want %d)", r.Status, r.PollInterval, r.LastUpdatedAt, r.Version, want.Version+1)
	}

	done := tasks.Row{TaskID: "t1", Status: tasks.StatusCompleted, StatusMessage: "done", Result: json.RawMessage(`{"content":[],"structuredContent":{"id":"g"}}`), LastUpdatedAt: at(40)}
	if !taskOp(t, b, finish, done) {
		t.Fatal("FinishTask(completed) on a working task = false")
	}
	r := getTask(t, b, "t1")
	if r.Status != tasks.StatusCompleted || r.StatusMessage != "done" || !jsonEqual(string(r.Result), string(done.Result)) || len(r.Error) != 0 || !r.LastUpdatedAt.Equal(at(40)) || r.Version != want.Version+2 {
		t.Errorf("after FinishTask: status %s %q, result %s, error %q, updated %v, version %d", r.Status, r.StatusMessage, r.Result, r.Error, r.LastUpdatedAt, r.Version)
	}
	if !r.CreatedAt.Equal(at(0)) || r.Owner != "alice" || r.Ref != "gen:1" || !r.ExpiresAt.Equal(at(0).Add(time.Minute)) {
		t.Errorf("FinishTask changed identity fields: %+v", r)
	}
	before = r
	again := tasks.Row{TaskID: "t1", Status: tasks.StatusFailed, StatusMessage: "late", Error: json.RawMessage(`{"code":1,"message":"late"}`), LastUpdatedAt: at(50)}
	if taskOp(t, b, finish, again) {
		t.Error("a second FinishTask = true, want false")
	}
	unchanged("a second FinishTask", before)

	// From input_required straight to failed, with an error payload.
	insertTasks(t, b, taskRow("t2", "gen:2", tasks.StatusInputRequired, at(0)))
	failed := tasks.Row{TaskID: "t2", Status: tasks.StatusFailed, StatusMessage: "failed", Error: json.RawMessage(`{"code":-32603,"message":"provider refused","data":{"k":"v"}}`), LastUpdatedAt: at(60)}
	if !taskOp(t, b, finish, failed) {
		t.Fatal("FinishTask(failed) on an input_required task = false")
	}
	if r := getTask(t, b, "t2"); r.Status != tasks.StatusFailed || !jsonEqual(string(r.Error), string(failed.Error)) || len(r.Result) != 0 {
		t.Errorf("t2 after FinishTask(failed): status %s, error %s, result %q", r.Status, r.Error, r.Result)
	}

	for name, op := range map[string]func(tasks.Tx) func(context.Context, tasks.Row) (bool, error){
		"SetTaskActive": setActive, "SetTaskAnswers": setAnswers, "FinishTask": finish,
	} {
		if taskOp(t, b, op, tasks.Row{TaskID: "nope", Status: tasks.StatusCompleted, InputRequests: "{}", AnsweredKeys: "[]", InputResponses: "{}", LastUpdatedAt: at(70)}) {
			t.Errorf("%s on an unknown task = true", name)
		}
	}
}

func testTaskTerminal(t *testing.T, e Engine) {
	b := e.Tasks
	for i, st := range []tasks.Status{tasks.StatusCompleted, tasks.StatusFailed, tasks.StatusCancelled} {
		id := "term-" + string(st)
		insertTasks(t, b, taskRow(id, "gen:"+id, tasks.StatusWorking, at(0)))
		end := tasks.Row{TaskID: id, Status: st, StatusMessage: "end", LastUpdatedAt: at(int64(10 + i))}
		if st == tasks.StatusCompleted {
			end.Result = json.RawMessage(`{"content":[]}`)
		}
		if st == tasks.StatusFailed {
			end.Error = json.RawMessage(`{"code":1,"message":"x"}`)
		}
		if !taskOp(t, b, finish, end) {
			t.Fatalf("FinishTask(%s) on a working task = false", st)
		}
		before := getTask(t, b, id)
		if before.Status != st {
			t.Fatalf("status after FinishTask(%s) = %s", st, before.Status)
		}
		for _, c := range []struct {
			name string
			op   func(tasks.Tx) func(context.Context, tasks.Row) (bool, error)
			r    tasks.Row
		}{
			{"SetTaskActive(working)", setActive, tasks.Row{TaskID: id, Status: tasks.StatusWorking, StatusMessage: "x", InputRequests: "{}", PollInterval: time.Second, LastUpdatedAt: at(100)}},
			{"SetTaskActive(input_required)", setActive, tasks.Row{TaskID: id, Status: tasks.StatusInputRequired, StatusMessage: "x", InputRequests: `{"a":1}`, PollInterval: time.Second, LastUpdatedAt: at(100)}},
			{"SetTaskAnswers", setAnswers, tasks.Row{TaskID: id, InputRequests: "{}", AnsweredKeys: `["a"]`, InputResponses: `{"a":1}`, LastUpdatedAt: at(100)}},
			{"FinishTask(completed)", finish, tasks.Row{TaskID: id, Status: tasks.StatusCompleted, StatusMessage: "x", Result: json.RawMessage(`{"x":1}`), LastUpdatedAt: at(100)}},
			{"FinishTask(failed)", finish, tasks.Row{TaskID: id, Status: tasks.StatusFailed, StatusMessage: "x", Error: json.RawMessage(`{"code":2,"message":"y"}`), LastUpdatedAt: at(100)}},
			{"FinishTask(cancelled)", finish, tasks.Row{TaskID: id, Status: tasks.StatusCancelled, StatusMessage: "x", LastUpdatedAt: at(100)}},
		} {
			if taskOp(t, b, c.op, c.r) {
				t.Errorf("%s on a %s task = true, want false", c.name, st)
			}
		}
		if d := diff(before, getTask(t, b, id), taskJSON); len(d) > 0 {
			t.Errorf("terminal %s task changed: %v", st, d)
		}
	}
}

func testTaskExpiry(t *testing.T, e Engine) {
	b, ctx := e.Tasks, t.Context()
	expiring := func(id string, st tasks.Status, expires int64) tasks.Row {
		r := taskRow(id, "gen:"+id, st, at(0))
		r.TTL, r.ExpiresAt = time.Duration(expires)*time.Millisecond, at(expires)
		return r
	}
	forever := taskRow("x5", "gen:x5", tasks.StatusWorking, at(0))
	forever.TTL, forever.ExpiresAt = 0, time.Time{}
	insertTasks(t, b,
		expiring("x1", tasks.StatusWorking, 100),
		expiring("x2", tasks.StatusInputRequired, 100),
		expiring("x3", tasks.StatusWorking, 101),
		expiring("x4", tasks.StatusWorking, 50),
		forever,
	)
	if !taskOp(t, b, finish, tasks.Row{TaskID: "x4", Status: tasks.StatusCompleted, Result: json.RawMessage(`{}`), LastUpdatedAt: at(10)}) {
		t.Fatal("FinishTask(x4) = false")
	}
	live := func(now int64, limit int, want ...string) {
		t.Helper()
		rows, err := b.ExpiredLiveTasks(ctx, at(now), limit)
		if err != nil {
			t.Fatalf("ExpiredLiveTasks: %v", err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.TaskID)
			if r.Ref != "gen:"+r.TaskID {
				t.Errorf("ExpiredLiveTasks row %s: Ref %q", r.TaskID, r.Ref)
			}
		}
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Errorf("ExpiredLiveTasks(at(%d), %d) = %v, want %v", now, limit, sorted(got), sorted(want))
		}
	}
	live(99, 10)
	live(100, 10, "x1", "x2") // at or before now
	live(1_000_000, 10, "x1", "x2", "x3")
	if rows, err := b.ExpiredLiveTasks(ctx, at(100), 1); err != nil || len(rows) != 1 {
		t.Errorf("ExpiredLiveTasks(limit 1) = %d rows, %v; want 1", len(rows), err)
	}

	purge := func(cutoff int64, limit int) int64 {
		t.Helper()
		return do(t, b, func(ctx context.Context, tx tasks.Tx) (int64, error) { return tx.PurgeTasks(ctx, at(cutoff), limit) })
	}
	if n := purge(75, 10); n != 1 {
		t.Errorf("PurgeTasks(at(75)) = %d, want 1 (x4)", n)
	}
	if _, err := b.Task(ctx, "x4"); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("Task(x4) after purge: %v, want tasks.ErrNotFound", err)
	}
	if n := purge(200, 1); n != 1 {
		t.Errorf("PurgeTasks(at(200), limit 1) = %d, want 1", n)
	}
	if n := purge(200, 10); n != 2 {
		t.Errorf("PurgeTasks(at(200), limit 10) = %d, want the 2 left", n)
	}
	if n := purge(200, 10); n != 0 {
		t.Errorf("PurgeTasks with nothing left = %d, want 0", n)
	}
	for _, id := range []string{"x1", "x2", "x3"} {
		if _, err := b.Task(ctx, id); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("Task(%s) after purge: %v, want tasks.ErrNotFound", id, err)
		}
	}
	if _, err := b.Task(ctx, "x5"); err != nil {
		t.Errorf("a task without expiry was purged: %v", err)
	}
	live(1_000_000, 10)
}
