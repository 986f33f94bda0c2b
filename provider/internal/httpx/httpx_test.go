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
	hh := func(kv ...string) http.Header {
		x := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			x.Set(kv[i], kv[i+1])
		}
		return x
	}
	h := func(k, v string) http.Header { return hh(k, v) }
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
		// Replicate's documented 429 bodies (replicate.com/docs/topics/predictions/rate-limits).
		{429, http.Header{}, `{"detail":"Request was throttled. Expected available in 1 second."}`, time.Second, false, "throttled"},
		{429, http.Header{}, `{"detail":"Request was throttled. Expected available in 30 seconds."}`, 30 * time.Second, false, "Expected available"},
		{429, h("Retry-After", "4"), `{"detail":"Request was throttled. Expected available in 30 seconds."}`, 4 * time.Second, false, ""},
		// OpenAI's Retry-After-Ms comes before Retry-After (openai-go v3.105.0).
		{429, hh("Retry-After-Ms", "1500", "Retry-After", "7"), `{}`, 1500 * time.Millisecond, false, ""},
		{429, hh("Retry-After-Ms", "0.5"), `{}`, 500 * time.Microsecond, false, ""},
		{429, hh("Retry-After-Ms", "NaN", "Retry-After", "7"), `{}`, 7 * time.Second, false, ""},
		{429, hh("Retry-After-Ms", "-3", "Retry-After", "7"), `{}`, 7 * time.Second, false, ""},
		{429, hh("Retry-After-Ms", "1e300"), `{}`, 10 * time.Second, false, ""},
		{503, hh("Retry-After-Ms", "250"), `{}`, 250 * time.Millisecond, false, ""},
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
				var got time.Duration
				if re != nil {
					got = re.After
				}
				t.Errorf("%d %v %s: %v (after %v, want %v)", tc.status, tc.hdr, tc.body, err, got, tc.after)
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
