package fal_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// jobURLs reads the queue URLs a job records.
func jobURLs(t *testing.T, job provider.Job) (status, response, cancel string) {
	t.Helper()
	var d struct{ StatusURL, ResponseURL, CancelURL string }
	if err := json.Unmarshal(job.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.StatusURL, d.ResponseURL, d.CancelURL
}

// TestRebuiltURLs: a job learnt from a webhook has no URLs from fal, so
// they are rebuilt as fal-js does (parseEndpointId): owner/alias, after a
// workflows/ or comfy/ namespace, the sub-path dropped.
func TestRebuiltURLs(t *testing.T) {
	p, err := fal.New(fal.Config{Key: "k", QueueURL: "https://queue.fal.run", RequestsPerMinute: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ model, app string }{
		{"fal-flux-dev", "fal-ai/flux"},
		{"fal-kling-1.6", "fal-ai/kling-video"},
		{"fal:fal-ai/fast-sdxl", "fal-ai/fast-sdxl"},
		{"fal:fal-ai/flux/dev", "fal-ai/flux"},
		{"fal:workflows/acme/pipeline", "workflows/acme/pipeline"},
		{"fal:workflows/acme/pipeline/run", "workflows/acme/pipeline"},
		{"fal:comfy/acme/graph/v2/fast", "comfy/acme/graph"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			job, err := p.JobFor(tc.model, "r 1")
			if err != nil {
				t.Fatal(err)
			}
			base := "https://queue.fal.run/" + tc.app + "/requests/r%201"
			if s, r, c := jobURLs(t, job); s != base+"/status" || r != base || c != base+"/cancel" {
				t.Fatalf("rebuilt\n%s\n%s\n%s\nwant under %s", s, r, c, base)
			}
		})
	}
}

// TestFollowsGivenURLs: fal serves these endpoints' requests under a path
// no client would build (emulator.RouteFal), so a whole life (status,
// result, cancel) works only by the URLs fal's submit gave.
func TestFollowsGivenURLs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		model, endpoint string
		cancel          bool
	}{
		{"fal-flux-dev", "fal-ai/flux/dev", false},
		{"fal-kling-1.6", "fal-ai/kling-video/v1.6/standard/text-to-video", false},
		{"fal-kling-1.6", "fal-ai/kling-video/v1.6/standard/text-to-video", true},
	} {
		t.Run(tc.model+map[bool]string{true: "/cancel"}[tc.cancel], func(t *testing.T) {
			em, p := setup(t, emulator.Options{}, nil)
			em.RouteFal(tc.endpoint, "gateway/eu-1")
			job, err := p.Submit(ctx, req(t, p, tc.model, "k", "a harbour at dusk"))
			if err != nil {
				t.Fatal(err)
			}
			if s, _, _ := jobURLs(t, job); !strings.HasPrefix(s, em.Fal.URL+"/gateway/eu-1/") {
				t.Fatalf("status URL %s is not the one fal gave", s)
			}
			want := provider.StateCompleted
			if tc.cancel {
				if st, err := p.Cancel(ctx, job); err != nil || st.State != provider.StateCancelled {
					t.Fatalf("cancel: %+v %v", st, err)
				}
				want = provider.StateCancelled
			}
			em.Advance(time.Hour)
			if st, err := p.Status(ctx, job); err != nil || st.State != want {
				t.Fatalf("status: %+v %v, want %s", st, err, want)
			}
		})
	}
}

// TestQueueURLTrust: our key goes with every call to a request's URLs, so
// a URL off the queue's origin (in a submit reply, a status reply or a
// stored record) is never followed: the rebuilt one is used instead.
func TestQueueURLTrust(t *testing.T) {
	var stolen atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		w.Write([]byte(`{"status":"COMPLETED","images":[{"url":"https://fal.media/x.png"}]}`))
	}))
	defer evil.Close()
	const good = "/fal-ai/flux/requests/r1"
	tests := []struct {
		name           string
		submit         map[string]string // URLs in the submit reply ("" leaves the queue's own)
		statusResponse string            // response_url in the status reply
		record         map[string]string // stored URLs replacing the submit's
	}{
		{name: "another host", submit: map[string]string{"status_url": evil.URL + good + "/status", "response_url": evil.URL + good, "cancel_url": evil.URL + good + "/cancel"}},
		{name: "the same server by another name", submit: map[string]string{"status_url": "http://localhost:PORT" + good + "/status"}},
		{name: "user info", submit: map[string]string{"response_url": "http://QUEUE@" + strings.TrimPrefix(evil.URL, "http://") + good}},
		{name: "another scheme", submit: map[string]string{"cancel_url": "https://QUEUE" + good + "/cancel"}},
		{name: "missing", submit: map[string]string{"status_url": "", "response_url": "", "cancel_url": ""}},
		{name: "status reply's response_url", statusResponse: evil.URL + good},
		{name: "stored record", record: map[string]string{"statusUrl": evil.URL + good + "/status", "responseUrl": evil.URL + good, "cancelUrl": evil.URL + good + "/cancel"}},
		{name: "stored record without URLs", record: map[string]string{"statusUrl": "", "responseUrl": "", "cancelUrl": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var queue *httptest.Server
			queue = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				host := strings.TrimPrefix(queue.URL, "http://")
				switch {
				case r.Method == http.MethodPost:
					v := map[string]any{"status": "IN_QUEUE", "request_id": "r1", "status_url": queue.URL + good + "/status",
						"response_url": queue.URL + good, "cancel_url": queue.URL + good + "/cancel"}
					for k, u := range tc.submit {
						_, port, _ := strings.Cut(host, ":")
						v[k] = strings.NewReplacer("QUEUE", host, "PORT", port).Replace(u)
					}
					json.NewEncoder(w).Encode(v)
				case r.URL.Path == good+"/status":
					json.NewEncoder(w).Encode(map[string]any{"status": "COMPLETED", "response_url": tc.statusResponse})
				case r.URL.Path == good && r.Method == http.MethodGet:
					w.Write([]byte(`{"images":[{"url":"https://fal.media/out.png","content_type":"image/png"}]}`))
				case r.URL.Path == good+"/cancel":
					w.Write([]byte(`{"status":"ALREADY_COMPLETED"}`))
				default:
					w.WriteHeader(http.StatusNotFound)
				}
			}))
			defer queue.Close()
			stolen.Store(0)
			p, _ := fal.New(fal.Config{Key: "k", QueueURL: queue.URL, RequestsPerMinute: -1})
			ctx := context.Background()
			job, err := p.Submit(ctx, req(t, p, "fal-flux-dev", "k", "x"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.record != nil {
				var d map[string]any
				json.Unmarshal(job.Data, &d)
				for k, u := range tc.record {
					d[k] = u
				}
				job.Data, _ = json.Marshal(d)
			}
			st, err := p.Status(ctx, job)
			if err != nil || st.State != provider.StateCompleted || len(st.Outputs) != 1 || !strings.HasSuffix(st.Outputs[0].URL, "/out.png") {
				t.Fatalf("status: %+v %v", st, err)
			}
			if _, err := p.Cancel(ctx, job); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			if s, r, c := jobURLs(t, job); tc.record == nil && (s != queue.URL+good+"/status" || r != queue.URL+good || c != queue.URL+good+"/cancel") {
				t.Fatalf("recorded\n%s\n%s\n%s", s, r, c)
			}
			if n := stolen.Load(); n != 0 {
				t.Fatalf("%d calls with our key went off the queue's origin", n)
			}
		})
	}
}
