package tasks

import (
	"io"
	"testing"
	"time"
)

// TestDrainEndsListen: Drain ends an open listen stream (its task still
// live), without the closing response, and one opened afterwards ends at
// once, over HTTP. Without Drain's cancel in listen the first read
// waits for the task's end, which never comes.
func TestDrainEndsListen(t *testing.T) {
	d, s, _, _ := newTestDispatcher(t)
	f := newHTTPFixture(t, d)
	live := mkTask(t, s, &Task{Owner: "alice", TTL: time.Hour})
	listen := func() <-chan rpcResponse {
		resp := f.do(t, post{owner: "alice", method: methodListen, params: map[string]any{"notifications": map[string]any{"taskIds": []string{live.ID}}}})
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("listen: %d %s", resp.StatusCode, b)
		}
		return readStream(t, resp)
	}
	ended := func(stream <-chan rpcResponse) {
		t.Helper()
		for {
			select {
			case m, ok := <-stream:
				if !ok {
					return
				}
				if m.Method == "" {
					t.Fatalf("a drained stream sent its closing response %s", m.Result)
				}
			case <-time.After(streamTimeout):
				t.Fatal("the stream did not end at drain")
			}
		}
	}
	open := listen()
	if ack := next(t, open); ack.Method != notificationSubscribed {
		t.Fatalf("first message %+v; want the acknowledgement", ack)
	}
	next(t, open) // the task's state: the stream is up and waiting
	d.Drain()
	ended(open)
	ended(listen())
}
