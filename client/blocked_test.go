package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestBlockedTaskStops: a task that waits for something this client
// cannot give (Options.Blocked says so, or input without OnInput) stops
// the wait at once with a *BlockedError carrying its status message, and
// stays pending. The fake ends the task completed after a few polls: a
// client that kept waiting would see that instead.
func TestBlockedTaskStops(t *testing.T) {
	t.Parallel()
	const upload = `"statusMessage":"Waiting for an upload: call upload_input with generationId g1 and role mask"`
	const ask = `"inputRequests":{"approve":{"method":"elicitation/create","params":{"mode":"form","message":"ok?","requestedSchema":{"type":"object"}}}},"statusMessage":"approve the spend"`
	blockedByUpload := func(t *DetailedTask) bool { return strings.HasPrefix(t.StatusMessage, "Waiting for an upload:") }
	cases := []struct {
		name    string
		created string   // the CreateTaskResult
		polls   []string // tasks/get answers in order (the last repeats)
		how     string   // call, wait, notifications or resume
		want    string   // in the BlockedError's message
		noInput bool     // the error wraps ErrNoInputHandler
		gets    int      // tasks/get before it stopped
	}{
		{"blocked when created", task("task", "t1", "working", 10, upload), nil, "call", "role mask", false, 0},
		{"blocked later", task("task", "t1", "working", 10, `"statusMessage":"queued"`),
			[]string{task("complete", "t1", "working", 10, `"statusMessage":"queued"`), task("complete", "t1", "working", 10, upload)}, "call", "role mask", false, 2},
		{"input nobody answers", task("task", "t1", "working", 10, ""),
			[]string{task("complete", "t1", "input_required", 10, ask)}, "call", "approve the spend", true, 1},
		{"wait", "", []string{task("complete", "t1", "working", 10, upload)}, "wait", "role mask", false, 1},
		{"resume", task("task", "t1", "working", 10, `"statusMessage":"queued"`), []string{task("complete", "t1", "working", 10, upload)}, "resume", "role mask", false, 1},
		{"notifications", "", nil, "notifications", "role mask", false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			gets := 0
			f := newFake(t, func(w http.ResponseWriter, r fakeReq) {
				switch r.Method {
				case "tools/call":
					replyJSON(w, frame(r.ID, tc.created))
				case "tasks/get":
					mu.Lock()
					gets++
					i := gets
					mu.Unlock()
					if i > 5 || len(tc.polls) == 0 {
						replyJSON(w, frame(r.ID, task("complete", "t1", "completed", 10, `"result":`+okResult)))
						return
					}
					replyJSON(w, frame(r.ID, tc.polls[min(i, len(tc.polls))-1]))
				case "subscriptions/listen":
					var sub json.RawMessage = r.ID
					replySSE(w, ack(sub, `["t1"]`), notify(sub, "working", upload), notify(sub, "completed", `"result":`+okResult))
				}
			})
			c := fakeClient(t, f, Options{Blocked: blockedByUpload})
			var err error
			switch tc.how {
			case "call":
				_, err = c.CallTool(context.Background(), "job", nil)
			case "wait":
				_, err = c.Wait(context.Background(), "t1")
			case "notifications":
				_, err = c.WaitByNotifications(context.Background(), "t1")
			case "resume":
				if _, err := c.Start(context.Background(), "job", nil); err != nil {
					t.Fatal(err)
				}
				done, rerr := c.Resume(context.Background())
				if rerr != nil || len(done) != 1 {
					t.Fatalf("Resume = %+v, %v", done, rerr)
				}
				err = done[0].Err
			}
			var be *BlockedError
			if !errors.As(err, &be) || be.TaskID != "t1" || !strings.Contains(be.Error(), tc.want) || errors.Is(err, ErrNoInputHandler) != tc.noInput {
				t.Fatalf("%s: %v; want a BlockedError saying %q", tc.how, err, tc.want)
			}
			if n := len(f.requests("tasks/get")); n != tc.gets {
				t.Errorf("%d tasks/get before it stopped, want %d", n, tc.gets)
			}
			if tc.how != "wait" && tc.how != "notifications" {
				if p, _ := c.Pending(); len(p) != 1 {
					t.Errorf("pending after the stop: %+v, want the task", p)
				}
			}
		})
	}
}
