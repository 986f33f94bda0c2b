package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/internal/ids"
	"github.com/darkroom-mcp/darkroom/internal/rowcache"
)

// ErrNotFound is returned for unknown, expired and foreign tasks alike.
var ErrNotFound = errors.New("task not found")

// Store keeps tasks in a Backend. Writes take a Tx so that a task can be
// created or moved in the same transaction as the work it follows.
type Store struct {
	db     Backend
	now    func() time.Time
	broker *Broker
	cache  *rowcache.Cache[Task]
	// hits and misses count the reads the cache answered and those it
	// did not (CacheStats).
	hits, misses atomic.Uint64
	// exclusive runs a fleet-wide job on one replica at a time (nil: this
	// process is the only one).
	exclusive func(ctx context.Context, job string, fn func(context.Context) error) error
}

// StoreOption configures a Store.
type StoreOption func(*Store)

// Shared says the engine is shared with other processes (replicas on
// one PostgreSQL), whose changes reach this process only through
// NotifyVersion (its listener). The read cache still keeps every task,
// but a cached live task is served only while fresh reports true, that
// is while every change committed more than the fence window ago is
// known to have been delivered to this process (the listener's fence,
// storage/postgres Fence.Fresh); otherwise the read goes to the backend.
// An entry is replaced only by a higher version, a notification drops
// only an entry older than the version it names, FlushLive drops every
// live entry (a listener that reconnected may have lost notifications)
// and Revalidate drops the live entries whose row moved on. Terminal
// tasks can no longer change and are served always. fresh nil: live
// tasks are never served from the cache (terminal ones only).
// Without Shared (SQLite, one process) every task is served from the
// cache, which Notify keeps coherent.
func Shared(fresh func() bool) StoreOption {
	return func(s *Store) {
		s.cache.Share(fresh)
	}
}

// Exclusive makes the sweep run through fn, which runs a job only when no
// other replica is running it (e.g. under an advisory lock) and returns
// nil at once otherwise.
func Exclusive(fn func(ctx context.Context, job string, run func(context.Context) error) error) StoreOption {
	return func(s *Store) { s.exclusive = fn }
}

// NewStore returns a store; now may be nil (time.Now).
func NewStore(d Backend, now func() time.Time, opts ...StoreOption) *Store {
	if now == nil {
		now = time.Now
	}
	s := &Store{db: d, now: now, broker: newBroker(), cache: newTaskCache()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// NewID returns a new task id (see package ids).
func NewID() string { return ids.New() }

func marshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Create inserts t (assigning ID, times and a working status when unset)
// inside tx. The caller commits; nothing is visible before.
func (s *Store) Create(ctx context.Context, tx Tx, t *Task) error {
	if t.ID == "" {
		t.ID = NewID()
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now().UTC().Truncate(time.Millisecond)
	}
	t.LastUpdatedAt = t.CreatedAt
	if t.Status == "" {
		t.Status = StatusWorking
	}
	if t.PollInterval <= 0 {
		t.PollInterval = time.Second
	}
	if len(t.ClientCaps) == 0 {
		t.ClientCaps = json.RawMessage("{}")
	}
	exp := t.ExpiresAt()
	var errJSON json.RawMessage
	if t.Error != nil {
		errJSON, _ = json.Marshal(t.Error)
	}
	return tx.InsertTask(ctx, Row{
		TaskID: t.ID, Owner: t.Owner, Ref: t.Ref, Status: t.Status, StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt, LastUpdatedAt: t.LastUpdatedAt, TTL: max(t.TTL, 0), PollInterval: t.PollInterval,
		ExpiresAt: exp, InputRequests: requestsJSON(t.InputRequests), AnsweredKeys: "[]", InputResponses: "{}",
		KeySeq: t.KeySeq, Result: t.Result, Error: errJSON, ClientCaps: string(t.ClientCaps),
	})
}

// requestsJSON encodes outstanding input requests (most tasks have none:
// no encoder runs inside the writer for them).
func requestsJSON(m map[string]json.RawMessage) string {
	if len(m) == 0 {
		return "{}"
	}
	return marshal(m)
}

// fromRow decodes a row read with err (a read's error is returned as is).
func fromRow(r Row, err error) (*Task, error) {
	if err != nil {
		return nil, err
	}
	t := &Task{
		ID: r.TaskID, Owner: r.Owner, Ref: r.Ref, Status: r.Status, StatusMessage: r.StatusMessage,
		CreatedAt:     r.CreatedAt.UTC(),
		LastUpdatedAt: r.LastUpdatedAt.UTC(),
		PollInterval:  r.PollInterval,
		TTL:           r.TTL,
		KeySeq:        r.KeySeq,
		ClientCaps:    json.RawMessage(r.ClientCaps),
		Version:       r.Version,
	}
	if err := json.Unmarshal([]byte(r.InputRequests), &t.InputRequests); err != nil {
		return nil, fmt.Errorf("task %s: input requests: %w", r.TaskID, err)
	}
	if err := json.Unmarshal([]byte(r.AnsweredKeys), &t.AnsweredKeys); err != nil {
		return nil, fmt.Errorf("task %s: answered keys: %w", r.TaskID, err)
	}
	if err := json.Unmarshal([]byte(r.InputResponses), &t.InputResponses); err != nil {
		return nil, fmt.Errorf("task %s: input responses: %w", r.TaskID, err)
	}
	if len(r.Result) > 0 {
		t.Result = r.Result
	}
	if len(r.Error) > 0 {
		t.Error = &Error{}
		if err := json.Unmarshal(r.Error, t.Error); err != nil {
			return nil, fmt.Errorf("task %s: error: %w", r.TaskID, err)
		}
	}
	return t, nil
}

// Get reads a task by id (no owner check: see Lookup). The caller may
// modify the returned copy.
func (s *Store) Get(ctx context.Context, id string) (*Task, error) {
	if t, ok := s.cache.Get(id); ok {
		s.hits.Add(1)
		return &t, nil
	}
	return s.load(id, func() (Row, error) { return s.db.Task(ctx, id) })
}

// load reads a task the cache did not hold, and keeps it.
func (s *Store) load(id string, read func() (Row, error)) (*Task, error) {
	s.misses.Add(1)
	seq := s.cache.Epoch(id)
	t, err := fromRow(read())
	if err != nil {
		return nil, err
	}
	s.cache.Put(id, *t, seq)
	return t, nil
}

// CacheStats reports the task reads answered from the read cache and
// those that went to the backend, since start.
func (s *Store) CacheStats() (hits, misses uint64) { return s.hits.Load(), s.misses.Load() }

// Lookup returns the owner's live (unexpired) task, or ErrNotFound for
// unknown, foreign and expired ids alike.
//
// No existence tell: the cache answers only the owner's own lookups (a
// foreign id misses it exactly as an unknown one does), a foreign row is
// not even read (Backend.OwnedTask), and foreign reads are never cached;
// so a foreign id costs what an unknown one costs: one read that finds
// nothing.
// The owner's polling still hits the cache.
func (s *Store) Lookup(ctx context.Context, owner, id string) (*Task, error) {
	if t, ok := s.cache.GetOwned(owner, id); ok {
		s.hits.Add(1)
		if t.Expired(s.now()) {
			return nil, ErrNotFound
		}
		return &t, nil
	}
	t, err := s.load(id, func() (Row, error) {
		r, err := s.db.OwnedTask(ctx, owner, id)
		if err == nil && r.Owner != owner { // an engine that ignored the owner
			err = ErrNotFound
		}
		return r, err
	})
	if err == nil && t.Expired(s.now()) {
		return nil, ErrNotFound
	}
	return t, err
}

// GetTx reads a task inside a write transaction.
func (s *Store) GetTx(ctx context.Context, tx Tx, id string) (*Task, error) {
	return fromRow(tx.Task(ctx, id))
}

// ByRef finds the task following ref, inside tx when tx is non-nil.
func (s *Store) ByRef(ctx context.Context, tx Tx, ref string) (*Task, error) {
	if tx != nil {
		return fromRow(tx.TaskByRef(ctx, ref))
	}
	return fromRow(s.db.TaskByRef(ctx, ref))
}

// SetActive moves a live task to working or input_required with the given
// outstanding requests. It reports false when the task is already
// terminal (nothing changes).
func (s *Store) SetActive(ctx context.Context, tx Tx, t *Task, status Status, msg string) (bool, error) {
	if status.Terminal() {
		return false, fmt.Errorf("SetActive: %s is terminal; use Finish", status)
	}
	return tx.SetTaskActive(ctx, Row{
		TaskID: t.ID, Status: status, StatusMessage: msg, InputRequests: requestsJSON(t.InputRequests),
		KeySeq: t.KeySeq, PollInterval: t.PollInterval, LastUpdatedAt: s.now(),
	})
}

// Finish moves a live task to a terminal status with its result (for
// completed) or error (for failed): compare-and-set, so a task that is
// already terminal never changes and false is returned.
func (s *Store) Finish(ctx context.Context, tx Tx, id string, status Status, msg string, result json.RawMessage, terr *Error) (bool, error) {
	if !status.Terminal() {
		return false, fmt.Errorf("Finish: %s is not terminal", status)
	}
	var errJSON json.RawMessage
	if terr != nil {
		errJSON, _ = json.Marshal(terr)
	}
	return tx.FinishTask(ctx, Row{
		TaskID: id, Status: status, StatusMessage: msg, Result: result, Error: errJSON, LastUpdatedAt: s.now(),
	})
}

// AddInputRequest adds an outstanding request under a key unique for the
// task's lifetime (prefix + sequence number) and returns the key.
func (t *Task) AddInputRequest(prefix string, req any) string {
	t.KeySeq++
	key := fmt.Sprintf("%s_%d", prefix, t.KeySeq)
	b, _ := json.Marshal(req)
	if t.InputRequests == nil {
		t.InputRequests = map[string]json.RawMessage{}
	}
	t.InputRequests[key] = b
	return key
}

// answer records responses for outstanding keys inside one write
// transaction, removing them from InputRequests before the ack, so the
// very next tasks/get lists only what is still pending. Keys that are not
// outstanding are ignored. It returns the task after the change and the
// answers taken.
func (s *Store) answer(ctx context.Context, owner, id string, responses map[string]json.RawMessage) (*Task, map[string]json.RawMessage, error) {
	var t *Task
	var taken map[string]json.RawMessage
	err := s.db.Update(ctx, func(ctx context.Context, tx Tx) error {
		taken = nil
		r, err := tx.Task(ctx, id)
		if err != nil {
			return err
		}
		if r.Owner != owner { // refused undecoded, as an unknown id is
			return ErrNotFound
		}
		if t, err = fromRow(r, nil); err != nil {
			return err
		}
		if t.Expired(s.now()) {
			return ErrNotFound
		}
		if t.Status != StatusInputRequired {
			return nil
		}
		taken = map[string]json.RawMessage{}
		for k, v := range responses {
			if _, ok := t.InputRequests[k]; !ok || slices.Contains(t.AnsweredKeys, k) {
				continue
			}
			delete(t.InputRequests, k)
			t.AnsweredKeys = append(t.AnsweredKeys, k)
			if t.InputResponses == nil {
				t.InputResponses = map[string]json.RawMessage{}
			}
			t.InputResponses[k] = v
			taken[k] = v
		}
		if len(taken) == 0 {
			return nil
		}
		_, err = tx.SetTaskAnswers(ctx, Row{
			TaskID: id, InputRequests: requestsJSON(t.InputRequests), AnsweredKeys: marshal(t.AnsweredKeys),
			InputResponses: marshal(t.InputResponses), LastUpdatedAt: s.now(),
		})
		return err
	})
	return t, taken, err
}

// Notify tells listeners (and the read cache) that task id changed. Every
// write that changes a task must call it after its commit.
func (s *Store) Notify(id string) {
	s.cache.Invalidate(id)
	s.broker.publish(id)
}

// NotifyVersion is Notify for a change another process committed (a
// shared engine's listener): the task is now at version (negative:
// unknown). A cached copy at that version or above stays; an older one
// is dropped.
func (s *Store) NotifyVersion(id string, version int64) {
	s.cache.InvalidateBelow(id, version)
	s.broker.publish(id)
}

// NotifyAll tells every listener to re-read its tasks: a resync after
// changes on other replicas whose notifications may have been lost.
// (The read cache's part of a resync is Revalidate.)
func (s *Store) NotifyAll() { s.broker.publishAll() }

// FlushLive drops every cached live task: a shared engine's listener
// calls it after each (re)connect, once it listens again, since what was
// sent while it did not is lost. Terminal tasks stay (they cannot change).
func (s *Store) FlushLive() { s.cache.FlushLive() }

// VersionReader is a Backend that reads the versions of many tasks in one
// query (PostgreSQL's), for Revalidate.
type VersionReader interface {
	TaskVersions(ctx context.Context, ids []string) (map[string]int64, error)
}

// Revalidate reads the versions of the cached live tasks (one query per
// 10,000) and drops each entry whose row has moved on or is gone: on a
// shared engine it bounds what a notification lost without a reconnect
// costs, by the resync interval it runs at. It does nothing without
// Shared or when the backend is no VersionReader.
func (s *Store) Revalidate(ctx context.Context) error {
	vr, ok := s.db.(VersionReader)
	if !ok {
		return nil
	}
	return s.cache.Revalidate(ctx, vr.TaskVersions)
}

// newTaskCache is the task read cache (caches.TaskRows), so that polling
// (tasks/get every few seconds from every client) does not touch the
// database between changes. Within one process Notify drops an entry
// after each committed change; on a shared engine (Shared) see package
// rowcache for what more it does.
func newTaskCache() *rowcache.Cache[Task] {
	return rowcache.New(rowcache.Config[Task]{
		Cache:   caches.TaskRows,
		Size:    (*Task).size,
		Version: func(t *Task) int64 { return t.Version },
		Live:    func(t *Task) bool { return !t.Status.Terminal() },
		Owner:   func(t *Task) string { return t.Owner },
	})
}

// taskOverhead approximates a Task's fixed size (fields, a map slot).
const taskOverhead = 300

// size approximates the memory a Task holds, for the cache's bound.
func (t *Task) size() int {
	n := taskOverhead + len(t.ID) + len(t.Owner) + len(t.Ref) + len(t.StatusMessage) + len(t.Result) + len(t.ClientCaps)
	for k, v := range t.InputRequests {
		n += len(k) + len(v)
	}
	for k, v := range t.InputResponses {
		n += len(k) + len(v)
	}
	for _, k := range t.AnsweredKeys {
		n += len(k)
	}
	if t.Error != nil {
		n += len(t.Error.Message) + len(t.Error.Data) + 64
	}
	return n
}

// Write runs fn in a write transaction (a convenience for kinds that keep
// no rows of their own) and notifies listeners of the given task after
// commit.
func (s *Store) Write(ctx context.Context, id string, fn func(ctx context.Context, tx Tx) error) error {
	if err := s.db.Update(ctx, fn); err != nil {
		return err
	}
	s.Notify(id)
	return nil
}
