package emulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// fal's queue contract, transcribed into Go (our rules keep fetched files
// out of this repository) from:
//
//   - fal-ai/fal-js at 381105e (2026-08-02), libs/client/src/types/common.ts
//     (last changed c72e7d4, 2026-01-23): BaseQueueStatus {status,
//     request_id, response_url, status_url, cancel_url}; InQueueQueueStatus
//     adds queue_position: number; InProgressQueueStatus adds logs:
//     RequestLog[]; CompletedQueueStatus adds logs and metrics?: {
//     inference_time: number | null }; RequestLog {message, level
//     STDERR|STDOUT|ERROR|INFO|WARN|DEBUG, source "USER", timestamp};
//     ValidationErrorInfo {msg, loc: (string|number)[], type};
//     WebHookResponse: {status "OK", payload, request_id} (error: never) or
//     {status "ERROR", payload, error: string, request_id}. queue.ts
//     (c72e7d4): submit returns an InQueueQueueStatus. response.ts
//     (c72e7d4): a body is read as JSON only under Content-Type
//     application/json, and a 422 is a ValidationError {detail:
//     ValidationErrorInfo[]}.
//   - fal's documentation, read 2026-12: the status answers 202 while in
//     the queue or in progress and 200 once complete
//     (fal.ai/docs/api-reference/inference-api); a cancel's status is OK,
//     CANCELLATION_REQUESTED, ALREADY_COMPLETED or NOT_FOUND
//     (fal.ai/docs/inference-api/queue/cancel; its codes, 202, 400 and
//     404, are the ones darkroom reads, provider/fal Cancel); a request
//     error is {detail: string, error_type} with X-Fal-Error-Type equal to
//     error_type, of the listed types
//     (fal.ai/docs/documentation/model-apis/request-errors); an error
//     body's detail is a string or a list of errors (fal.ai/docs/
//     documentation/model-apis/errors); a webhook may carry
//     gateway_request_id (docs.fal.ai/model-endpoints/webhooks).
//
// fal-js declares logs required; fal sends them when asked (?logs=1, as
// darkroom always asks), so replies are checked as asked that way.

// field is one property of a reply: its JSON type ("string", "number",
// "array", "object", "any"; "a|b" for either, "null" among them), whether
// it must be there (or must not: never), its allowed values, and the
// fields of an object or of each array item.
type field struct {
	name     string
	typ      string
	required bool
	never    bool
	enum     []string
	of       []field
}

var (
	falLog = []field{
		{name: "message", typ: "string", required: true},
		{name: "level", typ: "string", required: true, enum: []string{"STDERR", "STDOUT", "ERROR", "INFO", "WARN", "DEBUG"}},
		{name: "source", typ: "string", required: true, enum: []string{"USER"}},
		{name: "timestamp", typ: "string", required: true},
	}
	falLogs    = field{name: "logs", typ: "array", required: true, of: falLog}
	falMetrics = field{name: "metrics", typ: "object", of: []field{{name: "inference_time", typ: "number|null", required: true}}}

	falSubmitReply   = falQueueStatus("IN_QUEUE", field{name: "queue_position", typ: "number", required: true})
	falInQueue       = falSubmitReply
	falInProgress    = falQueueStatus("IN_PROGRESS", falLogs)
	falCompleted     = falQueueStatus("COMPLETED", falLogs, falMetrics)
	falCancelReply   = []field{{name: "status", typ: "string", required: true, enum: []string{"OK", "CANCELLATION_REQUESTED", "ALREADY_COMPLETED", "NOT_FOUND"}}}
	falErrorReply    = []field{{name: "detail", typ: "string|array", required: true}}
	falValidation    = []field{{name: "detail", typ: "array", required: true, of: []field{{name: "loc", typ: "array", required: true}, {name: "msg", typ: "string", required: true}, {name: "type", typ: "string", required: true}}}}
	falRequestError  = []field{{name: "detail", typ: "string", required: true}, {name: "error_type", typ: "string", required: true, enum: falErrorTypes}}
	falResultReply   = []field{} // the model's own output: any JSON object
	falWebhookOK     = falWebhook("OK", field{name: "error", never: true})
	falWebhookFailed = falWebhook("ERROR", field{name: "error", typ: "string", required: true})

	falErrorTypes = []string{"request_timeout", "startup_timeout", "runner_scheduling_failure", "runner_connection_timeout",
		"runner_disconnected", "runner_connection_refused", "runner_connection_error", "runner_incomplete_response",
		"runner_server_error", "client_disconnected", "client_cancelled", "bad_request", "internal_error"}
)

func falQueueStatus(status string, more ...field) []field {
	return append([]field{
		{name: "status", typ: "string", required: true, enum: []string{status}},
		{name: "request_id", typ: "string", required: true},
		{name: "response_url", typ: "string", required: true},
		{name: "status_url", typ: "string", required: true},
		{name: "cancel_url", typ: "string", required: true},
	}, more...)
}

func falWebhook(status string, errField field) []field {
	return []field{
		{name: "status", typ: "string", required: true, enum: []string{status}},
		{name: "request_id", typ: "string", required: true},
		{name: "gateway_request_id", typ: "string"},
		{name: "payload", typ: "any", required: true},
		errField,
	}
}

// contractProblems lists how v breaks fields (none: it keeps them).
func contractProblems(v any, fields []field, at string) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return []string{at + ": not a JSON object"}
	}
	var out []string
	for _, f := range fields {
		x, ok := m[f.name]
		switch {
		case ok && f.never:
			out = append(out, fmt.Sprintf("%s.%s: present, must not be", at, f.name))
		case !ok && f.required:
			out = append(out, fmt.Sprintf("%s.%s: required, missing", at, f.name))
		case ok && !f.never:
			out = append(out, fieldProblems(x, f, at+"."+f.name)...)
		}
	}
	return out
}

func fieldProblems(x any, f field, at string) []string {
	if !slices.Contains(strings.Split(f.typ, "|"), jsonType(x)) && f.typ != "any" {
		return []string{fmt.Sprintf("%s: %s, want %s", at, jsonType(x), f.typ)}
	}
	if s, ok := x.(string); ok && f.enum != nil && !slices.Contains(f.enum, s) {
		return []string{fmt.Sprintf("%s: %q is none of %v", at, s, f.enum)}
	}
	if f.of == nil {
		return nil
	}
	if items, ok := x.([]any); ok {
		var out []string
		for i, it := range items {
			out = append(out, contractProblems(it, f.of, fmt.Sprintf("%s[%d]", at, i))...)
		}
		return out
	}
	return contractProblems(x, f.of, at)
}

func jsonType(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	default:
		return "object"
	}
}

// falReply is one reply of the emulator's fal server, or a webhook it
// posted.
type falReply struct {
	code   int
	header http.Header
	body   any
}

// TestFalContract drives every kind of reply the emulator's fal server
// gives and holds each to fal's contract above.
func TestFalContract(t *testing.T) {
	const endpoint = "fal-ai/flux/dev" // a sub-path, which the URLs drop
	tests := []struct {
		name    string
		prompt  string
		advance time.Duration
		op      string // submit, status, result, cancel, webhook; and the errors: bad-key, unknown, invalid
		code    int
		shape   []field
	}{
		{"submit", "a", 0, "submit", 200, falSubmitReply},
		{"status IN_QUEUE", "a", 0, "status", 202, falInQueue},
		{"status IN_PROGRESS", "a", time.Second, "status", 202, falInProgress},
		{"status COMPLETED", "a", time.Hour, "status", 200, falCompleted},
		{"status COMPLETED, the request failed", "a [fail]", time.Hour, "status", 200, falCompleted},
		{"status COMPLETED, the app failed", "a [app-error]", time.Hour, "status", 200, falCompleted},
		{"result", "a", time.Hour, "result", 200, falResultReply},
		{"result of a failed request", "a [fail]", time.Hour, "result", 422, falValidation},
		{"result of a failed app", "a [app-error]", time.Hour, "result", 500, falRequestError},
		{"cancel, queued", "a", 0, "cancel", 202, falCancelReply},
		{"cancel, in progress", "a", time.Second, "cancel", 202, falCancelReply},
		{"cancel, completed", "a", time.Hour, "cancel", 400, falCancelReply},
		{"cancel, unknown", "a", 0, "cancel-unknown", 404, falCancelReply},
		{"webhook OK", "a", time.Hour, "webhook", 0, falWebhookOK},
		{"webhook ERROR, the request failed", "a [fail]", time.Hour, "webhook", 0, falWebhookFailed},
		{"webhook ERROR, the app failed", "a [app-error]", time.Hour, "webhook", 0, falWebhookFailed},
		{"401", "a", 0, "bad-key", 401, falErrorReply},
		{"404", "a", 0, "unknown", 404, falErrorReply},
		{"422", "[invalid]", 0, "submit", 422, falValidation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			defer sink.Close()
			em := New(Options{})
			defer em.Close()
			sub := falCall(t, em, http.MethodPost, em.Fal.URL+"/"+endpoint+"?fal_webhook="+url.QueryEscape(sink.URL), "fal_test", `{"prompt":"`+tc.prompt+`"}`)
			urls, _ := sub.body.(map[string]any)
			str := func(k string) string {
				s, _ := urls[k].(string)
				if !strings.HasPrefix(s, em.Fal.URL+"/") {
					t.Fatalf("%s %q is not on the emulator's queue", k, s)
				}
				return s
			}
			em.Advance(tc.advance)
			r := sub
			switch tc.op {
			case "status":
				r = falCall(t, em, http.MethodGet, str("status_url")+"?logs=1", "fal_test", "")
			case "result":
				r = falCall(t, em, http.MethodGet, str("response_url"), "fal_test", "")
			case "cancel":
				r = falCall(t, em, http.MethodPut, str("cancel_url"), "fal_test", "")
			case "cancel-unknown":
				r = falCall(t, em, http.MethodPut, em.Fal.URL+"/fal-ai/flux/requests/nope/cancel", "fal_test", "")
			case "unknown":
				r = falCall(t, em, http.MethodGet, em.Fal.URL+"/fal-ai/flux/requests/nope/status", "fal_test", "")
			case "bad-key":
				r = falCall(t, em, http.MethodGet, str("status_url"), "wrong", "")
			case "webhook":
				ds := em.Deliveries()
				if len(ds) != 1 {
					t.Fatalf("%d deliveries", len(ds))
				}
				r = falReply{header: ds[0].Header}
				json.Unmarshal(ds[0].Body, &r.body)
			}
			if tc.code != 0 && r.code != tc.code {
				t.Errorf("answered %d, want %d", r.code, tc.code)
			}
			if ct := r.header.Get("Content-Type"); !strings.Contains(ct, "application/json") {
				t.Errorf("Content-Type %q: fal-js reads the body as JSON only under application/json", ct)
			}
			for _, p := range contractProblems(r.body, tc.shape, "reply") {
				t.Error(p)
			}
			if m, ok := r.body.(map[string]any); ok && m["error_type"] != nil && r.header.Get("X-Fal-Error-Type") != m["error_type"] {
				t.Errorf("X-Fal-Error-Type %q, error_type %v", r.header.Get("X-Fal-Error-Type"), m["error_type"])
			}
			if tc.op == "status" {
				for _, k := range []string{"request_id", "response_url", "status_url", "cancel_url"} {
					if got := r.body.(map[string]any)[k]; got != urls[k] {
						t.Errorf("%s %v, the submit gave %v", k, got, urls[k])
					}
				}
			}
		})
	}
}

// TestFalSubmitURLs: the submit reply's URLs keep the endpoint's app
// only, never its sub-path, with a workflows/ or comfy/ namespace kept
// (fal's inference API page; fal-js parseEndpointId), and they are the
// URLs the request is served at.
func TestFalSubmitURLs(t *testing.T) {
	for _, tc := range []struct{ endpoint, app string }{
		{"fal-ai/fast-sdxl", "fal-ai/fast-sdxl"},
		{"fal-ai/flux/dev", "fal-ai/flux"},
		{"fal-ai/kling-video/v1.6/standard/text-to-video", "fal-ai/kling-video"},
		{"workflows/acme/pipeline", "workflows/acme/pipeline"},
		{"workflows/acme/pipeline/run", "workflows/acme/pipeline"},
		{"comfy/acme/graph/v2", "comfy/acme/graph"},
	} {
		t.Run(tc.endpoint, func(t *testing.T) {
			em := New(Options{})
			defer em.Close()
			sub := falCall(t, em, http.MethodPost, em.Fal.URL+"/"+tc.endpoint, "fal_test", `{"prompt":"a"}`)
			m, _ := sub.body.(map[string]any)
			base := em.Fal.URL + "/" + tc.app + "/requests/" + fmt.Sprint(m["request_id"])
			for k, want := range map[string]string{"response_url": base, "status_url": base + "/status", "cancel_url": base + "/cancel"} {
				if m[k] != want {
					t.Errorf("%s %v, want %s", k, m[k], want)
				}
			}
			if r := falCall(t, em, http.MethodGet, base+"/status", "fal_test", ""); r.code != 202 {
				t.Errorf("status at the URL given: %d", r.code)
			}
			if tc.app != tc.endpoint {
				if r := falCall(t, em, http.MethodGet, em.Fal.URL+"/"+tc.endpoint+"/requests/"+fmt.Sprint(m["request_id"])+"/status", "fal_test", ""); r.code != 404 {
					t.Errorf("status with the sub-path kept: %d, want 404", r.code)
				}
			}
		})
	}
}

// TestFalContractCatchesDrift: the check above refuses a reply that drops
// a required field, changes a type or leaves an enum, so an emulator that
// drifts from fal's contract fails it.
func TestFalContractCatchesDrift(t *testing.T) {
	good := FixtureMap("fal", "status_in_progress.json")
	if p := contractProblems(good, falInProgress, "reply"); p != nil {
		t.Fatalf("the fixture itself: %v", p)
	}
	for _, tc := range []struct {
		name  string
		drift func(map[string]any)
	}{
		{"status_url dropped", func(m map[string]any) { delete(m, "status_url") }},
		{"request_id dropped", func(m map[string]any) { delete(m, "request_id") }},
		{"logs dropped", func(m map[string]any) { delete(m, "logs") }},
		{"status unknown", func(m map[string]any) { m["status"] = "RUNNING" }},
		{"a log's source in lower case", func(m map[string]any) { m["logs"].([]any)[0].(map[string]any)["source"] = "user" }},
		{"a URL as a number", func(m map[string]any) { m["response_url"] = 1.0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := FixtureMap("fal", "status_in_progress.json")
			tc.drift(m)
			if p := contractProblems(m, falInProgress, "reply"); p == nil {
				t.Fatal("not caught")
			}
		})
	}
	if p := contractProblems(map[string]any{"status": "OK", "request_id": "r", "payload": nil, "error": "x"}, falWebhookOK, "reply"); p == nil {
		t.Fatal("an OK webhook with an error not caught")
	}
}

func falCall(t *testing.T, em *Emulator, method, u, key, body string) falReply {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Authorization", "Key "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := falReply{code: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(b, &r.body); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON", method, u, resp.StatusCode, b)
	}
	return r
}
