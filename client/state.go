package client

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	_ "modernc.org/sqlite" // driver "sqlite"
)

// Local statuses beyond the server's: the client stopped following the
// task. Neither is listed by Pending.
const (
	statusLost    = "lost"    // the server no longer knows the task
	statusExpired = "expired" // createdAt + ttlMs passed before it ended
)

// keepDone is how long finished tasks stay in the state file.
const keepDone = 7 * 24 * time.Hour

const schema = `
CREATE TABLE IF NOT EXISTS tasks (
	task_id          TEXT PRIMARY KEY,
	endpoint         TEXT NOT NULL DEFAULT '',
	tool             TEXT NOT NULL DEFAULT '',
	args             TEXT NOT NULL DEFAULT 'null',
	created_at_ms    INTEGER NOT NULL DEFAULT 0, -- server's createdAt, unix ms
	ttl_ms           INTEGER,                    -- NULL: unlimited
	poll_interval_ms INTEGER NOT NULL DEFAULT 0, -- the latest suggestion
	status           TEXT NOT NULL,
	status_message   TEXT NOT NULL DEFAULT '',
	done             INTEGER NOT NULL DEFAULT 0, -- terminal, lost or expired
	updated_at_ms    INTEGER NOT NULL            -- local clock, unix ms
);
CREATE INDEX IF NOT EXISTS tasks_done ON tasks (done, updated_at_ms);
CREATE TABLE IF NOT EXISTS answered_keys (
	task_id        TEXT NOT NULL,
	key            TEXT NOT NULL,
	answered_at_ms INTEGER NOT NULL,
	PRIMARY KEY (task_id, key)
);
`

// state is the client's SQLite record of the tasks it follows.
type state struct {
	db *sql.DB
}

func openState(path string) (*state, error) {
	dsn := ":memory:"
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("client: state directory: %w", err)
		}
		dsn = "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("client: open state %s: %w", path, err)
	}
	// One connection: writes are serialised in-process (and an in-memory
	// database lives exactly as long as its connection).
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("client: state schema %s: %w", path, err)
	}
	s := &state{db: db}
	if err := s.prune(ctx, time.Now()); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func (s *state) close() error { return s.db.Close() }

// detach keeps the record of a task from being lost to a caller's
// cancellation at the wrong moment (say, just after the CreateTaskResult
// arrived): local SQLite statements are short, and busy_timeout bounds
// waiting for another process's lock.
func detach(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

func (s *state) prune(ctx context.Context, now time.Time) error {
	cutoff := now.Add(-keepDone).UnixMilli()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM tasks WHERE done = 1 AND updated_at_ms < ?`, cutoff); err != nil {
		return fmt.Errorf("client: prune state: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM answered_keys WHERE task_id NOT IN (SELECT task_id FROM tasks)`); err != nil {
		return fmt.Errorf("client: prune state: %w", err)
	}
	return nil
}

func nullTTL(t *DetailedTask) sql.NullInt64 {
	if t.TTLMs == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: *t.TTLMs, Valid: true}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// created records a task just returned by tools/call.
func (s *state) created(ctx context.Context, endpoint, tool string, args json.RawMessage, t *DetailedTask) error {
	ctx = detach(ctx)
	_, err := s.db.ExecContext(ctx, `
INSERT INTO tasks (task_id, endpoint, tool, args, created_at_ms, ttl_ms, poll_interval_ms, status, status_message, done, updated_at_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (task_id) DO UPDATE SET endpoint = excluded.endpoint, tool = excluded.tool, args = excluded.args,
	created_at_ms = excluded.created_at_ms, ttl_ms = excluded.ttl_ms, poll_interval_ms = excluded.poll_interval_ms,
	status = excluded.status, status_message = excluded.status_message, done = excluded.done, updated_at_ms = excluded.updated_at_ms`,
		t.TaskID, endpoint, tool, string(args), t.CreatedAt.UnixMilli(), nullTTL(t), t.PollIntervalMs,
		string(t.Status), t.StatusMessage, boolInt(t.Status.Terminal()), time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("client: record task %s: %w", t.TaskID, err)
	}
	return nil
}

// observe records the latest state of a task (adding it when the client
// follows a task it did not create).
func (s *state) observe(ctx context.Context, endpoint string, t *DetailedTask) error {
	ctx = detach(ctx)
	_, err := s.db.ExecContext(ctx, `
INSERT INTO tasks (task_id, endpoint, created_at_ms, ttl_ms, poll_interval_ms, status, status_message, done, updated_at_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (task_id) DO UPDATE SET endpoint = excluded.endpoint, created_at_ms = excluded.created_at_ms,
	ttl_ms = excluded.ttl_ms, poll_interval_ms = excluded.poll_interval_ms, status = excluded.status,
	status_message = excluded.status_message, done = excluded.done, updated_at_ms = excluded.updated_at_ms`,
		t.TaskID, endpoint, t.CreatedAt.UnixMilli(), nullTTL(t), t.PollIntervalMs,
		string(t.Status), t.StatusMessage, boolInt(t.Status.Terminal()), time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("client: record task %s: %w", t.TaskID, err)
	}
	return nil
}

// abandon marks a task the client stops following (lost or expired).
func (s *state) abandon(ctx context.Context, taskID, status, msg string) error {
	ctx = detach(ctx)
	_, err := s.db.ExecContext(ctx, `UPDATE tasks SET status = ?, status_message = ?, done = 1, updated_at_ms = ? WHERE task_id = ?`,
		status, msg, time.Now().UnixMilli(), taskID)
	if err != nil {
		return fmt.Errorf("client: record task %s: %w", taskID, err)
	}
	return nil
}

// answered returns the input keys already answered for a task.
func (s *state) answered(ctx context.Context, taskID string) (map[string]bool, error) {
	ctx = detach(ctx)
	rows, err := s.db.QueryContext(ctx, `SELECT key FROM answered_keys WHERE task_id = ?`, taskID)
	if err != nil {
		return nil, fmt.Errorf("client: read answered keys: %w", err)
	}
	defer rows.Close()
	keys := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys[k] = true
	}
	return keys, rows.Err()
}

// addAnswered records keys whose answers the server acknowledged.
func (s *state) addAnswered(ctx context.Context, taskID string, keys []string) error {
	ctx = detach(ctx)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("client: record answered keys: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	now := time.Now().UnixMilli()
	for _, k := range keys {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO answered_keys (task_id, key, answered_at_ms) VALUES (?, ?, ?)`, taskID, k, now); err != nil {
			return fmt.Errorf("client: record answered keys: %w", err)
		}
	}
	return tx.Commit()
}

// PendingTask is an unfinished task recorded in the state file.
type PendingTask struct {
	TaskID string
	// Endpoint is the MCP endpoint the task was last followed on.
	Endpoint string
	// Tool and Args are the tools/call that created the task (empty for
	// a task only ever followed with Wait).
	Tool           string
	Args           json.RawMessage
	CreatedAt      time.Time
	TTLMs          *int64
	PollIntervalMs int64
	Status         Status
	StatusMessage  string
	// AnsweredKeys are the input keys already answered.
	AnsweredKeys []string
}

// row is a task's record, as Wait starts from.
type row struct {
	createdAt    time.Time
	ttlMs        *int64
	pollInterval int64
}

func (s *state) get(ctx context.Context, taskID string) (*row, error) {
	ctx = detach(ctx)
	var created, poll int64
	var ttl sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT created_at_ms, ttl_ms, poll_interval_ms FROM tasks WHERE task_id = ?`, taskID).Scan(&created, &ttl, &poll)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: read state: %w", err)
	}
	r := &row{pollInterval: poll}
	if created != 0 {
		r.createdAt = time.UnixMilli(created)
	}
	if ttl.Valid {
		v := ttl.Int64
		r.ttlMs = &v
	}
	return r, nil
}

func (s *state) pending(ctx context.Context) ([]PendingTask, error) {
	rows, err := s.db.QueryContext(ctx, `
SELECT task_id, endpoint, tool, args, created_at_ms, ttl_ms, poll_interval_ms, status, status_message
FROM tasks WHERE done = 0 ORDER BY created_at_ms, task_id`)
	if err != nil {
		return nil, fmt.Errorf("client: read state: %w", err)
	}
	var out []PendingTask
	for rows.Next() {
		var p PendingTask
		var args, status string
		var created int64
		var ttl sql.NullInt64
		if err := rows.Scan(&p.TaskID, &p.Endpoint, &p.Tool, &args, &created, &ttl, &p.PollIntervalMs, &status, &p.StatusMessage); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("client: read state: %w", err)
		}
		p.Args = json.RawMessage(args)
		p.Status = Status(status)
		if created != 0 {
			p.CreatedAt = time.UnixMilli(created).UTC()
		}
		if ttl.Valid {
			v := ttl.Int64
			p.TTLMs = &v
		}
		out = append(out, p)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		keys, err := s.answered(ctx, out[i].TaskID)
		if err != nil {
			return nil, err
		}
		for k := range keys {
			out[i].AnsweredKeys = append(out[i].AnsweredKeys, k)
		}
		sort.Strings(out[i].AnsweredKeys)
	}
	return out, nil
}
