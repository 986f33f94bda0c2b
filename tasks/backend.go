package tasks

import (
	"context"
	"encoding/json"
	"time"
)

// Backend is the persistence tasks needs. Engines (storage/sqlite)
// implement it; tasks knows no SQL and no driver.
type Backend interface {
	// Update runs fn in one write transaction and returns once it is
	// durably committed (or fn's error; nothing of fn's is kept). fn may
	// run more than once, so it must act only through tx.
	Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	Task(ctx context.Context, id string) (Row, error) // ErrNotFound
	// OwnedTask is Task for owner's own task: ErrNotFound for an unknown
	// and a foreign id alike, at the same cost (the owner is part of the
	// lookup, so a foreign row is never read), which tasks/get relies on
	// to be no existence oracle.
	OwnedTask(ctx context.Context, owner, id string) (Row, error)
	TaskByRef(ctx context.Context, ref string) (Row, error)
	// ExpiredLiveTasks lists live tasks (ID and Ref only) whose expiry is
	// at or before now.
	ExpiredLiveTasks(ctx context.Context, now time.Time, limit int) ([]Row, error)
}

// Tx is a write transaction. The same transaction may carry the work a
// task follows (a generation's change), so that both commit together.
type Tx interface {
	Task(ctx context.Context, id string) (Row, error)
	TaskByRef(ctx context.Context, ref string) (Row, error)
	InsertTask(ctx context.Context, r Row) error
	// SetTaskActive moves a live task to working or input_required with r's
	// status, message, input requests, key sequence and poll interval;
	// false when the task is terminal.
	SetTaskActive(ctx context.Context, r Row) (bool, error)
	// SetTaskAnswers stores r's input requests, answered keys and
	// responses of an input_required task.
	SetTaskAnswers(ctx context.Context, r Row) (bool, error)
	// FinishTask moves a live task to r's terminal status with its result
	// or error: compare-and-set, false when already terminal.
	FinishTask(ctx context.Context, r Row) (bool, error)
	// PurgeTasks deletes up to limit tasks that expired before cutoff.
	PurgeTasks(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}

// Row is a task as stored, engine-neutral: JSON columns stay encoded, a
// zero time or duration is NULL, an empty Result or Error is NULL.
type Row struct {
	TaskID, Owner, Ref string
	Status             Status
	StatusMessage      string
	CreatedAt          time.Time
	LastUpdatedAt      time.Time // also the time of an update
	TTL                time.Duration
	PollInterval       time.Duration
	ExpiresAt          time.Time
	InputRequests      string // JSON key -> request
	AnsweredKeys       string // JSON []string
	InputResponses     string // JSON key -> response
	KeySeq             int64
	Result             json.RawMessage
	Error              json.RawMessage
	ClientCaps         string
	// Version only grows: the engine bumps it on every update of the row
	// (a trigger), so a cached copy is replaced only by a newer one.
	Version int64
}
