package emulator

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestModelsCountAndSchema: the count fields make that many outputs, and
// an input the model's schema refuses answers the provider's 422.
func TestModelsCountAndSchema(t *testing.T) {
	em := New(Options{})
	defer em.Close()
	do := func(method, url, auth, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		_ = json.Unmarshal(b, &v)
		return resp.StatusCode, v
	}
	const rep, fal = "Bearer r8_test", "Key fal_test"
	for _, tt := range []struct {
		name, url, auth, body, field string
	}{
		{"replicate range", em.Replicate.URL + "/v1/models/black-forest-labs/flux-schnell/predictions", rep, `{"input":{"prompt":"x","num_outputs":9}}`, "input.num_outputs"},
		{"replicate enum", em.Replicate.URL + "/v1/models/black-forest-labs/flux-schnell/predictions", rep, `{"input":{"prompt":"x","aspect_ratio":"7:5"}}`, "input.aspect_ratio"},
		{"fal type", em.Fal.URL + "/fal-ai/flux/schnell", fal, `{"prompt":"x","num_images":"two"}`, "num_images"},
	} {
		st, v := do("POST", tt.url, tt.auth, tt.body)
		b, _ := json.Marshal(v)
		if st != 422 || !strings.Contains(string(b), tt.field) {
			t.Errorf("%s: %d %s", tt.name, st, b)
		}
	}
	if em.Jobs("replicate")+em.Jobs("fal") != 0 {
		t.Fatal("a refused input made a job")
	}
	st, v := do("POST", em.Replicate.URL+"/v1/models/black-forest-labs/flux-schnell/predictions", rep, `{"input":{"prompt":"x","num_outputs":3}}`)
	if st != 201 {
		t.Fatal(st, v)
	}
	if st, _ := do("POST", em.Fal.URL+"/fal-ai/flux/schnell", fal, `{"prompt":"x","num_images":2}`); st != 200 {
		t.Fatal(st)
	}
	em.Advance(time.Minute)
	_, pr := do("GET", em.Replicate.URL+"/v1/predictions/"+v["id"].(string), rep, "")
	if outs, _ := pr["output"].([]any); len(outs) != 3 {
		t.Errorf("num_outputs 3: output %v", pr["output"])
	}
	_, res := do("GET", em.Fal.URL+"/fal-ai/flux/requests/00000000-0000-4000-8000-000000000002", fal, "")
	if imgs, _ := res["images"].([]any); len(imgs) != 2 || len(res["has_nsfw_concepts"].([]any)) != 2 {
		t.Errorf("num_images 2: %v", res)
	}
	// Metadata in the providers' shapes.
	if st, m := do("GET", em.Replicate.URL+"/v1/models/black-forest-labs/flux-schnell", rep, ""); st != 200 || m["latest_version"].(map[string]any)["id"] != ReplicateVersion("black-forest-labs/flux-schnell") {
		t.Errorf("model: %d %v", st, m)
	}
	if st, _ := do("GET", em.Fal.URL+"/api/openapi/queue/openapi.json?endpoint_id=fal-ai/flux/dev", "", ""); st != 200 {
		t.Errorf("fal OpenAPI document (public): %d", st)
	}
	if st, p := do("GET", em.Fal.URL+"/v1/models/pricing?endpoint_id=fal-ai/flux/dev", fal, ""); st != 200 || len(p["prices"].([]any)) != 1 {
		t.Errorf("fal pricing: %d %v", st, p)
	}
}
