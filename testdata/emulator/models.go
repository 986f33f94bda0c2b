package emulator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Model metadata, served in the providers' shapes from testdata/models
// (the models' published input schemas, trimmed; gen.py writes them):
//
//   - Replicate: GET /v1/models/{owner}/{name} (latest_version with its
//     openapi_schema), GET /v1/models/{owner}/{name}/versions/{id}, and
//     QUERY /v1/models (search; the body is the query).
//   - fal: GET /api/openapi/queue/openapi.json?endpoint_id= (the
//     endpoint's OpenAPI document, public), GET /v1/models/pricing?
//     endpoint_id= and GET /v1/models?q= (the Platform API), all on the
//     fal server.
//
// Predictions and fal requests of these models are checked against the
// schema (a violation answers the provider's 422), and honour the count
// fields: num_outputs (Replicate) and num_images (fal) outputs.

type replicateModel struct {
	Description string `json:"description"`
	// Official is is_official: run through its model endpoint, refusing a
	// version and serving none (replicate.go).
	Official bool           `json:"is_official"`
	Kind     string         `json:"kind"`
	Schema   map[string]any `json:"openapi_schema"`
	path     string
	version  string
}

type models struct {
	replicate map[string]*replicateModel
	fal       map[string]map[string]any
	prices    []any
}

var (
	modelsOnce sync.Once
	loaded     models
)

func modelData() *models {
	modelsOnce.Do(func() {
		loaded = models{replicate: map[string]*replicateModel{}, fal: map[string]map[string]any{}}
		dir := filepath.Join(fixtureDir, "models")
		rs, _ := filepath.Glob(filepath.Join(dir, "replicate", "*.json"))
		for _, f := range rs {
			var m replicateModel
			mustJSON(f, &m)
			m.path = strings.ReplaceAll(strings.TrimSuffix(filepath.Base(f), ".json"), "__", "/")
			sum := sha256.Sum256([]byte(m.path))
			m.version = hex.EncodeToString(sum[:])
			loaded.replicate[m.path] = &m
		}
		fs, _ := filepath.Glob(filepath.Join(dir, "fal", "*__*.json"))
		for _, f := range fs {
			var doc map[string]any
			mustJSON(f, &doc)
			loaded.fal[strings.ReplaceAll(strings.TrimSuffix(filepath.Base(f), ".json"), "__", "/")] = doc
		}
		var p struct {
			Prices []any `json:"prices"`
		}
		mustJSON(filepath.Join(dir, "fal", "pricing.json"), &p)
		loaded.prices = p.Prices
	})
	return &loaded
}

func mustJSON(path string, v any) {
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		panic(fmt.Sprintf("emulator: %s: %v", path, err))
	}
}

// ReplicateVersion is the version id the emulator gives a Replicate
// model of testdata/models.
func ReplicateVersion(path string) string {
	if m := modelData().replicate[path]; m != nil {
		return m.version
	}
	return ""
}

// modelsDown holds the emulators whose model metadata is down.
var modelsDown sync.Map // *Emulator → bool

// SetModelsDown makes the model metadata endpoints (schemas, pricing,
// search) answer 503, as a provider outage would.
func (e *Emulator) SetModelsDown(down bool) { modelsDown.Store(e, down) }

// ModelFetches counts schema document requests (both providers, answered
// or refused).
func (e *Emulator) ModelFetches() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts["models/schema"]
}

func (e *Emulator) metaDown(w http.ResponseWriter) bool {
	v, _ := modelsDown.Load(e)
	down, _ := v.(bool)
	if down {
		writeJSON(w, 503, map[string]any{"detail": "Service Unavailable", "status": 503})
	}
	return down
}

func (e *Emulator) replicateModelObject(m *replicateModel) map[string]any {
	var example any
	if m.Kind == "video" {
		example = map[string]any{"output": "https://replicate.delivery/example/output.mp4"}
	} else {
		example = map[string]any{"output": []any{"https://replicate.delivery/example/out-0.webp"}}
	}
	owner, name, _ := strings.Cut(m.path, "/")
	return map[string]any{
		"url": "https://replicate.com/" + m.path, "owner": owner, "name": name, "description": m.Description,
		"visibility": "public", "github_url": nil, "paper_url": nil, "license_url": nil, "run_count": 1000,
		"cover_image_url": nil, "default_example": example, "is_official": m.Official,
		"latest_version": m.versionObject(),
	}
}

func (m *replicateModel) versionObject() map[string]any {
	return map[string]any{"id": m.version, "created_at": "2026-01-01T00:00:00.000000Z", "cog_version": "0.16.8", "openapi_schema": m.Schema}
}

// replicateModels serves /v1/models and below; ok is false when the path
// is not one of them.
func (e *Emulator) replicateModels(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	if r.Method == "QUERY" && p == "/v1/models" {
		if e.metaDown(w) {
			return true
		}
		q, _ := io.ReadAll(io.LimitReader(r.Body, 1<<10))
		e.replicateSearch(w, strings.ToLower(strings.TrimSpace(string(q))))
		return true
	}
	if r.Method != http.MethodGet || !strings.HasPrefix(p, "/v1/models/") {
		return false
	}
	parts := strings.Split(strings.TrimPrefix(p, "/v1/models/"), "/")
	if len(parts) < 2 || len(parts) > 4 || (len(parts) > 2 && parts[2] != "versions") {
		return false
	}
	e.mu.Lock()
	e.counts["models/schema"]++
	e.mu.Unlock()
	if e.metaDown(w) {
		return true
	}
	m := e.replicateModel(parts[0] + "/" + parts[1])
	// Official models serve no versions (vendors-2026-12.md item 5).
	if m == nil || (len(parts) > 2 && m.Official) || (len(parts) == 4 && parts[3] != m.version) {
		writeJSON(w, 404, map[string]any{"detail": "Not found.", "status": 404})
		return true
	}
	switch len(parts) {
	case 4:
		writeJSON(w, 200, m.versionObject())
	case 3:
		writeJSON(w, 200, map[string]any{"next": nil, "previous": nil, "results": []any{m.versionObject()}})
	default:
		writeJSON(w, 200, e.replicateModelObject(m))
	}
	return true
}

func (e *Emulator) replicateSearch(w http.ResponseWriter, q string) {
	all := e.replicateAll()
	var results []any
	for _, path := range sortedKeys(all) {
		m := all[path]
		if q == "" || strings.Contains(strings.ToLower(path+" "+m.Description), q) {
			results = append(results, e.replicateModelObject(m))
		}
	}
	if results == nil {
		results = []any{}
	}
	writeJSON(w, 200, map[string]any{"next": nil, "previous": nil, "results": results})
}

// falMeta serves fal's OpenAPI documents, pricing and search; ok is false
// when the path is not one of them.
func (e *Emulator) falMeta(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/openapi/queue/openapi.json":
		e.mu.Lock()
		e.counts["models/schema"]++
		e.mu.Unlock()
		if e.metaDown(w) {
			return true
		}
		doc := e.falDoc(q.Get("endpoint_id"))
		if doc == nil {
			writeJSON(w, 404, map[string]any{"detail": "Endpoint not found"})
			return true
		}
		writeJSON(w, 200, doc)
		return true
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models/pricing":
		if e.metaDown(w) {
			return true
		}
		prices := e.falPrices(q.Get("endpoint_id"))
		if prices == nil {
			writeJSON(w, 404, map[string]any{"error": map[string]any{"type": "not_found", "message": "No pricing found for the requested endpoints"}})
			return true
		}
		writeJSON(w, 200, map[string]any{"prices": prices, "next_cursor": nil, "has_more": false})
		return true
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		if e.metaDown(w) {
			return true
		}
		text, only := strings.ToLower(q.Get("q")), q["endpoint_id"]
		var out []any
		all := e.falAll()
		for _, id := range sortedKeys(all) {
			if len(only) > 0 && !slices.Contains(only, id) || e.gone("fal", id) {
				continue
			}
			info, _ := all[id]["info"].(map[string]any)
			meta, _ := info["x-fal-metadata"].(map[string]any)
			desc, _ := info["description"].(string)
			if text != "" && !strings.Contains(strings.ToLower(id+" "+desc), text) {
				continue
			}
			name, _ := meta["display_name"].(string) // a published model's, else its id
			if name == "" {
				name = id
			}
			out = append(out, map[string]any{"endpoint_id": id, "metadata": map[string]any{
				"display_name": name, "category": meta["category"], "description": desc, "status": "active"}})
		}
		if out == nil {
			out = []any{}
		}
		writeJSON(w, 200, map[string]any{"models": out, "next_cursor": nil, "has_more": false})
		return true
	}
	return false
}

// count is how many outputs a job's input asks for (1..8), or its
// prompt's [many:N].
func count(j *job) int {
	if n := hostileCount(j); n > 0 {
		return n
	}
	for _, k := range []string{"num_outputs", "num_images"} {
		if n, ok := j.input[k].(float64); ok && n >= 1 {
			return int(min(n, 8))
		}
	}
	return 1
}

// imageOutputs lists an image job's file URLs, one per requested output.
func (e *Emulator) imageOutputs(j *job) []string {
	first := e.outputs(j)
	out := []string{first[0]}
	for i := 1; i < count(j); i++ {
		out = append(out, strings.TrimSuffix(first[0], "out-0.png")+fmt.Sprintf("out-%d.png", i))
	}
	return out
}

// inputSchema finds the input object and its definitions of a model the
// emulator knows (nil: it checks nothing).
func inputSchema(prov, model string) (props map[string]any, defs map[string]any) {
	d := modelData()
	var doc map[string]any
	name := "Input"
	if prov == "replicate" {
		if m := d.replicate[model]; m != nil {
			doc = m.Schema
		}
	} else if doc = d.fal[model]; doc != nil {
		body := dig(doc, "paths", "/"+model, "post", "requestBody", "content", "application/json", "schema", "$ref")
		ref, _ := body.(string)
		name = strings.TrimPrefix(ref, "#/components/schemas/")
	}
	if doc == nil {
		return nil, nil
	}
	defs, _ = dig(doc, "components", "schemas").(map[string]any)
	props, _ = dig(defs, name, "properties").(map[string]any)
	return props, defs
}

// invalid is the first field of input the schema refuses: the field, a
// short rule name (Cog's and pydantic's words) and a message.
func invalid(props, defs map[string]any, input map[string]any) (field, rule, msg string) {
	for _, k := range sortedKeys(input) {
		p, ok := props[k].(map[string]any)
		if !ok {
			continue // Cog and fal ignore fields they do not declare
		}
		s := map[string]any{}
		for kk, v := range p {
			s[kk] = v
		}
		for _, key := range []string{"allOf", "anyOf"} {
			if xs, ok := p[key].([]any); ok {
				for _, x := range xs {
					if ref, ok := dig(x, "$ref").(string); ok {
						if m, ok := defs[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any); ok && m["enum"] != nil {
							s["enum"] = m["enum"]
						}
					} else if en := dig(x, "enum"); en != nil {
						s["enum"] = en
					}
				}
			}
		}
		v := input[k]
		if en, ok := s["enum"].([]any); ok && !slices.ContainsFunc(en, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(v) }) {
			if _, isObj := v.(map[string]any); !isObj {
				return k, "enum", fmt.Sprintf("%s must be one of the following: %v", k, en)
			}
		}
		n, isNum := v.(float64)
		switch s["type"] {
		case "integer":
			if !isNum || n != math.Trunc(n) {
				return k, "type_error", k + " must be an integer"
			}
		case "number":
			if !isNum {
				return k, "type_error", k + " must be a number"
			}
		case "string":
			if _, ok := v.(string); !ok {
				return k, "type_error", k + " must be a string"
			}
		case "boolean":
			if _, ok := v.(bool); !ok {
				return k, "type_error", k + " must be a boolean"
			}
		}
		if isNum {
			if mx, ok := s["maximum"].(float64); ok && n > mx {
				return k, "less_than_equal", fmt.Sprintf("Must be less than or equal to %v", mx)
			}
			if mn, ok := s["minimum"].(float64); ok && n < mn {
				return k, "greater_than_equal", fmt.Sprintf("Must be greater than or equal to %v", mn)
			}
		}
	}
	return "", "", ""
}

// replicateInvalid answers Replicate's 422 for an input its model's schema
// refuses; false when it is valid.
func replicateInvalid(w http.ResponseWriter, model string, input map[string]any) bool {
	props, defs := inputSchema("replicate", model)
	field, rule, msg := invalid(props, defs, input)
	if field == "" {
		return false
	}
	writeJSON(w, 422, map[string]any{"title": "Input validation failed", "status": 422,
		"detail":         fmt.Sprintf("- input.%s: %s", field, msg),
		"invalid_fields": []any{map[string]any{"type": rule, "field": "input." + field, "description": msg}}})
	return true
}

// falInvalid answers fal's 422 (pydantic's detail list) likewise.
func falInvalid(w http.ResponseWriter, endpoint string, input map[string]any) bool {
	props, defs := inputSchema("fal", endpoint)
	field, rule, msg := invalid(props, defs, input)
	if field == "" {
		return false
	}
	writeJSON(w, 422, map[string]any{"detail": []any{map[string]any{"loc": []any{"body", field}, "msg": msg, "type": rule}}})
	return true
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
