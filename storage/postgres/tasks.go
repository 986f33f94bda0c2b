package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/darkroom-mcp/darkroom/storage/postgres/pgdb"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Tasks is the task store's backend on this database.
func (d *DB) Tasks() tasks.Backend { return taskStore{d} }

type taskStore struct{ d *DB }

var _ tasks.Tx = (*Tx)(nil)

func (s taskStore) Update(ctx context.Context, fn func(ctx context.Context, tx tasks.Tx) error) error {
	return s.d.Write(ctx, func(ctx context.Context, tx *Tx) error { return fn(ctx, tx) })
}

func (s taskStore) Task(ctx context.Context, id string) (tasks.Row, error) {
	return taskRow(s.d.queries.GetTask(ctx, id))
}

func (s taskStore) OwnedTask(ctx context.Context, owner, id string) (tasks.Row, error) {
	return taskRow(s.d.queries.GetOwnedTask(ctx, pgdb.GetOwnedTaskParams{TaskID: id, Owner: owner}))
}

func (s taskStore) TaskByRef(ctx context.Context, ref string) (tasks.Row, error) {
	return taskRow(s.d.queries.GetTaskByRef(ctx, ref))
}

func (s taskStore) ExpiredLiveTasks(ctx context.Context, now time.Time, limit int) ([]tasks.Row, error) {
	rows, err := s.d.queries.ExpiredLiveTasks(ctx, pgdb.ExpiredLiveTasksParams{Now: now.UnixMilli(), Lim: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]tasks.Row, len(rows))
	for i, r := range rows {
		out[i] = tasks.Row{TaskID: r.TaskID, Ref: r.Ref}
	}
	return out, nil
}

func (t *Tx) Task(ctx context.Context, id string) (tasks.Row, error) {
	return taskRow(t.q.GetTask(ctx, id))
}

func (t *Tx) TaskByRef(ctx context.Context, ref string) (tasks.Row, error) {
	return taskRow(t.q.GetTaskByRef(ctx, ref))
}

func (t *Tx) InsertTask(ctx context.Context, r tasks.Row) error {
	return t.q.InsertTask(ctx, pgdb.InsertTaskParams{
		TaskID: r.TaskID, Owner: r.Owner, Ref: r.Ref, Status: string(r.Status), StatusMessage: r.StatusMessage,
		CreatedAt: r.CreatedAt.UnixMilli(), LastUpdatedAt: r.LastUpdatedAt.UnixMilli(),
		TtlMs: nullDuration(r.TTL), PollIntervalMs: r.PollInterval.Milliseconds(), ExpiresAt: nullTime(r.ExpiresAt),
		InputRequests: r.InputRequests, KeySeq: r.KeySeq, Result: nullJSON(r.Result), Error: nullJSON(r.Error), ClientCaps: r.ClientCaps,
	})
}

func (t *Tx) SetTaskActive(ctx context.Context, r tasks.Row) (bool, error) {
	n, err := t.q.SetTaskActive(ctx, pgdb.SetTaskActiveParams{
		TaskID: r.TaskID, Status: string(r.Status), StatusMessage: r.StatusMessage, InputRequests: r.InputRequests,
		KeySeq: r.KeySeq, PollIntervalMs: r.PollInterval.Milliseconds(), Now: r.LastUpdatedAt.UnixMilli(),
	})
	if n == 1 {
		t.note(chanTask, r.TaskID)
	}
	return n == 1, err
}

func (t *Tx) SetTaskAnswers(ctx context.Context, r tasks.Row) (bool, error) {
	n, err := t.q.SetTaskAnswers(ctx, pgdb.SetTaskAnswersParams{
		TaskID: r.TaskID, InputRequests: r.InputRequests, AnsweredKeys: r.AnsweredKeys,
		InputResponses: r.InputResponses, Now: r.LastUpdatedAt.UnixMilli(),
	})
	if n == 1 {
		t.note(chanTask, r.TaskID)
	}
	return n == 1, err
}

func (t *Tx) FinishTask(ctx context.Context, r tasks.Row) (bool, error) {
	n, err := t.q.FinishTask(ctx, pgdb.FinishTaskParams{
		TaskID: r.TaskID, Status: string(r.Status), StatusMessage: r.StatusMessage,
		Result: nullJSON(r.Result), Error: nullJSON(r.Error), Now: r.LastUpdatedAt.UnixMilli(),
	})
	if n == 1 {
		t.note(chanTask, r.TaskID)
	}
	return n == 1, err
}

func (t *Tx) PurgeTasks(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return t.q.PurgeTasks(ctx, pgdb.PurgeTasksParams{Cutoff: cutoff.UnixMilli(), Lim: int32(limit)})
}

func taskRow(r pgdb.Task, err error) (tasks.Row, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return tasks.Row{}, tasks.ErrNotFound
	}
	if err != nil {
		return tasks.Row{}, err
	}
	out := tasks.Row{
		TaskID: r.TaskID, Owner: r.Owner, Ref: r.Ref, Status: tasks.Status(r.Status), StatusMessage: r.StatusMessage,
		CreatedAt: time.UnixMilli(r.CreatedAt), LastUpdatedAt: time.UnixMilli(r.LastUpdatedAt),
		PollInterval: time.Duration(r.PollIntervalMs) * time.Millisecond, ExpiresAt: fromNull(r.ExpiresAt),
		InputRequests: r.InputRequests, AnsweredKeys: r.AnsweredKeys, InputResponses: r.InputResponses,
		KeySeq: r.KeySeq, ClientCaps: r.ClientCaps,
	}
	if r.TtlMs.Valid {
		out.TTL = time.Duration(r.TtlMs.Int64) * time.Millisecond
	}
	if r.Result.Valid {
		out.Result = json.RawMessage(r.Result.String)
	}
	if r.Error.Valid {
		out.Error = json.RawMessage(r.Error.String)
	}
	return out, nil
}

func nullDuration(d time.Duration) pgtype.Int8 {
	return pgtype.Int8{Int64: d.Milliseconds(), Valid: d > 0}
}

func nullJSON(b json.RawMessage) pgtype.Text {
	return pgtype.Text{String: string(b), Valid: len(b) > 0}
}
