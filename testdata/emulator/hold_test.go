package emulator

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReplicatePreferWait: a create with Prefer: wait is held until the
// prediction ends (201, the final output) or the wait runs out (202, its
// current state); a Prefer outside the document's pattern is refused.
func TestReplicatePreferWait(t *testing.T) {
	const official = "/v1/models/black-forest-labs/flux-schnell/predictions"
	for _, tt := range []struct {
		name, prefer, prompt string
		advance              time.Duration // the clock, once the create is held
		status               int
		want                 string // the prediction's status
	}{
		{"ends within the wait", "wait=10", "a fox [run=3s]", 4 * time.Second, 201, "succeeded"},
		{"wait runs out", "wait=2", "a fox [run=30s]", 3 * time.Second, 202, "processing"},
		{"bare wait is 60 s", "wait", "a fox [run=59s]", 59 * time.Second, 201, "succeeded"},
		{"fails within the wait", "wait=5", "a fox [fail] [run=1s]", 2 * time.Second, 201, "failed"},
		{"no wait", "", "a fox [run=3s]", 0, 201, "processing"},
		{"over 60 s", "wait=61", "a fox", 0, 400, ""},
		{"not wait", "respond-async", "a fox", 0, 400, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			em := New(Options{})
			defer em.Close()
			type reply struct {
				resp *http.Response
				v    map[string]any
			}
			got := make(chan reply, 1)
			go func() {
				hdr := map[string]string{}
				if tt.prefer != "" {
					hdr["Prefer"] = tt.prefer
				}
				resp, v := replicateDo(t, em, "POST", official, hdr, `{"input":{"prompt":"`+tt.prompt+`"}}`)
				got <- reply{resp, v}
			}()
			if tt.advance > 0 {
				// Move the clock once the job exists (the create is held).
				for em.Jobs("replicate") == 0 {
					select {
					case r := <-got:
						t.Fatalf("answered before the clock moved: %d %v", r.resp.StatusCode, r.v)
					default:
					}
					em.Advance(0)
				}
				select {
				case r := <-got:
					t.Fatalf("answered before the job ended: %d %v", r.resp.StatusCode, r.v)
				default:
				}
				em.Advance(tt.advance)
			}
			r := <-got
			if r.resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %v", r.resp.StatusCode, tt.status, r.v)
			}
			if tt.want != "" && r.v["status"] != tt.want {
				t.Fatalf("prediction %v, want %s", r.v["status"], tt.want)
			}
			if tt.want == "succeeded" && r.v["output"] == nil {
				t.Fatalf("no output in the final prediction: %v", r.v)
			}
		})
	}
}

// TestFalStatusStream: the status stream sends the request's status at
// each change, IN_QUEUE, IN_PROGRESS with logs, then COMPLETED, and ends;
// an unknown request is 404.
func TestFalStatusStream(t *testing.T) {
	em := New(Options{Timing: func(string) (time.Duration, time.Duration) { return time.Second, 4 * time.Second }})
	defer em.Close()
	req, _ := http.NewRequest("POST", em.Fal.URL+"/fal-ai/flux/dev", strings.NewReader(`{"prompt":"a heron"}`))
	req.Header.Set("Authorization", "Key fal_test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sub map[string]string
	json.NewDecoder(resp.Body).Decode(&sub)
	resp.Body.Close()
	for _, tt := range []struct {
		name, url string
		status    int
		want      []string
	}{
		{"a request's changes", sub["status_url"] + "/stream?logs=1", 200, []string{"IN_QUEUE", "IN_PROGRESS", "COMPLETED"}},
		{"unknown request", strings.Replace(sub["status_url"], sub["request_id"], "00000000-0000-4000-8000-999999999999", 1) + "/stream", 404, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", tt.url, nil)
			req.Header.Set("Authorization", "Key fal_test")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.status != 200 {
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("content type %q", ct)
			}
			var seen []string
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				var v map[string]any
				if err := json.Unmarshal([]byte(data), &v); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				st := v["status"].(string)
				if len(seen) == 0 || seen[len(seen)-1] != st {
					seen = append(seen, st)
				}
				if st == "IN_PROGRESS" && v["logs"] == nil {
					t.Fatalf("IN_PROGRESS without logs: %v", v)
				}
				em.Advance(time.Second) // the next change
			}
			if strings.Join(seen, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("stream said %v, want %v", seen, tt.want)
			}
		})
	}
}
