package emulator

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEmulatorBasics(t *testing.T) {
	em := New(Options{})
	defer em.Close()
	do := func(method, url, auth, body string) *http.Response {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := do("GET", em.Replicate.URL+"/v1/predictions", "Bearer wrong", ""); r.StatusCode != 401 {
		t.Fatal(r.StatusCode)
	}
	em.Inject(Rule{Op: OpCreate, Fault: Fault429, Times: 1, RetryAfter: 9 * time.Second})
	r := do("POST", em.Fal.URL+"/fal-ai/flux/dev", "Key fal_test", `{"prompt":"x"}`)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "9" {
		t.Fatal(r.StatusCode)
	}
	if r := do("POST", em.Fal.URL+"/fal-ai/flux/dev", "Key fal_test", `{"prompt":"x"}`); r.StatusCode != 200 || em.Jobs("fal") != 1 {
		t.Fatal(r.StatusCode)
	}
	id := "00000000-0000-4000-8000-000000000001"
	// The subpath is not part of status paths.
	if r := do("GET", em.Fal.URL+"/fal-ai/flux/dev/requests/"+id+"/status", "Key fal_test", ""); r.StatusCode != 404 {
		t.Fatal("subpath status answered", r.StatusCode)
	}
	if r := do("GET", em.Fal.URL+"/fal-ai/flux/requests/"+id+"/status", "Key fal_test", ""); r.StatusCode != 202 {
		t.Fatal(r.StatusCode)
	}
	em.Advance(5 * time.Second)
	if r := do("GET", em.Fal.URL+"/fal-ai/flux/requests/"+id+"/status", "Key fal_test", ""); r.StatusCode != 200 {
		t.Fatal(r.StatusCode)
	}
	file := em.Files.URL + "/files/" + id + "/out-0.png"
	if r := do("GET", file, "", ""); r.StatusCode != 200 {
		t.Fatal(r.StatusCode)
	}
	em.Advance(2 * time.Hour)
	if r := do("GET", file, "", ""); r.StatusCode != 404 {
		t.Fatal("output did not expire")
	}
	if em.Count("fal", OpCreate) != 2 || em.Count("fal", OpStatus) != 3 || em.Count("files", OpFile) != 2 {
		t.Fatal("counts")
	}
}

// TestWebhookRetries: a delivery the receiver refuses (a 5xx, or no
// answer) is posted again after each of WebhookRetries' waits, the same
// POST each time, until one is accepted or the waits run out.
func TestWebhookRetries(t *testing.T) {
	cases := []struct {
		name    string
		retries []time.Duration
		refuse  int // the receiver's first refusals
		want    []int
	}{
		{"accepted on a retry", []time.Duration{time.Second, 4 * time.Second}, 2, []int{503, 503, 200}},
		{"waits run out", []time.Duration{time.Second}, 5, []int{503, 503}},
		{"no retries set", nil, 1, []int{503}},
		{"accepted at once", []time.Duration{time.Second}, 0, []int{200}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []string
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				bodies = append(bodies, string(b)+r.Header.Get("X-Fal-Webhook-Signature"))
				if len(bodies) <= c.refuse {
					w.WriteHeader(503)
				}
			}))
			defer recv.Close()
			em := New(Options{WebhookRetries: c.retries})
			defer em.Close()
			req, _ := http.NewRequest("POST", em.Fal.URL+"/fal-ai/flux/schnell?fal_webhook="+recv.URL, strings.NewReader(`{"prompt":"x"}`))
			req.Header.Set("Authorization", "Key fal_test")
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatal(err, resp)
			}
			resp.Body.Close()
			for range 10 {
				em.Advance(time.Second)
			}
			var got []int
			for i, d := range em.Deliveries() {
				if d.Attempt != i {
					t.Errorf("delivery %d: attempt %d", i, d.Attempt)
				}
				got = append(got, d.Status)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("statuses %v, want %v", got, c.want)
			}
			for _, b := range bodies[1:] {
				if b != bodies[0] {
					t.Fatal("a retry is not the same POST")
				}
			}
			if _, pending := em.NextEvent(); pending {
				t.Fatal("a delivery is still pending after the waits")
			}
		})
	}
}
