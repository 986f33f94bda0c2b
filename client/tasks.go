package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"
)

const (
	// minPollInterval keeps a server's tiny suggestion from becoming a
	// busy loop.
	minPollInterval = 10 * time.Millisecond
	// maxPollFailures bounds consecutive transient failures (network
	// errors, broken streams, 5xx) while polling; they are retried with
	// backoff, so a server restart is ridden out.
	maxPollFailures = 6
	// maxBackoff caps the wait after a transient failure.
	maxBackoff = 30 * time.Second
)

// CallTool calls a tool and returns what it came to. A synchronous answer
// is returned as is; input_required rounds are answered through OnInput;
// a task is recorded in the state file and waited for (see Wait).
func (c *Client) CallTool(ctx context.Context, name string, args any) (*Outcome, error) {
	o, created, err := c.start(ctx, name, args)
	if err != nil || created == nil {
		return o, err
	}
	return c.wait(ctx, created.TaskID, created)
}

// Start is CallTool without the waiting: when the server creates a task,
// the task is recorded in the state file and returned (Outcome.TaskID and
// Outcome.Task set, Result nil); follow it with Wait, WaitByNotifications
// or, after a restart, Resume.
func (c *Client) Start(ctx context.Context, name string, args any) (*Outcome, error) {
	o, _, err := c.start(ctx, name, args)
	return o, err
}

func (c *Client) start(ctx context.Context, name string, args any) (*Outcome, *DetailedTask, error) {
	rawArgs := json.RawMessage(`{}`)
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, nil, fmt.Errorf("client: encode arguments for %s: %w", name, err)
		}
		rawArgs = b
	}
	params := map[string]any{"name": name, "arguments": rawArgs}
	for round := 0; ; round++ {
		res, err := c.call(ctx, "tools/call", name, params)
		if err != nil {
			return nil, nil, err
		}
		rt, err := resultType(res)
		if err != nil {
			return nil, nil, err
		}
		switch rt {
		case "complete":
			return &Outcome{Result: res}, nil, nil
		case "task":
			t, err := decodeCreateTask(res)
			if err != nil {
				return nil, nil, err
			}
			c.log.Debug("client: task created", "tool", name, "task", t.TaskID, "status", t.Status, "pollIntervalMs", t.PollIntervalMs)
			if err := c.state.created(ctx, c.endpoint, name, rawArgs, t); err != nil {
				return &Outcome{TaskID: t.TaskID, Task: t}, nil, err
			}
			return &Outcome{TaskID: t.TaskID, Task: t}, t, nil
		case "input_required":
			if round+1 >= c.opts.MaxInputRounds {
				return nil, nil, fmt.Errorf("client: %s still asks for input after %d rounds", name, round+1)
			}
			var ir struct {
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
				RequestState  json.RawMessage            `json:"requestState"`
			}
			if err := json.Unmarshal(res, &ir); err != nil {
				return nil, nil, protocolErr("input_required result: %v", err)
			}
			if len(ir.InputRequests) == 0 && len(ir.RequestState) == 0 {
				return nil, nil, protocolErr("input_required result has neither inputRequests nor requestState")
			}
			responses := map[string]json.RawMessage{}
			for _, key := range sortedKeys(ir.InputRequests, nil) {
				resp, err := c.input(ctx, "", key, ir.InputRequests[key])
				if err != nil {
					return nil, nil, err
				}
				responses[key] = resp
			}
			// The retry is the original request with a new id, this
			// round's answers and the state echoed exactly.
			params = map[string]any{"name": name, "arguments": rawArgs, "inputResponses": responses}
			if len(ir.RequestState) > 0 && string(ir.RequestState) != "null" {
				params["requestState"] = ir.RequestState
			}
		default:
			return nil, nil, protocolErr("tools/call %s answered unknown resultType %q", name, rt)
		}
	}
}

// input asks OnInput for one answer.
func (c *Client) input(ctx context.Context, taskID, key string, req json.RawMessage) (json.RawMessage, error) {
	if c.opts.OnInput == nil {
		return nil, fmt.Errorf("%w (task %q, key %q)", ErrNoInputHandler, taskID, key)
	}
	resp, err := c.opts.OnInput(ctx, taskID, key, req)
	if err != nil {
		return nil, fmt.Errorf("client: answer input %q (task %q): %w", key, taskID, err)
	}
	if !json.Valid(resp) {
		return nil, fmt.Errorf("client: OnInput answer for %q is not JSON", key)
	}
	return resp, nil
}

func sortedKeys(m map[string]json.RawMessage, skip map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if !skip[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// decodeCreateTask checks and decodes a CreateTaskResult, which must be
// flat: the task's fields at the top level of the result.
func decodeCreateTask(res json.RawMessage) (*DetailedTask, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(res, &top); err != nil {
		return nil, protocolErr("CreateTaskResult is not an object")
	}
	if _, ok := top["taskId"]; !ok {
		if _, nested := top["task"]; nested {
			return nil, protocolErr("CreateTaskResult is not flat: the task is nested under \"task\" (the 2025-11-25 shape)")
		}
		return nil, protocolErr("CreateTaskResult has no top-level taskId")
	}
	return decodeTask(res)
}

// decodeTask decodes and checks a flat task.
func decodeTask(raw json.RawMessage) (*DetailedTask, error) {
	var t DetailedTask
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, protocolErr("task: %v", err)
	}
	if t.TaskID == "" {
		return nil, protocolErr("task has no taskId")
	}
	if !t.Status.known() {
		return nil, protocolErr("task %s has unknown status %q", t.TaskID, t.Status)
	}
	return &t, nil
}

// getTask is one tasks/get.
func (c *Client) getTask(ctx context.Context, taskID string) (*DetailedTask, error) {
	res, err := c.call(ctx, "tasks/get", taskID, map[string]any{"taskId": taskID})
	if err != nil {
		var re *RPCError
		if errors.As(err, &re) && re.Code == CodeInvalidParams {
			return nil, fmt.Errorf("%w: %s: %w", ErrTaskNotFound, taskID, re)
		}
		return nil, err
	}
	if err := expectComplete(res, "tasks/get"); err != nil {
		return nil, err
	}
	t, err := decodeTask(res)
	if err != nil {
		return nil, err
	}
	if t.TaskID != taskID {
		return nil, protocolErr("tasks/get %s answered task %s", taskID, t.TaskID)
	}
	return t, nil
}

// Get is one tasks/get: the task as the server sees it now.
func (c *Client) Get(ctx context.Context, taskID string) (*DetailedTask, error) {
	t, err := c.getTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if err := c.state.observe(ctx, c.endpoint, t); err != nil {
		c.log.Warn("client: state", "err", err)
	}
	return t, nil
}

// Cancel asks the server to cancel a task (tasks/cancel). The server only
// acknowledges: the task may still end completed or failed; Wait shows how
// it ended. Cancelling a task that already ended is not an error.
func (c *Client) Cancel(ctx context.Context, taskID string) error {
	res, err := c.call(ctx, "tasks/cancel", taskID, map[string]any{"taskId": taskID})
	if err != nil {
		return err
	}
	return expectComplete(res, "tasks/cancel")
}

// Wait polls a task with tasks/get until it ends, honouring the latest
// pollIntervalMs (DefaultPollInterval when absent) and 429 Retry-After.
// Input the task asks for is answered through OnInput and tasks/update,
// each key once (answered keys are kept in the state file). It returns
// the CallToolResult when the task completed (a tool error is a completed
// task with isError:true), a *TaskFailedError when it failed, ErrCancelled
// when it was cancelled (both with the Outcome still set), and ErrExpired
// when createdAt + ttlMs passed first.
func (c *Client) Wait(ctx context.Context, taskID string) (*Outcome, error) {
	return c.wait(ctx, taskID, nil)
}

func (c *Client) wait(ctx context.Context, taskID string, last *DetailedTask) (*Outcome, error) {
	t, err := c.poll(ctx, taskID, last)
	if err != nil {
		return nil, err
	}
	return outcomeOf(t)
}

// outcomeOf turns a terminal task into what Wait returns.
func outcomeOf(t *DetailedTask) (*Outcome, error) {
	o := &Outcome{TaskID: t.TaskID, Task: t}
	switch t.Status {
	case StatusCompleted:
		if len(t.Result) == 0 {
			return o, protocolErr("task %s completed without a result", t.TaskID)
		}
		if err := expectComplete(t.Result, "task result"); err != nil {
			return o, err
		}
		o.Result = t.Result
		return o, nil
	case StatusFailed:
		e := t.Error
		if e == nil {
			e = &RPCError{Code: CodeInternalError, Message: "task failed without an error: " + t.StatusMessage}
		}
		return o, &TaskFailedError{TaskID: t.TaskID, Err: e}
	case StatusCancelled:
		return o, fmt.Errorf("task %s: %w", t.TaskID, ErrCancelled)
	}
	return o, fmt.Errorf("client: task %s is not terminal (%s)", t.TaskID, t.Status)
}

// follower tracks what polling needs to know about one task.
type follower struct {
	c        *Client
	taskID   string
	interval time.Duration
	deadline time.Time // zero: none
	answered map[string]bool
	told     string // the status and message last given to OnProgress
}

func (c *Client) follower(ctx context.Context, taskID string) (*follower, error) {
	answered, err := c.state.answered(ctx, taskID)
	if err != nil {
		return nil, err
	}
	f := &follower{c: c, taskID: taskID, interval: DefaultPollInterval, answered: answered}
	r, err := c.state.get(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if r != nil {
		if r.pollInterval > 0 {
			f.interval = time.Duration(r.pollInterval) * time.Millisecond
		}
		if r.ttlMs != nil && !r.createdAt.IsZero() {
			f.deadline = r.createdAt.Add(time.Duration(*r.ttlMs) * time.Millisecond)
		}
	}
	return f, nil
}

// see takes in the latest state of the task: records it, and adopts its
// poll interval and deadline.
func (f *follower) see(ctx context.Context, t *DetailedTask) {
	f.interval = max(t.PollInterval(), minPollInterval)
	f.deadline = t.ExpiresAt()
	if err := f.c.state.observe(ctx, f.c.endpoint, t); err != nil {
		f.c.log.Warn("client: state", "task", t.TaskID, "err", err)
	}
	if key := string(t.Status) + "\x00" + t.StatusMessage; f.c.opts.OnProgress != nil && key != f.told {
		f.told = key
		f.c.opts.OnProgress(t)
	}
}

// answer answers the outstanding input requests not answered before, in
// one tasks/update, and records the keys once the server acknowledged.
func (f *follower) answer(ctx context.Context, t *DetailedTask) error {
	keys := sortedKeys(t.InputRequests, f.answered)
	if len(keys) == 0 {
		return nil // answered already; the server has not caught up yet
	}
	if f.c.opts.OnInput == nil {
		return blocked(t, fmt.Errorf("%w (keys %q)", ErrNoInputHandler, keys))
	}
	responses := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		resp, err := f.c.input(ctx, t.TaskID, k, t.InputRequests[k])
		if err != nil {
			return err
		}
		responses[k] = resp
	}
	res, err := f.c.call(ctx, "tasks/update", t.TaskID, map[string]any{"taskId": t.TaskID, "inputResponses": responses})
	if err != nil {
		return err
	}
	if err := expectComplete(res, "tasks/update"); err != nil {
		return err
	}
	for _, k := range keys {
		f.answered[k] = true
	}
	f.c.log.Debug("client: answered input", "task", t.TaskID, "keys", keys)
	if err := f.c.state.addAnswered(ctx, t.TaskID, keys); err != nil {
		f.c.log.Warn("client: state", "task", t.TaskID, "err", err)
	}
	return nil
}

// stuck is a *BlockedError when Options.Blocked says the live task t
// waits for what this client cannot give.
func (f *follower) stuck(t *DetailedTask) error {
	if t.Status.Terminal() || f.c.opts.Blocked == nil || !f.c.opts.Blocked(t) {
		return nil
	}
	return blocked(t, nil)
}

func blocked(t *DetailedTask, err error) error {
	return &BlockedError{TaskID: t.TaskID, Status: t.Status, StatusMessage: t.StatusMessage, Err: err}
}

// expired records that the task outlived its TTL.
func (f *follower) expired(ctx context.Context) error {
	if err := f.c.state.abandon(ctx, f.taskID, statusExpired, "gave up: createdAt + ttlMs passed"); err != nil {
		f.c.log.Warn("client: state", "task", f.taskID, "err", err)
	}
	return fmt.Errorf("task %s: %w", f.taskID, ErrExpired)
}

// lost records that the server no longer knows the task.
func (f *follower) lost(ctx context.Context, err error) error {
	if serr := f.c.state.abandon(ctx, f.taskID, statusLost, err.Error()); serr != nil {
		f.c.log.Warn("client: state", "task", f.taskID, "err", serr)
	}
	return err
}

// transient reports whether a failed request is worth repeating: the
// network, a broken stream or a 5xx, never a JSON-RPC or protocol error.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var re *RPCError
	if errors.As(err, &re) || errors.Is(err, ErrProtocol) || errors.Is(err, ErrTaskNotFound) {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.StatusCode >= 500 || he.StatusCode == http.StatusRequestTimeout
	}
	return true
}

// backoff is the wait after n consecutive transient failures: the poll
// interval doubled n times, at most maxBackoff.
func backoff(interval time.Duration, n int) time.Duration {
	d := max(interval, minPollInterval)
	for range n {
		if d >= maxBackoff/2 {
			return maxBackoff
		}
		d *= 2
	}
	return min(d, maxBackoff)
}

// poll runs tasks/get on a timer until the task ends. last is a state just
// seen (e.g. the CreateTaskResult): the first poll then waits one interval;
// without it the first poll is immediate.
func (c *Client) poll(ctx context.Context, taskID string, last *DetailedTask) (*DetailedTask, error) {
	f, err := c.follower(ctx, taskID)
	if err != nil {
		return nil, err
	}
	next := time.Now()
	if last != nil {
		f.see(ctx, last)
		if err := f.stuck(last); err != nil {
			return nil, err
		}
		if last.Status == StatusInputRequired && len(last.InputRequests) > 0 {
			if err := f.answer(ctx, last); err != nil {
				return nil, err
			}
		}
		next = next.Add(f.interval)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop() // armed per wait below
	defer timer.Stop()
	failures := 0
	for {
		if !f.deadline.IsZero() && next.After(f.deadline) {
			next = f.deadline // one last look at the deadline
		}
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-timer.C:
			}
		}
		t, err := c.getTask(ctx, taskID)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, ErrTaskNotFound) {
				return nil, f.lost(ctx, err)
			}
			if transient(ctx, err) && failures < maxPollFailures {
				failures++
				backoff := backoff(f.interval, failures)
				c.log.Warn("client: poll failed; retrying", "task", taskID, "err", err, "after", backoff)
				next = time.Now().Add(backoff)
				continue
			}
			return nil, err
		}
		failures = 0
		f.see(ctx, t)
		c.log.Debug("client: polled", "task", taskID, "status", t.Status, "message", t.StatusMessage)
		if t.Status.Terminal() {
			return t, nil
		}
		if err := f.stuck(t); err != nil {
			return nil, err
		}
		if t.Status == StatusInputRequired {
			if err := f.answer(ctx, t); err != nil {
				return nil, err
			}
		}
		if !f.deadline.IsZero() && !time.Now().Before(f.deadline) {
			return nil, f.expired(ctx)
		}
		next = time.Now().Add(f.interval)
	}
}

// Pending lists the unfinished tasks recorded in the state file.
func (c *Client) Pending() ([]PendingTask, error) {
	return c.state.pending(context.Background())
}

// Resumed is how one resumed task ended.
type Resumed struct {
	TaskID  string
	Outcome *Outcome
	Err     error
}

// Resume follows every unfinished task in the state file (after this
// process restarted, say) until each ends, polling them concurrently as
// Wait does, and returns how each ended. The error is for reading the
// state file only.
func (c *Client) Resume(ctx context.Context) ([]Resumed, error) {
	pending, err := c.Pending()
	if err != nil {
		return nil, err
	}
	out := make([]Resumed, len(pending))
	var wg sync.WaitGroup
	for i, p := range pending {
		wg.Go(func() {
			o, err := c.Wait(ctx, p.TaskID)
			out[i] = Resumed{TaskID: p.TaskID, Outcome: o, Err: err}
		})
	}
	wg.Wait()
	return out, nil
}
