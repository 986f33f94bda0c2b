package gentools_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestResultsMatchOutputSchemas: every tool's structuredContent, for each
// shape of result it gives (a generation reserved, queued, completed,
// cancelled, a dry run, the lists, a model's description), validates
// against the outputSchema tools/list shows for it. The schemas are
// trimmed to what a model acts on; they must still hold.
func TestResultsMatchOutputSchemas(t *testing.T) {
	r := newRig(t, nil)
	r.startRunner()
	_, cs := r.session("alice")
	listed, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Resolved{}
	for _, tool := range listed.Tools {
		b, _ := json.Marshal(tool.OutputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		if schemas[tool.Name], err = s.Resolve(nil); err != nil {
			t.Fatalf("%s: outputSchema: %v", tool.Name, err)
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 64, 64)))
	img := map[string]any{"data": base64.StdEncoding.EncodeToString(buf.Bytes()), "mimeType": "image/png"}
	done := generate(t, cs, map[string]any{"modelId": "local-sketch", "prompt": "a heron", "wait": true})
	reserved := generate(t, cs, map[string]any{"modelId": "local-edit", "prompt": "erase", "inputs": []any{map[string]any{"role": "image", "image": img}, map[string]any{"role": "mask"}}})
	other := generate(t, cs, map[string]any{"modelId": "local-animate", "prompt": "ripples"})
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "a heron", "dryRun": true}},
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "a crane"}},
		{"get_generation", map[string]any{"generationId": done.GenerationID}},
		{"get_generation", map[string]any{"generationId": reserved.GenerationID}},
		{"wait_generation", map[string]any{"generationId": done.GenerationID}},
		{"download_output", map[string]any{"generationId": done.GenerationID}},
		{"upload_input", map[string]any{"generationId": reserved.GenerationID, "role": "mask", "image": img}},
		{"cancel_generation", map[string]any{"generationId": other.GenerationID}},
		{"list_generations", map[string]any{}},
		{"list_models", map[string]any{}},
		{"get_credits", map[string]any{}},
		{"describe_model", map[string]any{"modelId": "local-edit"}},
		{"search_models", map[string]any{"query": "sketch"}},
	}
	seen := map[string]bool{}
	for _, c := range calls {
		res := call(t, cs, c.tool, c.args)
		if res.IsError {
			t.Fatalf("%s %v: %s", c.tool, c.args, text(res))
		}
		b, _ := json.Marshal(res.StructuredContent)
		var v any
		_ = json.Unmarshal(b, &v)
		if err := schemas[c.tool].Validate(v); err != nil {
			t.Errorf("%s %v: %s does not match its outputSchema: %v", c.tool, c.args, b, err)
		}
		seen[c.tool] = true
	}
	for name := range schemas {
		if !seen[name] {
			t.Errorf("%s: no result checked against its outputSchema", name)
		}
	}
}

// TestDescribeLocalModelInputs: describe_model says what list_models says
// of a model's inputs (needsInputImage, roles), for the local models too,
// in its JSON and its line.
func TestDescribeLocalModelInputs(t *testing.T) {
	r := newRig(t, nil)
	_, cs := r.session("alice")
	for _, m := range r.svc.Models() {
		t.Run(m.ID, func(t *testing.T) {
			res := call(t, cs, "describe_model", map[string]any{"modelId": m.ID})
			var d struct {
				NeedsInputImage bool           `json:"needsInputImage"`
				Roles           map[string]int `json:"roles"`
			}
			decode(t, "describe_model", res, &d)
			if d.NeedsInputImage != m.NeedsInputImage || len(d.Roles) != len(m.Roles) {
				t.Fatalf("needsInputImage %v, roles %v; list_models says %v, %v", d.NeedsInputImage, d.Roles, m.NeedsInputImage, m.Roles)
			}
			for role, n := range m.Roles {
				if d.Roles[role] != n || !strings.Contains(text(res), role) {
					t.Errorf("role %s: %d, line %q; want %d and the role named", role, d.Roles[role], text(res), n)
				}
			}
			if m.NeedsInputImage != strings.Contains(text(res), "needs an input image") {
				t.Errorf("line %q", text(res))
			}
		})
	}
}

// TestCountsInWords: what the tools say of a count agrees with it: "1
// model", "2 outputs", "1 credit", never "1 models" or "output(s)".
func TestCountsInWords(t *testing.T) {
	r := newRig(t, nil)
	r.startRunner()
	_, cs := r.session("alice")
	one := generate(t, cs, map[string]any{"modelId": "local-sketch", "prompt": "a heron", "wait": true})
	cases := []struct {
		tool string
		args map[string]any
		want string // in the result's text
	}{
		{"search_models", map[string]any{"query": "local-edit"}, "1 model found"},
		{"search_models", map[string]any{"query": "local"}, "models found"},
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "dryRun": true}, "would make 1 image output for 1 credit (1 each)"},
		{"generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "dryRun": true, "count": 2}, "would make 2 image outputs for 2 credits (1 each)"},
		{"download_output", map[string]any{"generationId": one.GenerationID, "index": 1}, "has 1 output, numbered from 0"},
		{"get_generation", map[string]any{"generationId": one.GenerationID}, `"statusMessage":"completed: 1 output"`},
		{"describe_model", map[string]any{"modelId": "local-sketch"}, "1 credit per run"},
	}
	for _, c := range cases {
		got := text(call(t, cs, c.tool, c.args))
		if !strings.Contains(got, c.want) || strings.Contains(got, "(s)") || strings.Contains(got, " 1 models") || strings.Contains(got, " 1 credits") {
			t.Errorf("%s %v: %s; want %q", c.tool, c.args, got, c.want)
		}
	}
}
