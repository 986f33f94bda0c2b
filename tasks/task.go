// Package tasks implements the MCP Tasks extension
// (io.modelcontextprotocol/tasks, protocol 2026-07-28): the task model and
// its compare-and-set state machine over SQL, negotiation checks, the
// tasks/get, tasks/update and tasks/cancel methods, notifications/tasks on
// subscriptions/listen, and TTL sweeping.
//
// It knows nothing of images: a task points at the work it follows through
// an opaque ref ("kind:id"), and a Kind registered for that prefix decides
// what cancel, update and the completed result mean.
package tasks

import (
	"encoding/json"
	"time"
)

// ExtensionID names the extension in capabilities.extensions.
const ExtensionID = "io.modelcontextprotocol/tasks"

// Status is a task's state.
type Status string

const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Terminal reports whether s can never change again.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Error is a JSON-RPC error object, the payload of a failed task.
type Error struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Task is the durable record.
type Task struct {
	ID            string
	Owner         string
	Ref           string
	Status        Status
	StatusMessage string
	CreatedAt     time.Time
	LastUpdatedAt time.Time
	TTL           time.Duration // 0: unlimited
	PollInterval  time.Duration
	// InputRequests are the outstanding requests, by key.
	InputRequests map[string]json.RawMessage
	// Answered keys are never reused; InputResponses holds answers until
	// the kind consumes them.
	AnsweredKeys   []string
	InputResponses map[string]json.RawMessage
	KeySeq         int64
	Result         json.RawMessage // completed
	Error          *Error          // failed
	// ClientCaps are the creating request's declared client capabilities:
	// input kinds are only emitted if declared there.
	ClientCaps json.RawMessage
	// Version is the row's version (Row.Version): it only grows.
	Version int64
}

// ExpiresAt is when the task may be forgotten (zero: never).
func (t *Task) ExpiresAt() time.Time {
	if t.TTL == 0 {
		return time.Time{}
	}
	return t.CreatedAt.Add(t.TTL)
}

// Expired reports whether the task is past its TTL at now.
func (t *Task) Expired(now time.Time) bool {
	e := t.ExpiresAt()
	return !e.IsZero() && !now.Before(e)
}

// wireTask is the flat Task shape shared by CreateTaskResult, tasks/get
// and notifications/tasks.
type wireTask struct {
	ResultType     string                     `json:"resultType,omitempty"`
	TaskID         string                     `json:"taskId"`
	Status         Status                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage,omitempty"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          *int64                     `json:"ttlMs"` // null: unlimited
	PollIntervalMs int64                      `json:"pollIntervalMs,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          *Error                     `json:"error,omitempty"`
	Meta           json.RawMessage            `json:"_meta,omitempty"`
}

func isoTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (t *Task) wire(resultType string) wireTask {
	w := wireTask{
		ResultType:     resultType,
		TaskID:         t.ID,
		Status:         t.Status,
		StatusMessage:  t.StatusMessage,
		CreatedAt:      isoTime(t.CreatedAt),
		LastUpdatedAt:  isoTime(t.LastUpdatedAt),
		PollIntervalMs: max(t.PollInterval.Milliseconds(), 1),
	}
	if t.TTL > 0 {
		ms := t.TTL.Milliseconds()
		w.TTLMs = &ms
	}
	return w
}

// detailed adds the status-specific fields of a DetailedTask.
func (t *Task) detailed(result json.RawMessage) wireTask {
	w := t.wire("complete")
	switch t.Status {
	case StatusInputRequired:
		w.InputRequests = t.InputRequests
		if w.InputRequests == nil {
			w.InputRequests = map[string]json.RawMessage{}
		}
	case StatusCompleted:
		w.Result = result
	case StatusFailed:
		w.Error = t.Error
		if w.Error == nil {
			w.Error = &Error{Code: -32603, Message: "task failed"}
		}
	}
	return w
}
