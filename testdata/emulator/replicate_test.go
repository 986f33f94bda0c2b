package emulator

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// replicateDo sends one request to the emulator's Replicate and decodes
// the reply.
func replicateDo(t *testing.T, em *Emulator, method, path string, hdr map[string]string, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, em.Replicate.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer r8_test")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return resp, v
}

// TestReplicateThrottled: a 429 says Replicate's documented text with the
// wait of its Retry-After; at one second it is the fixture, word for word.
func TestReplicateThrottled(t *testing.T) {
	em := New(Options{})
	defer em.Close()
	var fixture map[string]any
	json.Unmarshal(Fixture("replicate", "error_429.json"), &fixture)
	for _, tt := range []struct {
		after time.Duration
		want  map[string]any
	}{
		{time.Second, fixture},
		{7 * time.Second, map[string]any{"detail": "Request was throttled. Expected available in 7 seconds."}},
	} {
		em.Inject(Rule{Provider: "replicate", Op: OpStatus, Fault: Fault429, Times: 1, RetryAfter: tt.after})
		resp, v := replicateDo(t, em, "GET", "/v1/predictions/x", nil, "")
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != strings.TrimSuffix(tt.after.String(), "s") || !reflect.DeepEqual(v, tt.want) {
			t.Errorf("%v: %d, Retry-After %q, %v; want %v", tt.after, resp.StatusCode, resp.Header.Get("Retry-After"), v, tt.want)
		}
	}
}
