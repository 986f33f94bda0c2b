package modelschema_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/provider/replicate"
)

// Hostile schemas: what a model's author can publish, as the input
// object's definitions (components.schemas besides Input). Each would
// stop or stall the server if darkroom validated against it.
var hostile = []struct {
	name  string
	defs  map[string]any // besides Input
	input map[string]any // Input's properties
	want  string
}{
	{
		name:  "A → A",
		defs:  map[string]any{"A": ref("A")},
		input: map[string]any{"x": ref("A")},
		want:  "$ref cycle A → A",
	},
	{
		name: "A → B → A through allOf and anyOf",
		defs: map[string]any{
			"A": map[string]any{"allOf": []any{ref("B")}},
			"B": map[string]any{"anyOf": []any{ref("A"), map[string]any{"type": "null"}}},
		},
		input: map[string]any{"x": ref("A")},
		want:  "$ref cycle A → B → A",
	},
	{
		name:  "input → input",
		defs:  map[string]any{"Node": map[string]any{"type": "object", "properties": map[string]any{"child": ref("Node")}}},
		input: map[string]any{"tree": ref("Node")},
		want:  "$ref cycle Node → Node",
	},
	{
		name:  "a ladder of 31 rungs, each allOf two $refs to the next (2^30 visits)",
		defs:  ladder(31),
		input: map[string]any{"x": ref("R0")},
		want:  "expands to more than 5000 nodes",
	},
	{
		name:  "a chain of 200 $refs",
		defs:  chain(200),
		input: map[string]any{"x": ref("C0")},
		want:  "nests 403 levels deep",
	},
	{
		name:  "a pattern of 4,000 instructions",
		input: map[string]any{"x": map[string]any{"type": "string", "pattern": "[a-z]{1,999}[a-z]{1,999}0"}},
		want:  "a pattern of 3997 regexp instructions",
	},
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// ladder is R0 … Rn-1, each allOf two $refs to the next: 2^n paths.
func ladder(n int) map[string]any {
	defs := map[string]any{fmt.Sprintf("R%d", n): map[string]any{"type": "integer"}}
	for i := range n {
		next := fmt.Sprintf("R%d", i+1)
		defs[fmt.Sprintf("R%d", i)] = map[string]any{"allOf": []any{ref(next), ref(next)}}
	}
	return defs
}

// chain is C0 … Cn-1, each allOf a $ref to the next.
func chain(n int) map[string]any {
	defs := map[string]any{fmt.Sprintf("C%d", n): map[string]any{"type": "integer"}}
	for i := range n {
		defs[fmt.Sprintf("C%d", i)] = map[string]any{"allOf": []any{ref(fmt.Sprintf("C%d", i+1))}}
	}
	return defs
}

// cogSchema is a Cog openapi_schema with this Input and these definitions.
// It has a prompt, as a model darkroom would run must.
func cogSchema(input map[string]any, defs map[string]any) map[string]any {
	props := map[string]any{"prompt": map[string]any{"type": "string"}}
	for k, v := range input {
		props[k] = v
	}
	schemas := map[string]any{"Input": map[string]any{"type": "object", "properties": props}}
	for k, v := range defs {
		schemas[k] = v
	}
	return map[string]any{"components": map[string]any{"schemas": schemas}}
}

// falDoc is fal's per-endpoint OpenAPI document with this input body.
func falDoc(endpoint string, input map[string]any, defs map[string]any) map[string]any {
	doc := cogSchema(input, defs)
	doc["paths"] = map[string]any{"/" + endpoint: map[string]any{"post": map[string]any{"requestBody": map[string]any{
		"content": map[string]any{"application/json": map[string]any{"schema": ref("Input")}}}}}}
	return doc
}

func compile(t testing.TB, input, defs map[string]any) (*modelschema.Schema, error) {
	t.Helper()
	b, err := json.Marshal(cogSchema(input, defs))
	if err != nil {
		t.Fatal(err)
	}
	return modelschema.Compile(modelschema.LayoutComponents, b, "")
}

// TestHostileSchemasRefusedWhenStored publishes each hostile schema on
// the emulator's Replicate and fal and resolves it as describe_model
// does: refused with the reason, before any input meets it. Without the
// refusal the first two end the test binary in a stack overflow at
// CheckInput, and the ladder does not finish.
func TestHostileSchemasRefusedWhenStored(t *testing.T) {
	f := newFixture(t)
	r := f.registry(t, "replicate:evil/*,fal:evil/*", "replicate", "fal")
	for i, tt := range hostile {
		path := fmt.Sprintf("evil/m%d", i)
		f.em.PublishReplicate(path, "image", "a model", cogSchema(tt.input, tt.defs))
		f.em.PublishFal(path, falDoc(path, tt.input, tt.defs))
		for _, id := range []string{"replicate:" + path, "fal:" + path} {
			_, err := r.Resolve(context.Background(), id)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s (%s): %v; want %q", tt.name, id, err, tt.want)
			}
			if _, stored := f.store.m[id]; stored {
				t.Errorf("%s (%s): stored", tt.name, id)
			}
		}
	}
}

// TestStoredHostileSchemaRefusedOnLoad: a schema stored before these
// checks existed is compiled again when read and refused; it is not
// served even while the provider is down (when a stored copy otherwise
// is), and it is not the provider's copy that refused it.
func TestStoredHostileSchemaRefusedOnLoad(t *testing.T) {
	f := newFixture(t)
	r := f.registry(t, "replicate:evil/*", "replicate")
	b, _ := json.Marshal(cogSchema(hostile[1].input, hostile[1].defs))
	info, _ := json.Marshal(modelschema.Info{Format: replicate.SchemaFormat, Doc: b, Kind: "image"})
	f.store.m["replicate:evil/old"] = modelschema.Stored{ModelID: "replicate:evil/old", Info: info, FetchedAt: f.now}
	f.em.SetModelsDown(true)
	if m, err := r.Resolve(context.Background(), "replicate:evil/old"); err == nil || m != nil {
		t.Fatalf("stored cycle served while the provider is down (err %v, model %v)", err, m != nil)
	}
}

// TestValidationMetered: schemas within the bounds, inputs that would
// make jsonschema-go's work outgrow them. Each costly input is valid, so
// only the meter refuses it (free, naming the bound), before
// jsonschema-go runs; an input a person would send still passes.
func TestValidationMetered(t *testing.T) {
	ints := func(n int) []any {
		xs := make([]any, n)
		for i := range xs {
			xs[i] = float64(i)
		}
		return xs
	}
	enum := make([]any, 30_000)
	for i := range enum {
		enum[i] = float64(i)
	}
	arrayOf := func(items map[string]any) map[string]any { return map[string]any{"type": "array", "items": items} }
	for _, tt := range []struct {
		name       string
		input      map[string]any
		defs       map[string]any
		ok, costly map[string]any
	}{
		{
			name:   "the widest ladder allowed, per array element",
			input:  map[string]any{"xs": arrayOf(ref("R0"))},
			defs:   ladder(9),
			ok:     map[string]any{"xs": ints(3)},
			costly: map[string]any{"xs": ints(1000)},
		},
		{
			name:   "a 1,202-instruction pattern against 60,000 characters",
			input:  map[string]any{"s": map[string]any{"type": "string", "pattern": "[a-z]{1,600}0"}},
			ok:     map[string]any{"s": "abc0"},
			costly: map[string]any{"s": strings.Repeat("a", 60_000) + "0"},
		},
		{
			name:   "an enum of 30,000 values, per array element",
			input:  map[string]any{"xs": arrayOf(map[string]any{"enum": enum})},
			ok:     map[string]any{"xs": ints(10)},
			costly: map[string]any{"xs": ints(40)},
		},
		{
			name:   "patternProperties against many keys",
			input:  map[string]any{"o": map[string]any{"type": "object", "patternProperties": map[string]any{"[a-z]{1,600}0": map[string]any{}}}},
			ok:     map[string]any{"o": map[string]any{"k0": 1}},
			costly: map[string]any{"o": manyKeys(4000)},
		},
	} {
		s, err := compile(t, tt.input, tt.defs)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if err := s.CheckInput(context.Background(), "m", tt.ok, nil); err != nil {
			t.Errorf("%s: a small input: %v", tt.name, err)
		}
		err = s.CheckInput(context.Background(), "m", tt.costly, nil)
		var ie *modelschema.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "too costly to check against m's schema") {
			t.Errorf("%s: a costly input: %v", tt.name, err)
		}
	}
}

func manyKeys(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("key%05d%s0", i, strings.Repeat("a", 10))] = 1
	}
	return m
}

// TestValidationStopsWhenTheCallerLeaves: the meter checks the request's
// context as it counts, so a caller gone mid-check stops the work.
func TestValidationStopsWhenTheCallerLeaves(t *testing.T) {
	s, err := compile(t, map[string]any{"xs": map[string]any{"type": "array", "items": ref("R0")}}, ladder(8))
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]any, 10)
	for i := range xs {
		xs[i] = float64(i)
	}
	in := map[string]any{"xs": xs}
	if err := s.CheckInput(context.Background(), "m", in, nil); err != nil {
		t.Fatalf("with the caller here: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.CheckInput(ctx, "m", in, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("with the caller gone: %v; want context.Canceled", err)
	}
}

// BenchmarkWorstSchema measures validation against the costliest schemas
// the bounds admit (within 256 KiB and 48 levels, and the expansion
// bounds) with the largest input of each shape the meter admits (found
// by bisection), the failing ones paying for the second pass that names
// the field; a real model's schema and input for scale.
func BenchmarkWorstSchema(b *testing.B) {
	ladderItems := map[string]any{"xs": map[string]any{"type": "array", "items": ref("R0")}}
	pattern := map[string]any{"s": map[string]any{"type": "string", "pattern": "[a-z]{1,600}0"}}
	enum := map[string]any{"xs": map[string]any{"type": "array", "items": map[string]any{"enum": intsN(30_000)}}}
	for _, w := range []struct {
		name        string
		input, defs map[string]any
		in          func(n int) map[string]any
		fails       bool
	}{
		{"ladder of 9 rungs × elements, passes", ladderItems, ladder(9), func(n int) map[string]any { return map[string]any{"xs": intsN(n)} }, false},
		{"ladder of 9 rungs × elements, fails", ladderItems, ladder(9), func(n int) map[string]any { return map[string]any{"xs": append(intsN(n), "x")} }, true},
		{"1,202-instruction pattern × chars, passes", pattern, nil, func(n int) map[string]any { return map[string]any{"s": strings.Repeat("a", n) + "0"} }, false},
		{"1,202-instruction pattern × chars, fails", pattern, nil, func(n int) map[string]any { return map[string]any{"s": strings.Repeat("a", n)} }, true},
		{"enum of 30,000 × elements, passes", enum, nil, func(n int) map[string]any { return map[string]any{"xs": intsN(n)} }, false},
		{"real: flux-schnell's 8 fields", map[string]any{
			"prompt": map[string]any{"type": "string"}, "seed": map[string]any{"type": "integer"}, "num_outputs": map[string]any{"type": "integer", "minimum": 1, "maximum": 4},
			"aspect_ratio": map[string]any{"allOf": []any{ref("AR")}}, "output_format": map[string]any{"allOf": []any{ref("OF")}},
			"output_quality": map[string]any{"type": "integer", "minimum": 0, "maximum": 100}, "go_fast": map[string]any{"type": "boolean"}, "megapixels": map[string]any{"type": "string"}},
			map[string]any{"AR": map[string]any{"enum": []any{"1:1", "16:9", "9:16"}}, "OF": map[string]any{"enum": []any{"webp", "png"}}},
			func(int) map[string]any {
				return map[string]any{"seed": 1.0, "num_outputs": 2.0, "aspect_ratio": "16:9", "output_format": "png", "output_quality": 80.0, "go_fast": true}
			}, false},
	} {
		s, err := compile(b, w.input, w.defs)
		if err != nil {
			b.Fatal(w.name, err)
		}
		admitted := func(n int) bool {
			err := s.CheckInput(context.Background(), "m", w.in(n), nil)
			return err == nil || !strings.Contains(err.Error(), "too costly")
		}
		n := 1 // the largest n admitted: double past it, then bisect
		for n < 1<<16 && admitted(2*n) {
			n *= 2
		}
		for lo, hi := n, 2*n; hi-lo > 1; {
			if mid := (lo + hi) / 2; admitted(mid) {
				lo, n = mid, mid
			} else {
				hi = mid
			}
		}
		in := w.in(n)
		b.Run(w.name, func(b *testing.B) {
			for b.Loop() {
				if err := s.CheckInput(context.Background(), "m", in, nil); (err != nil) != w.fails {
					b.Fatal(err)
				}
			}
			if n < 1<<16 {
				b.ReportMetric(float64(n), "n")
			}
		})
	}
}

func intsN(n int) []any {
	xs := make([]any, n)
	for i := range xs {
		xs[i] = float64(i)
	}
	return xs
}
