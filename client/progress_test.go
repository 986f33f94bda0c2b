package client

import (
	"context"
	"net/http"
	"reflect"
	"sync"
	"testing"
)

// TestOnProgress: OnProgress hears the created task, then each state that
// differs from the last one told (status or message), never a repeat.
func TestOnProgress(t *testing.T) {
	t.Parallel()
	states := []string{
		`"statusMessage":"queued"`, `"statusMessage":"queued"`, // a repeat: not told
		`"statusMessage":"rendering 40%"`, `"statusMessage":"rendering 80%"`, `"statusMessage":"rendering 80%"`,
	}
	var mu sync.Mutex
	gets := 0
	f := newFake(t, func(w http.ResponseWriter, r fakeReq) {
		switch r.Method {
		case "tools/call":
			replyJSON(w, frame(r.ID, task("task", "t1", "working", 10, `"statusMessage":"queued"`)))
		case "tasks/get":
			mu.Lock()
			n := gets
			gets++
			mu.Unlock()
			if n < len(states) {
				replyJSON(w, frame(r.ID, task("complete", "t1", "working", 10, states[n])))
				return
			}
			replyJSON(w, frame(r.ID, task("complete", "t1", "completed", 10, `"statusMessage":"completed","result":`+okResult)))
		}
	})
	var told []string
	c := fakeClient(t, f, Options{OnProgress: func(t *DetailedTask) { told = append(told, string(t.Status)+": "+t.StatusMessage) }})
	if _, err := c.CallTool(context.Background(), "job", nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"working: queued", "working: rendering 40%", "working: rendering 80%", "completed: completed"}
	if !reflect.DeepEqual(told, want) {
		t.Fatalf("told %q, want %q", told, want)
	}
}
