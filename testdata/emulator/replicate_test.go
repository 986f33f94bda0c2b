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

// TestReplicateRefuses: the emulator refuses what Replicate refuses: a
// version of an official model, a community model without its version, a
// Cancel-After under 5 s or not in Replicate's form; official models
// serve no versions.
func TestReplicateRefuses(t *testing.T) {
	em := New(Options{})
	defer em.Close()
	flux, clip := ReplicateVersion("black-forest-labs/flux-schnell"), ReplicateVersion("acme/clip-maker")
	create := func(version string) string {
		return `{"version":"` + version + `","input":{"prompt":"a lighthouse"}}`
	}
	const official = `{"input":{"prompt":"a lighthouse"}}`
	for _, tt := range []struct {
		name, method, path, cancelAfter, body string
		status                                int
		want                                  map[string]any // fields of the reply
	}{
		{"official model by version", "POST", "/v1/predictions", "", create("black-forest-labs/flux-schnell:" + flux), 422, map[string]any{"title": "Invalid version or not permitted", "status": 422.0}},
		{"official model by bare version", "POST", "/v1/predictions", "", create(flux), 422, map[string]any{"title": "Invalid version or not permitted"}},
		{"official model by name", "POST", "/v1/predictions", "", create("black-forest-labs/flux-schnell"), 201, map[string]any{"model": "black-forest-labs/flux-schnell", "version": "hidden"}},
		{"official model endpoint", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", "", official, 201, map[string]any{"version": "hidden"}},
		{"community model by version", "POST", "/v1/predictions", "", create("acme/clip-maker:" + clip), 201, map[string]any{"model": "acme/clip-maker", "version": clip}},
		{"community model by bare version", "POST", "/v1/predictions", "", create(clip), 201, map[string]any{"model": "acme/clip-maker", "version": clip}},
		{"community model without version", "POST", "/v1/predictions", "", create("acme/clip-maker"), 422, map[string]any{"title": "Invalid version or not permitted"}},
		{"community model, another version", "POST", "/v1/predictions", "", create("acme/clip-maker:" + flux), 422, map[string]any{"title": "Invalid version or not permitted"}},
		{"official versions", "GET", "/v1/models/black-forest-labs/flux-schnell/versions", "", "", 404, nil},
		{"official version", "GET", "/v1/models/black-forest-labs/flux-schnell/versions/" + flux, "", "", 404, nil},
		{"community versions", "GET", "/v1/models/acme/clip-maker/versions", "", "", 200, nil},
		{"official model object", "GET", "/v1/models/black-forest-labs/flux-schnell", "", "", 200, map[string]any{"is_official": true}},
		{"community model object", "GET", "/v1/models/acme/clip-maker", "", "", 200, map[string]any{"is_official": false}},
		{"Cancel-After 4s", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", "4s", official, 400, map[string]any{"status": 400.0}},
		{"Cancel-After 4 (seconds)", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", "4", official, 400, nil},
		{"Cancel-After 4999ms", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", "4999ms", official, 400, nil},
		{"Cancel-After 1.5h", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", "1.5h", official, 400, nil},
		{"Cancel-After 5s", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", "5s", official, 201, nil},
		{"Cancel-After 30 (seconds)", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", "30", official, 201, nil},
		{"Cancel-After 1h30m45s", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", "1h30m45s", official, 201, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			jobs := em.Jobs("replicate")
			hdr := map[string]string{}
			if tt.cancelAfter != "" {
				hdr["Cancel-After"] = tt.cancelAfter
			}
			resp, v := replicateDo(t, em, tt.method, tt.path, hdr, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("%d %v, want %d", resp.StatusCode, v, tt.status)
			}
			for k, want := range tt.want {
				if v[k] != want {
					t.Errorf("%s = %v, want %v (%v)", k, v[k], want, v)
				}
			}
			if made := em.Jobs("replicate") - jobs; (made == 1) != (tt.status == 201) {
				t.Errorf("%d jobs made", made)
			}
		})
	}
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
