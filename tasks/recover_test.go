package tasks

import (
	"context"
	"testing"
)

// TestCallPanicAnswered: a panic below Dispatcher.Call (tasks/*) is its
// -32603 answer.
func TestCallPanicAnswered(t *testing.T) {
	d := NewDispatcher(Options{Store: &Store{}}) // no backend: a lookup panics
	_, e := d.Call(context.Background(), "alice", rpc(methodGet, map[string]any{"taskId": "t1"}), nil)
	if e == nil || e.Code != CodeInternal || e.Message != PanicMessage {
		t.Fatalf("Call: %+v", e)
	}
}
