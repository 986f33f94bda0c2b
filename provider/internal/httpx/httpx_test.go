package httpx

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

func TestErr(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(Config{Provider: "p", Now: func() time.Time { return now }})
	h := func(k, v string) http.Header { x := http.Header{}; x.Set(k, v); return x }
	tests := []struct {
		status int
		hdr    http.Header
		body   string
		after  time.Duration
		perm   bool
		msg    string
	}{
		{429, h("Retry-After", "12"), `{}`, 12 * time.Second, false, "throttled"},
		{429, h("Retry-After", now.Add(time.Minute).Format(http.TimeFormat)), `{}`, time.Minute, false, ""},
		{429, http.Header{}, `{"detail":"Request was throttled. Your rate limit resets in ~30s.","status":429}`, 30 * time.Second, false, "resets"},
		{429, http.Header{}, ``, 10 * time.Second, false, ""},
		{503, h("Retry-After", "5"), `oops`, 5 * time.Second, false, "oops"},
		{500, http.Header{}, `{"detail":"boom"}`, 0, false, "boom"},
		{401, http.Header{}, `{"title":"Unauthenticated","detail":"You did not pass a valid authentication token"}`, 0, true, "valid authentication token"},
		{422, http.Header{}, `{"detail":[{"loc":["body","prompt"],"msg":"field required"}]}`, 0, true, "body.prompt: field required"},
		{400, http.Header{}, `{"error":"bad"}`, 0, true, "bad"},
	}
	for _, tc := range tests {
		err := c.Err(&Response{Status: tc.status, Header: tc.hdr, Body: []byte(tc.body)})
		var re *provider.RetryableError
		var pe *provider.PermanentError
		switch {
		case tc.perm:
			if !errors.As(err, &pe) || !contains(pe.Message, tc.msg) {
				t.Errorf("%d: %v", tc.status, err)
			}
		default:
			if !errors.As(err, &re) || re.After != tc.after || !contains(err.Error(), tc.msg) {
				t.Errorf("%d %s: %v (after %v)", tc.status, tc.body, err, re)
			}
		}
	}
	if err := c.Err(&Response{Status: 404, Body: []byte(`{"detail":"Not found."}`)}); !errors.Is(err, provider.ErrNotFound) {
		t.Error(err)
	}
	if c.Err(&Response{Status: 201}) != nil {
		t.Error("2xx")
	}
	if !errors.Is(SubmitErr(c.Err(&Response{Status: 429}), &Response{Status: 429}), provider.ErrNotCreated) {
		t.Error("429 submit")
	}
	if errors.Is(SubmitErr(c.Err(&Response{Status: 502}), &Response{Status: 502}), provider.ErrNotCreated) {
		t.Error("502 submit is unknown")
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		u  string
		ok bool
	}{
		{"https://queue.fal.run/a/b/requests/1/status", true},
		{"https://QUEUE.fal.run/x", true},
		{"http://queue.fal.run/x", false},
		{"https://queue.fal.run.evil.com/x", false},
		{"https://queue.fal.run@evil.com/x", false},
		{"//queue.fal.run/x", false},
	} {
		if got := SameOrigin("https://queue.fal.run", c.u); got != c.ok {
			t.Errorf("%s: %v", c.u, got)
		}
	}
}
