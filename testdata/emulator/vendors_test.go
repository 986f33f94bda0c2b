package emulator

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestVendorErrorShapes: the Gemini and OpenAI servers answer refusals
// with each vendor's documented error body and status.
func TestVendorErrorShapes(t *testing.T) {
	em := New(Options{})
	defer em.Close()
	cases := []struct {
		name, method, url, header, key, body string
		rule                                 *Rule
		status                               int
		path                                 []string // into the error body
		want                                 string
	}{
		{"gemini bad key", "POST", em.Google.URL + "/v1beta/models/gemini-3.1-flash-image:generateContent", "X-Goog-Api-Key", "nope", `{}`, nil, 400, []string{"error", "status"}, "INVALID_ARGUMENT"},
		{"gemini invalid", "POST", em.Google.URL + "/v1beta/models/gemini-3.1-flash-image:generateContent", "X-Goog-Api-Key", "gemini_test", `{"contents":[{"parts":[{"text":"x [invalid]"}]}]}`, nil, 400, []string{"error", "status"}, "INVALID_ARGUMENT"},
		{"gemini retired", "POST", em.Google.URL + "/v1beta/models/gemini-2.5-flash-image:generateContent", "X-Goog-Api-Key", "gemini_test", `{"contents":[{"parts":[{"text":"x"}]}]}`, nil, 404, []string{"error", "status"}, "NOT_FOUND"},
		{"gemini imagen predict", "POST", em.Google.URL + "/v1beta/models/imagen-4.0-generate-002:predict", "X-Goog-Api-Key", "gemini_test", `{"instances":[{"prompt":"x"}]}`, nil, 404, []string{"error", "status"}, "NOT_FOUND"},
		{"gemini operation cancel", "POST", em.Google.URL + "/v1beta/models/veo-3.1-generate-001/operations/x:cancel", "X-Goog-Api-Key", "gemini_test", `{}`, nil, 404, []string{"error", "status"}, "NOT_FOUND"},
		{"gemini throttled", "POST", em.Google.URL + "/v1beta/interactions", "X-Goog-Api-Key", "gemini_test", `{}`, &Rule{Provider: "google", Op: OpCreate, Fault: Fault429, Times: 1, RetryAfter: 30 * time.Second}, 429, []string{"error", "details"}, "30s"},
		{"gemini overloaded", "GET", em.Google.URL + "/v1beta/interactions/x", "X-Goog-Api-Key", "gemini_test", ``, &Rule{Provider: "google", Op: OpStatus, Fault: Fault500, Times: 1}, 503, []string{"error", "status"}, "UNAVAILABLE"},
		{"gemini unknown interaction", "GET", em.Google.URL + "/v1beta/interactions/x", "X-Goog-Api-Key", "gemini_test", ``, nil, 404, []string{"error", "code"}, "NOT_FOUND"},
		{"gemini interaction without background", "POST", em.Google.URL + "/v1beta/interactions", "X-Goog-Api-Key", "gemini_test", `{"model":"gemini-omni-1.2-flash","input":"a fox"}`, nil, 400, []string{"error", "code"}, "INVALID_ARGUMENT"},
		{"openai bad key", "POST", em.OpenAI.URL + "/v1/images/generations", "Authorization", "Bearer nope", `{}`, nil, 401, []string{"error", "code"}, "invalid_api_key"},
		{"openai moderation", "POST", em.OpenAI.URL + "/v1/images/generations", "Authorization", "Bearer sk-test", `{"prompt":"x [nsfw]"}`, nil, 400, []string{"error", "code"}, "moderation_blocked"},
		{"openai quota", "POST", em.OpenAI.URL + "/v1/images/generations", "Authorization", "Bearer sk-test", `{"prompt":"x [quota]"}`, nil, 429, []string{"error", "type"}, "insufficient_quota"},
		{"openai throttled", "POST", em.OpenAI.URL + "/v1/images/generations", "Authorization", "Bearer sk-test", `{"prompt":"x"}`, &Rule{Provider: "openai", Op: OpCreate, Fault: Fault429, Times: 1, RetryAfter: 3 * time.Second}, 429, []string{"error", "code"}, "rate_limit_exceeded"},
		{"openai edit without image", "POST", em.OpenAI.URL + "/v1/images/edits", "Authorization", "Bearer sk-test", `x`, nil, 400, []string{"error", "type"}, "invalid_request_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.rule != nil {
				em.Inject(*c.rule)
			}
			req, _ := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
			req.Header.Set(c.header, c.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var v any
			json.Unmarshal(b, &v)
			for _, k := range c.path {
				m, _ := v.(map[string]any)
				v = m[k]
				if d, ok := v.([]any); ok && len(d) == 1 { // RetryInfo
					v = d[0].(map[string]any)["retryDelay"]
				}
			}
			if resp.StatusCode != c.status || v != c.want {
				t.Fatalf("%d %s, want %d with %v = %q", resp.StatusCode, b, c.status, c.path, c.want)
			}
			if c.rule != nil && c.rule.RetryAfter > 0 && c.rule.Provider == "openai" && resp.Header.Get("Retry-After") != "3" {
				t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
			}
		})
	}
}
