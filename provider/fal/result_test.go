package fal_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestCompletedResultFailures: what a COMPLETED request's result answers
// decides its end. A 5xx fal marks as a request error (X-Fal-Error-Type or
// error_type) is the app's failure, stored: the request ends failed with
// fal's message, not billed, at once. An unmarked 5xx is a fault on the
// way, retried; a 4xx is the request's own failure, which fal may bill.
func TestCompletedResultFailures(t *testing.T) {
	tests := []struct {
		name      string
		code      int
		header    string // X-Fal-Error-Type
		body      string
		state     provider.State // "" for a retryable error
		err       string
		notBilled bool
	}{
		{"the app's 500, marked in the header", 500, "runner_server_error", `{"detail":"Internal Server Error"}`,
			provider.StateFailed, "the request failed at fal (500 runner_server_error): Internal Server Error", true},
		{"the app's 500, marked in the body", 500, "", `{"detail":"CUDA out of memory","error_type":"runner_server_error"}`,
			provider.StateFailed, "(500 runner_server_error): CUDA out of memory", true},
		{"a runner that kept disconnecting", 503, "runner_disconnected", `{"detail":"Runner disconnected","error_type":"runner_disconnected"}`,
			provider.StateFailed, "(503 runner_disconnected): Runner disconnected", true},
		{"a gateway's 500", 500, "", `{"detail":"internal server error"}`, "", "", false},
		{"a gateway's 502 page", 502, "", `<html>Bad Gateway</html>`, "", "", false},
		{"the request's own 422", 422, "", `{"detail":[{"loc":["body","prompt"],"msg":"too long","type":"value_error"}]}`,
			provider.StateFailed, "body.prompt: too long", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			results := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/fal-ai/flux/requests/rid/status":
					w.Write([]byte(`{"status":"COMPLETED"}`))
				case "/fal-ai/flux/requests/rid":
					results++
					if tc.header != "" {
						w.Header().Set("X-Fal-Error-Type", tc.header)
					}
					w.WriteHeader(tc.code)
					w.Write([]byte(tc.body))
				default:
					w.WriteHeader(404)
				}
			}))
			defer srv.Close()
			p, _ := fal.New(fal.Config{Key: "k", QueueURL: srv.URL, RequestsPerMinute: -1})
			job, _ := p.JobFor("fal-flux-dev", "rid")
			st, err := p.Status(context.Background(), job)
			if tc.state == "" {
				if _, ok := retryable(err); !ok {
					t.Fatalf("%+v %v: want a retryable error", st, err)
				}
				return
			}
			if err != nil || st.State != tc.state || !strings.Contains(st.Error, tc.err) || st.NotBilled != tc.notBilled || results != 1 {
				t.Fatalf("%+v %v after %d result calls; want %s %q, notBilled %v", st, err, results, tc.state, tc.err, tc.notBilled)
			}
		})
	}
}

// TestAppFailure: the emulator's request whose app fails ([app-error]) is
// COMPLETED and its result answers 500; it ends failed, not billed, with
// fal's message, from its first result call.
func TestAppFailure(t *testing.T) {
	ctx := context.Background()
	for _, model := range []string{"fal-flux-schnell", "fal-kling-1.6"} {
		t.Run(model, func(t *testing.T) {
			em, p := setup(t, emulator.Options{}, nil)
			job, err := p.Submit(ctx, req(t, p, model, "k", "a lighthouse [app-error]"))
			if err != nil {
				t.Fatal(err)
			}
			em.Advance(time.Hour)
			st, err := p.Status(ctx, job)
			if err != nil || st.State != provider.StateFailed || !st.NotBilled || !strings.Contains(st.Error, "runner_server_error): Internal Server Error") {
				t.Fatalf("%+v %v", st, err)
			}
			if n := em.Count("fal", emulator.OpResult); n != 1 {
				t.Fatalf("%d result calls", n)
			}
			if p.Active() != 0 {
				t.Fatal("the failed request still holds a slot")
			}
		})
	}
}
