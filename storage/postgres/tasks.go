package postgres

import (
	"context"
	"time"

	"github.com/darkroom-mcp/darkroom/storage/postgres/pgdb"
	"github.com/darkroom-mcp/darkroom/storage/rows"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// Tasks is the task store's backend on this database.
func (d *DB) Tasks() tasks.Backend { return taskStore{d, reads{d.queries}} }

type taskStore struct {
	d *DB
	reads
}

var _ tasks.Tx = (*Tx)(nil)

func (s taskStore) Update(ctx context.Context, fn func(ctx context.Context, tx tasks.Tx) error) error {
	return s.d.Write(ctx, func(ctx context.Context, tx *Tx) error { return fn(ctx, tx) })
}

func (s taskStore) OwnedTask(ctx context.Context, owner, id string) (tasks.Row, error) {
	return read.Task(s.q.GetOwnedTask(ctx, pgdb.GetOwnedTaskParams{TaskID: id, Owner: owner}))
}

func (s taskStore) ExpiredLiveTasks(ctx context.Context, now time.Time, limit int) ([]tasks.Row, error) {
	return rows.ExpiredTasks(s.q.ExpiredLiveTasks(ctx, pgdb.ExpiredLiveTasksParams{Now: now.UnixMilli(), Lim: int64(limit)}))
}

// InsertTask is queued (pipe): it goes with the next statement or the
// commit.
func (t *Tx) InsertTask(ctx context.Context, r tasks.Row) error {
	return t.p.deferred(func() error { return t.q.InsertTask(ctx, rows.InsertTask(r)) })
}

func (t *Tx) SetTaskActive(ctx context.Context, r tasks.Row) (bool, error) {
	n, err := t.q.SetTaskActive(ctx, rows.SetTaskActive(r))
	return t.noted(chanTask, r.TaskID, n, err)
}

func (t *Tx) SetTaskAnswers(ctx context.Context, r tasks.Row) (bool, error) {
	n, err := t.q.SetTaskAnswers(ctx, rows.SetTaskAnswers(r))
	return t.noted(chanTask, r.TaskID, n, err)
}

func (t *Tx) FinishTask(ctx context.Context, r tasks.Row) (bool, error) {
	n, err := t.q.FinishTask(ctx, rows.FinishTask(r))
	return t.noted(chanTask, r.TaskID, n, err)
}

func (t *Tx) PurgeTasks(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return t.q.PurgeTasks(ctx, pgdb.PurgeTasksParams{Cutoff: cutoff.UnixMilli(), Lim: int64(limit)})
}

func (r reads) Task(ctx context.Context, id string) (tasks.Row, error) {
	return read.Task(r.q.GetTask(ctx, id))
}

func (r reads) TaskByRef(ctx context.Context, ref string) (tasks.Row, error) {
	return read.Task(r.q.GetTaskByRef(ctx, ref))
}

// TaskVersions reads the versions of the given tasks in one query
// (tasks.VersionReader: the read cache's resync); a task that is gone is
// absent.
func (s taskStore) TaskVersions(ctx context.Context, ids []string) (map[string]int64, error) {
	rs, err := s.q.TaskVersions(ctx, ids)
	return versions(rs, err, func(r pgdb.TaskVersionsRow) (string, int64) { return r.TaskID, r.Version })
}
