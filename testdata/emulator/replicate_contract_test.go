package emulator

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Replicate's HTTP API contract, transcribed from Replicate's OpenAPI
// document as mirrored in github.com/tryAGI/Replicate,
// src/libs/Replicate/openapi.json, at commit
// 6c8ab8eafafd63aea2a114ea70079c19c88882c9 (2026-04-09; the file last
// changed in 1625ee75404d20793ab2e419eeefb554d9a1652c, 2026-03-16), read
// 2026-12-07. The document itself is not committed (fetched data stays
// out of the repository): these are its facts for the replies the
// emulator gives, named by the document's schema or operation.
//
// The document describes no error body for these operations. Those facts
// come from Replicate's own words elsewhere, each named where it is used.

// jtype is a JSON type as the document names it; "" is any value.
type jtype string

// prop is one property of an object.
type prop struct {
	typ      jtype
	nullable bool
	format   string // "date-time" or "uri"
	enum     []string
	obj      *schema // an object's own contract
	items    *schema // an array's items
}

// schema is an object's contract: its properties, the ones the document
// requires, and the ones darkroom reads (present or darkroom's reading of
// them is not tested; the document requires none of the model's).
type schema struct {
	name     string
	props    map[string]prop
	required []string
	reads    []string
}

var (
	str     = prop{typ: "string"}
	nstr    = prop{typ: "string", nullable: true}
	dateStr = prop{typ: "string", format: "date-time"}
	uriStr  = prop{typ: "string", format: "uri"}
	nuriStr = prop{typ: "string", format: "uri", nullable: true}
	boolean = prop{typ: "boolean"}
	object  = prop{typ: "object"}
	nobject = prop{typ: "object", nullable: true}
)

// predictionContract is schemas_prediction_response. "version" is oneOf a
// version id or "hidden" ("The model does not support versions, used by
// official models"): a string either way.
var predictionContract = &schema{
	name: "schemas_prediction_response",
	props: map[string]prop{
		"completed_at": dateStr, "created_at": dateStr, "data_removed": boolean, "deadline": dateStr,
		"deployment": str, "error": nstr, "id": str, "input": object, "logs": str, "metrics": object,
		"model": str, "output": {}, "source": {typ: "string", enum: []string{"web", "api"}}, "started_at": dateStr,
		"status": {typ: "string", enum: []string{"starting", "processing", "succeeded", "failed", "canceled", "aborted"}},
		"urls": {typ: "object", obj: &schema{
			name:     "schemas_prediction_response.urls",
			props:    map[string]prop{"cancel": uriStr, "get": uriStr, "stream": uriStr, "web": uriStr},
			required: []string{"web", "get", "cancel"},
		}},
		"version": str,
	},
	required: []string{"id", "model", "version", "input", "output", "data_removed", "error", "status", "created_at", "urls"},
}

// predictionListContract is predictions.list's 200 reply.
var predictionListContract = &schema{
	name:  "predictions.list 200",
	props: map[string]prop{"next": nuriStr, "previous": nuriStr, "results": {typ: "array", items: predictionContract}},
	reads: []string{"next", "results"},
}

// modelContract is schemas_model_response; it requires nothing, so reads
// are what darkroom's modelObject reads.
var modelContract = &schema{
	name: "schemas_model_response",
	props: map[string]prop{
		"cover_image_url": nuriStr, "default_example": nobject, "description": nstr, "github_url": nuriStr,
		"is_official": boolean, "latest_version": nobject, "license_url": nuriStr, "name": str, "owner": str,
		"paper_url": nuriStr, "run_count": {typ: "integer"}, "url": uriStr,
		"visibility": {typ: "string", enum: []string{"public", "private"}},
	},
	reads: []string{"owner", "name", "description", "is_official", "latest_version", "default_example"},
}

// modelListContract is models.search's (QUERY /models) 200 reply. Its
// items are the model object less is_official, with a description that
// is not nullable; darkroom's search reads no is_official.
var modelListContract = &schema{
	name: "models.search 200",
	props: map[string]prop{"next": nstr, "previous": nstr, "results": {typ: "array", items: &schema{
		name: "models.search 200 results",
		props: map[string]prop{
			"cover_image_url": nuriStr, "default_example": nobject, "description": str, "github_url": nuriStr,
			"latest_version": nobject, "license_url": nuriStr, "name": str, "owner": str,
			"paper_url": nuriStr, "run_count": {typ: "integer"}, "url": uriStr,
			"visibility": {typ: "string", enum: []string{"public", "private"}},
		},
		reads: []string{"owner", "name", "description", "default_example"},
	}}},
	reads: []string{"next", "results"},
}

// versionContract is schemas_version_response.
var versionContract = &schema{
	name:  "schemas_version_response",
	props: map[string]prop{"cog_version": nstr, "created_at": dateStr, "id": str, "openapi_schema": nobject},
	reads: []string{"id", "openapi_schema"},
}

// versionListContract is schemas_paginated_version_response.
var versionListContract = &schema{
	name:  "schemas_paginated_version_response",
	props: map[string]prop{"next": nstr, "previous": nstr, "results": {typ: "array", items: versionContract}},
}

// secretContract is webhooks.default.secret.get's 200 reply.
var secretContract = &schema{name: "webhooks.default.secret.get 200", props: map[string]prop{"key": str}, reads: []string{"key"}}

// problemContract is Replicate's error body, which the document leaves
// out: {"title", "detail", "status"}, and invalid_fields on a 422 of the
// input (replicate/replicate-javascript#249, 2024-04-30, quotes one;
// replicate/cog-flux-schnell#1, 2024-08-12, the 422 of a version). The
// one error body the document does describe (/files 404, 413) has a
// string "detail", as has the 429 (throttledRE). status, when sent, is
// the HTTP status (checked by checkProblem).
var problemContract = &schema{
	name: "problem",
	props: map[string]prop{"title": str, "detail": str, "status": {typ: "integer"},
		"invalid_fields": {typ: "array", items: &schema{name: "invalid_fields", props: map[string]prop{"type": str, "field": str, "description": str}}}},
	required: []string{"detail"},
}

// throttledRE is the 429's detail, as Replicate's rate limits page gives
// it (replicate.com/docs/topics/predictions/rate-limits, read 2026-12-07:
// "Request was throttled. Expected available in 1 second.").
var throttledRE = regexp.MustCompile(`^Request was throttled\. Expected available in (1 second|\d+ seconds)\.$`)

// check lists how v breaks s.
func (s *schema) check(at string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		return []string{fmt.Sprintf("%s: %T, want an object (%s)", at, v, s.name)}
	}
	var bad []string
	for _, k := range append(slices.Clone(s.required), s.reads...) {
		if _, ok := m[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: no %q (%s)", at, k, s.name))
		}
	}
	for k, p := range s.props {
		if x, ok := m[k]; ok {
			bad = append(bad, p.check(at+"."+k, x)...)
		}
	}
	return bad
}

func (p prop) check(at string, v any) []string {
	if v == nil {
		if p.nullable || p.typ == "" {
			return nil
		}
		return []string{at + ": null, which the document does not allow"}
	}
	wrong := []string{fmt.Sprintf("%s: %T %v, want %s", at, v, v, p.typ)}
	switch p.typ {
	case "":
		return nil
	case "string":
		s, ok := v.(string)
		if !ok {
			return wrong
		}
		if len(p.enum) > 0 && !slices.Contains(p.enum, s) {
			return []string{fmt.Sprintf("%s: %q is none of %v", at, s, p.enum)}
		}
		if _, err := time.Parse(time.RFC3339Nano, s); p.format == "date-time" && err != nil {
			return []string{fmt.Sprintf("%s: %q is not a date-time", at, s)}
		}
		if u, err := url.Parse(s); p.format == "uri" && (err != nil || !u.IsAbs()) {
			return []string{fmt.Sprintf("%s: %q is not a URI", at, s)}
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return wrong
		}
	case "integer":
		if n, ok := v.(float64); !ok || n != float64(int64(n)) {
			return wrong
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return wrong
		}
		if p.obj != nil {
			return p.obj.check(at, v)
		}
	case "array":
		xs, ok := v.([]any)
		if !ok {
			return wrong
		}
		var bad []string
		for i, x := range xs {
			if p.items != nil {
				bad = append(bad, p.items.check(fmt.Sprintf("%s[%d]", at, i), x)...)
			}
		}
		return bad
	}
	return nil
}

// checkProblem checks an error reply: the problem shape, its status the
// HTTP status, a 429's text Replicate's.
func checkProblem(status int, v any) []string {
	bad := problemContract.check("error", v)
	m, _ := v.(map[string]any)
	if s, ok := m["status"]; ok && s != float64(status) {
		bad = append(bad, fmt.Sprintf("error: status %v in a %d reply", s, status))
	}
	if d, _ := m["detail"].(string); status == 429 && !throttledRE.MatchString(d) {
		bad = append(bad, fmt.Sprintf("error: 429 detail %q is not Replicate's text", d))
	}
	return bad
}

// TestReplicateContract drives every kind of reply the emulator's
// Replicate gives (create, get in each status, list and its pages,
// cancel, webhook deliveries, model, version, versions, search, secret,
// and the errors 400, 401, 404, 422, 429 and 503) and the fixtures in
// testdata/replicate, and checks each against the document's contract.
func TestReplicateContract(t *testing.T) {
	hooks := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer hooks.Close()
	// Queued 10 s, run 10 s: a Cancel-After of 5 s aborts before the start.
	em := New(Options{PageSize: 2, Timing: func(string) (time.Duration, time.Duration) { return 10 * time.Second, 10 * time.Second }})
	defer em.Close()
	clip := ReplicateVersion("acme/clip-maker")

	type reply struct {
		name   string
		status int
		v      any
	}
	var replies []reply
	do := func(name, method, path, token string, hdr map[string]string, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, em.Replicate.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Errorf("%s: %d %q is not JSON", name, resp.StatusCode, b)
			return nil
		}
		replies = append(replies, reply{name, resp.StatusCode, v})
		m, _ := v.(map[string]any)
		return m
	}
	const tok = "r8_test"
	create := func(name, model, prompt, cancelAfter, webhook string) string {
		hdr := map[string]string{}
		if cancelAfter != "" {
			hdr["Cancel-After"] = cancelAfter
		}
		body, _ := json.Marshal(map[string]any{"input": map[string]any{"prompt": prompt}, "webhook": webhook, "webhook_events_filter": []string{"start", "completed"}})
		p := do(name, "POST", "/v1/models/"+model+"/predictions", tok, hdr, string(body))
		id, _ := p["id"].(string)
		return id
	}
	image := create("create (official, model endpoint)", "black-forest-labs/flux-schnell", "a lighthouse", "", hooks.URL)
	do("create (community, by version)", "POST", "/v1/predictions", tok, nil, `{"version":"acme/clip-maker:`+clip+`","input":{"prompt":"a clip"}}`)
	video := create("create (video, Cancel-After)", "kwaivgi/kling-v1.6-standard", "a river", "1h", "")
	failed := create("create (to fail)", "black-forest-labs/flux-schnell", "x [fail]", "", "")
	canceled := create("create (to cancel)", "black-forest-labs/flux-schnell", "to cancel", "", "")
	aborted := create("create (to abort)", "black-forest-labs/flux-schnell", "to abort", "5s", "")
	do("get starting", "GET", "/v1/predictions/"+image, tok, nil, "")
	do("cancel", "POST", "/v1/predictions/"+canceled+"/cancel", tok, nil, "")
	em.Advance(6 * time.Second)
	do("get aborted", "GET", "/v1/predictions/"+aborted, tok, nil, "")
	do("get canceled", "GET", "/v1/predictions/"+canceled, tok, nil, "")
	em.Advance(9 * time.Second)
	do("get processing", "GET", "/v1/predictions/"+image, tok, nil, "")
	em.Advance(10 * time.Second)
	do("get succeeded (image)", "GET", "/v1/predictions/"+image, tok, nil, "")
	do("get succeeded (video)", "GET", "/v1/predictions/"+video, tok, nil, "")
	do("get failed", "GET", "/v1/predictions/"+failed, tok, nil, "")
	do("cancel (after the end)", "POST", "/v1/predictions/"+image+"/cancel", tok, nil, "")
	first := do("list", "GET", "/v1/predictions", tok, nil, "")
	if next, _ := first["next"].(string); next != "" {
		do("list (next page)", "GET", strings.TrimPrefix(next, em.Replicate.URL), tok, nil, "")
	} else {
		t.Error("the list has no next page to check")
	}
	em.Advance(time.Hour)
	do("get (data removed)", "GET", "/v1/predictions/"+image, tok, nil, "")
	do("model (official)", "GET", "/v1/models/black-forest-labs/flux-schnell", tok, nil, "")
	do("model (community)", "GET", "/v1/models/acme/clip-maker", tok, nil, "")
	do("version", "GET", "/v1/models/acme/clip-maker/versions/"+clip, tok, nil, "")
	do("versions", "GET", "/v1/models/acme/clip-maker/versions", tok, nil, "")
	do("search", "QUERY", "/v1/models", tok, map[string]string{"Content-Type": "text/plain"}, "flux")
	do("webhook secret", "GET", "/v1/webhooks/default/secret", tok, nil, "")

	do("401", "GET", "/v1/predictions", "wrong", nil, "")
	do("404 prediction", "GET", "/v1/predictions/nope", tok, nil, "")
	do("404 cancel", "POST", "/v1/predictions/nope/cancel", tok, nil, "")
	do("404 model", "GET", "/v1/models/acme/nope", tok, nil, "")
	do("404 official versions", "GET", "/v1/models/black-forest-labs/flux-schnell/versions", tok, nil, "")
	do("422 input", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", tok, nil, `{"input":{"prompt":"x [invalid]"}}`)
	do("422 schema", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", tok, nil, `{"input":{"prompt":"x","num_outputs":9}}`)
	do("422 no input", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", tok, nil, `{}`)
	do("422 no version", "POST", "/v1/predictions", tok, nil, `{"input":{"prompt":"x"}}`)
	do("422 official version", "POST", "/v1/predictions", tok, nil, `{"version":"black-forest-labs/flux-schnell:`+ReplicateVersion("black-forest-labs/flux-schnell")+`","input":{"prompt":"x"}}`)
	do("400 Cancel-After", "POST", "/v1/models/black-forest-labs/flux-schnell/predictions", tok, map[string]string{"Cancel-After": "4s"}, `{"input":{"prompt":"x"}}`)
	for _, op := range []Op{OpCreate, OpStatus, OpList, OpCancel} {
		em.Inject(Rule{Provider: "replicate", Op: op, Fault: Fault429, Times: 1, RetryAfter: 3 * time.Second})
	}
	em.Inject(Rule{Provider: "replicate", Op: OpSecret, Fault: Fault429, Times: 1, RetryAfter: time.Second})
	do("429 create", "POST", "/v1/predictions", tok, nil, `{}`)
	do("429 get", "GET", "/v1/predictions/"+image, tok, nil, "")
	do("429 list", "GET", "/v1/predictions", tok, nil, "")
	do("429 cancel", "POST", "/v1/predictions/"+image+"/cancel", tok, nil, "")
	do("429 secret", "GET", "/v1/webhooks/default/secret", tok, nil, "")
	em.SetModelsDown(true)
	do("503 model", "GET", "/v1/models/acme/clip-maker", tok, nil, "")
	em.SetModelsDown(false)

	contract := map[string]*schema{
		"create": predictionContract, "get": predictionContract, "cancel": predictionContract, "list": predictionListContract,
		"model": modelContract, "version": versionContract, "versions": versionListContract, "search": modelListContract,
		"webhook": secretContract,
	}
	statuses := map[string]bool{}
	for _, r := range replies {
		var bad []string
		if r.status >= 400 {
			bad = checkProblem(r.status, r.v)
		} else {
			kind, _, _ := strings.Cut(r.name, " ")
			c := contract[kind]
			if c == nil { // an error case answered as a success
				t.Errorf("%s: answered %d", r.name, r.status)
				continue
			}
			bad = c.check(r.name, r.v)
		}
		for _, b := range bad {
			t.Errorf("%s (%d): %s", r.name, r.status, b)
		}
		if m, ok := r.v.(map[string]any); ok && r.status < 300 {
			if s, ok := m["status"].(string); ok {
				statuses[s] = true
			}
		}
	}
	if len(statuses) != 6 {
		t.Errorf("replies reached statuses %v; want all six", statuses)
	}

	deliveries := em.Deliveries()
	if len(deliveries) != 2 {
		t.Errorf("%d webhook deliveries, want start and completed", len(deliveries))
	}
	for i, d := range deliveries { // the body is the prediction, as get's
		var v any
		json.Unmarshal(d.Body, &v)
		for _, b := range predictionContract.check(fmt.Sprintf("webhook %d", i), v) {
			t.Error(b)
		}
	}

	// The fixtures are Replicate's replies too.
	fixtures, _ := filepath.Glob(filepath.Join(fixtureDir, "replicate", "*.json"))
	for _, f := range fixtures {
		name := filepath.Base(f)
		v := any(FixtureMap("replicate", name))
		var bad []string
		switch {
		case name == "prediction_list.json":
			bad = predictionListContract.check(name, v)
		case strings.HasPrefix(name, "prediction_"):
			bad = predictionContract.check(name, v)
		case name == "webhook_secret.json":
			bad = secretContract.check(name, v)
		case strings.HasPrefix(name, "error_"):
			var status int
			fmt.Sscanf(name, "error_%d.json", &status)
			bad = checkProblem(status, v)
		default:
			t.Errorf("%s: no contract for this fixture", name)
		}
		for _, b := range bad {
			t.Error(b)
		}
	}
}

// TestReplicateContractCatches: the check refuses a reply that drifts
// from the contract, one way at a time.
func TestReplicateContractCatches(t *testing.T) {
	good := func() map[string]any { return FixtureMap("replicate", "prediction_succeeded.json") }
	if bad := predictionContract.check("fixture", good()); len(bad) > 0 {
		t.Fatal(bad)
	}
	for _, tt := range []struct {
		name  string
		drift func(map[string]any)
	}{
		{"a required field dropped", func(v map[string]any) { delete(v, "data_removed") }},
		{"a status outside the enum", func(v map[string]any) { v["status"] = "done" }},
		{"a wrong type", func(v map[string]any) { v["error"] = 5.0 }},
		{"null where not nullable", func(v map[string]any) { v["started_at"] = nil }},
		{"not a date-time", func(v map[string]any) { v["created_at"] = "yesterday" }},
		{"a required URL dropped", func(v map[string]any) { delete(v["urls"].(map[string]any), "web") }},
	} {
		v := good()
		tt.drift(v)
		if bad := predictionContract.check("fixture", v); len(bad) == 0 {
			t.Errorf("%s: passed", tt.name)
		}
	}
	for status, body := range map[int]string{
		429: `{"detail":"Request was throttled. Your rate limit resets in ~30s."}`,
		422: `{"title":"Invalid version or not permitted","status":422}`,
		404: `{"detail":"Not found.","status":400}`,
	} {
		var v any
		json.Unmarshal([]byte(body), &v)
		if bad := checkProblem(status, v); len(bad) == 0 {
			t.Errorf("%d %s: passed", status, body)
		}
	}
}
