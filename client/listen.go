package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"
)

const (
	notificationAcknowledged = "notifications/subscriptions/acknowledged"
	notificationTasks        = "notifications/tasks"
)

// Listen subscribes to notifications/tasks for taskIDs
// (subscriptions/listen with notifications.taskIds) and calls fn, in order,
// for each task state pushed on the stream: the current state of each task
// the server agreed to follow, then every change. Tasks the server does
// not know (or will not show this caller) are left out of the subscription
// silently. fn runs on Listen's goroutine; a slow fn holds the stream.
//
// Listen returns nil when the server ends the subscription (darkroom does
// once every agreed task has ended), ctx.Err() when ctx ends, and an error
// when the stream breaks or breaks the protocol.
func (c *Client) Listen(ctx context.Context, taskIDs []string, fn func(DetailedTask)) error {
	return c.listen(ctx, taskIDs, nil, fn)
}

func (c *Client) listen(ctx context.Context, taskIDs []string, onAck func(agreed []string), fn func(DetailedTask)) error {
	ids := append([]string{}, taskIDs...) // never null on the wire
	resp, id, err := c.post(ctx, "subscriptions/listen", "", map[string]any{"notifications": map[string]any{"taskIds": ids}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if mediaType(resp) != "text/event-stream" {
		m, err := c.readResponse(resp, id)
		if err != nil {
			return err
		}
		if m.Error != nil {
			return m.Error
		}
		return protocolErr("subscriptions/listen answered without a stream")
	}
	sr := newSSEReader(resp.Body)
	acked := false
	for {
		data, err := sr.next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return ErrStreamEnded
			}
			return fmt.Errorf("client: subscriptions/listen: %w", err)
		}
		var m message
		if err := json.Unmarshal(data, &m); err != nil {
			return protocolErr("listen stream event is not JSON-RPC: %.200s", data)
		}
		if !acked {
			agreed, err := c.acknowledged(&m, id)
			if err != nil {
				return err
			}
			acked = true
			if onAck != nil {
				onAck(agreed)
			}
			continue
		}
		switch {
		case m.Method == notificationTasks:
			var p struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			}
			if err := json.Unmarshal(m.Params, &p); err != nil {
				return protocolErr("notifications/tasks params: %v", err)
			}
			if sid := p.Meta[metaSubscriptionID]; !idMatches(sid, id) {
				c.log.Warn("client: notification for another subscription ignored", "subscription", string(sid), "want", id)
				continue
			}
			t, err := decodeTask(m.Params)
			if err != nil {
				return err
			}
			fn(*t)
		case m.Method != "":
			c.log.Debug("client: listen stream notification ignored", "method", m.Method)
		case m.isResponse() && idMatches(m.ID, id):
			if m.Error != nil {
				return m.Error
			}
			return expectComplete(m.Result, "subscriptions/listen")
		default:
			c.log.Warn("client: unexpected message on the listen stream", "id", string(m.ID))
		}
	}
}

// WaitByNotifications follows a task through notifications/tasks instead
// of polling, answering its input requests as Wait does, and returns the
// task's terminal state (completed, failed or cancelled: check Status; see
// also OutcomeOf). If the stream ends before the task does, it falls back
// to one tasks/get and, should the task still be running, to polling.
func (c *Client) WaitByNotifications(ctx context.Context, taskID string) (*DetailedTask, error) {
	f, err := c.follower(ctx, taskID)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var expired atomic.Bool
	expire := func() { expired.Store(true); cancel() }
	var ttl *time.Timer
	armTTL := func() {
		if f.deadline.IsZero() {
			if ttl != nil {
				ttl.Stop()
			}
			return
		}
		if ttl == nil {
			ttl = time.AfterFunc(time.Until(f.deadline), expire)
		} else {
			ttl.Reset(time.Until(f.deadline))
		}
	}
	armTTL()
	defer func() {
		if ttl != nil {
			ttl.Stop()
		}
	}()
	var final *DetailedTask
	var inputErr error
	err = c.listen(lctx, []string{taskID}, func(agreed []string) {
		if !slices.Contains(agreed, taskID) {
			c.log.Debug("client: server did not agree to notify about the task", "task", taskID)
		}
	}, func(t DetailedTask) {
		if t.TaskID != taskID || final != nil || inputErr != nil {
			return
		}
		f.see(lctx, &t)
		armTTL()
		if err := f.stuck(&t); err != nil {
			inputErr = err
			cancel()
			return
		}
		switch t.Status {
		case StatusCompleted, StatusFailed, StatusCancelled:
			final = &t
			cancel()
		case StatusInputRequired:
			if err := f.answer(lctx, &t); err != nil {
				inputErr = err
				cancel()
			}
		}
	})
	switch {
	case final != nil:
		return final, nil
	case inputErr != nil:
		return nil, inputErr
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case expired.Load():
		return nil, f.expired(ctx)
	}
	c.log.Debug("client: listen ended before the task; falling back to tasks/get", "task", taskID, "err", err)
	t, gerr := c.getTask(ctx, taskID)
	if gerr != nil {
		if errors.Is(gerr, ErrTaskNotFound) {
			return nil, f.lost(ctx, gerr)
		}
		if err != nil && !errors.Is(err, ErrStreamEnded) {
			return nil, errors.Join(err, gerr)
		}
		return nil, gerr
	}
	if t.Status.Terminal() {
		f.see(ctx, t)
		return t, nil
	}
	return c.poll(ctx, taskID, t)
}

// OutcomeOf turns a terminal task (as WaitByNotifications returns) into
// what Wait would have returned for it.
func OutcomeOf(t *DetailedTask) (*Outcome, error) { return outcomeOf(t) }

// acknowledged reads the message a listen stream must begin with, the
// subscription's acknowledgement, and returns the task ids the server
// agreed to follow.
func (c *Client) acknowledged(m *message, id int64) ([]string, error) {
	if m.isResponse() && m.Error != nil && (idMatches(m.ID, id) || isNullID(m.ID)) {
		return nil, m.Error
	}
	if m.Method != notificationAcknowledged {
		return nil, protocolErr("listen stream began with %q, not %s", m.Method, notificationAcknowledged)
	}
	var p struct {
		Meta          map[string]json.RawMessage `json:"_meta"`
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, protocolErr("subscription acknowledgement: %v", err)
	}
	if sid := p.Meta[metaSubscriptionID]; !idMatches(sid, id) {
		return nil, protocolErr("subscription acknowledgement names subscription %s, not %d", sid, id)
	}
	c.log.Debug("client: subscribed", "subscription", id, "taskIds", p.Notifications.TaskIDs)
	return p.Notifications.TaskIDs, nil
}
