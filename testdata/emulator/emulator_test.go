package emulator

import (
	"net/http"
	"strings"
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
