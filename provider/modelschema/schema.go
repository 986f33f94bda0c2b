package modelschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Bounds on a provider's schema document, checked on its bytes before it
// is decoded: a hostile or broken document costs at most this much.
const (
	MaxSchemaBytes = 256 << 10
	MaxSchemaDepth = 48
	// MaxFields bounds the input fields a model may declare.
	MaxFields = 200
)

// Format names how a provider publishes its schema: its adapter's word,
// stored with the document (Info.Format), read by its Dialect's Layout.
type Format string

// Layout is where an OpenAPI document keeps a model's input and output
// schemas.
type Layout int

const (
	// LayoutComponents: the input is components.schemas.Input, the output
	// components.schemas.Output (a Cog model version's openapi_schema).
	LayoutComponents Layout = iota + 1
	// LayoutPaths: the input is the JSON request body of the endpoint's
	// POST (paths keyed by the endpoint), the output the 200 reply of GET
	// .../requests/{request_id} (a queue's per-endpoint document).
	LayoutPaths
)

// Field is one input field, trimmed to what a caller needs.
type Field struct {
	Name        string   `json:"name"`
	Type        string   `json:"type,omitempty"`
	Format      string   `json:"format,omitempty"`
	Description string   `json:"description,omitempty"`
	Enum        []any    `json:"enum,omitempty"`
	Minimum     *float64 `json:"minimum,omitempty"`
	Maximum     *float64 `json:"maximum,omitempty"`
	Default     any      `json:"default,omitempty"`
	Required    bool     `json:"required,omitempty"`
	// Items is the element type of an array field.
	Items string `json:"items,omitempty"`
}

// Schema is a model's input schema, compiled for validation.
type Schema struct {
	Fields []Field
	// OutputPath is where the files are in a result (catalog.OutputMap
	// Path), and OutputKind what they are, when the output schema says.
	OutputPath string
	OutputKind provider.Kind
	// Closed: the schema refuses fields it does not name.
	Closed   bool
	resolved *jsonschema.Resolved
	shape    *shape
	byName   map[string]int
}

// Field looks a field up by name.
func (s *Schema) Field(name string) (Field, bool) {
	i, ok := s.byName[name]
	if !ok {
		return Field{}, false
	}
	return s.Fields[i], true
}

// CheckBounds refuses a document over MaxSchemaBytes or nested deeper
// than MaxSchemaDepth, from its bytes alone.
func CheckBounds(b []byte, maxBytes, maxDepth int) error {
	if len(b) > maxBytes {
		return fmt.Errorf("is %d bytes; the limit is %d", len(b), maxBytes)
	}
	depth, inStr, esc := 0, false, false
	for _, c := range b {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			if depth++; depth > maxDepth {
				return fmt.Errorf("nests deeper than %d levels", maxDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// Compile extracts the input schema from a provider's document, laid out
// as l. endpoint is the model's path, which LayoutPaths keys the paths by
// (LayoutComponents ignores it).
func Compile(l Layout, doc []byte, endpoint string) (*Schema, error) {
	if err := CheckBounds(doc, MaxSchemaBytes, MaxSchemaDepth); err != nil {
		return nil, fmt.Errorf("the model's schema %w", err)
	}
	var root map[string]any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, fmt.Errorf("the model's schema is not JSON: %w", err)
	}
	defs, _ := dig(root, "components", "schemas").(map[string]any)
	var input, output any
	switch l {
	case LayoutComponents:
		input, output = defs["Input"], defs["Output"]
	case LayoutPaths:
		input, output = pathBodies(root, endpoint)
	default:
		return nil, fmt.Errorf("unknown schema layout %d", l)
	}
	in, ok := deref(input, defs).(map[string]any)
	if !ok {
		return nil, errors.New("the model's schema has no input object")
	}
	s := &Schema{byName: map[string]int{}}
	if err := s.fields(in, defs); err != nil {
		return nil, err
	}
	s.OutputPath, s.OutputKind = outputOf(output, defs)
	if ap, ok := in["additionalProperties"].(bool); ok && !ap {
		s.Closed = true
	}
	// The validating schema: the input object without "required" (darkroom
	// fills prompt and the image fields; CheckInput checks the rest), its
	// definitions under $defs, OpenAPI 3.0's words made 2020-12's.
	v := map[string]any{}
	for k, x := range in {
		if k != "required" {
			v[k] = x
		}
	}
	v["$defs"] = defs
	clean, err := json.Marshal(sanitize(v))
	if err != nil {
		return nil, err
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(clean, &js); err != nil {
		return nil, fmt.Errorf("the model's schema cannot be read: %w", err)
	}
	if s.shape, err = measure(&js); err != nil {
		return nil, err
	}
	rs, err := js.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("the model's schema cannot be used: %w", err)
	}
	s.resolved = rs
	return s, nil
}

// pathBodies finds the endpoint's POST request body and result schemas.
func pathBodies(root map[string]any, endpoint string) (input, output any) {
	paths, _ := root["paths"].(map[string]any)
	for _, k := range sortedKeys(paths) {
		p, _ := paths[k].(map[string]any)
		if strings.Contains(k, "/requests/") {
			if strings.HasSuffix(k, "{request_id}") && output == nil {
				output = dig(p, "get", "responses", "200", "content", "application/json", "schema")
			}
			continue
		}
		if input == nil && (endpoint == "" || strings.Trim(k, "/") == endpoint) {
			input = dig(p, "post", "requestBody", "content", "application/json", "schema")
		}
	}
	return input, output
}

// outputOf reads where the files are from the output schema.
func outputOf(output any, defs map[string]any) (string, provider.Kind) {
	o, _ := deref(output, defs).(map[string]any)
	if o == nil {
		return "", ""
	}
	if props, ok := o["properties"].(map[string]any); ok {
		for _, c := range []struct {
			field, path string
			kind        provider.Kind
		}{{"images", "images[*]", provider.KindImage}, {"video", "video", provider.KindVideo},
			{"image", "image", provider.KindImage}, {"videos", "videos[*]", provider.KindVideo}} {
			if _, ok := props[c.field]; ok {
				return c.path, c.kind
			}
		}
		return "", ""
	}
	return "", "" // Cog's output: a URI or a list of URIs at the root
}

// fields fills s.Fields from the input object's properties, in the
// schema's x-order (Cog's), then by name.
func (s *Schema) fields(in map[string]any, defs map[string]any) error {
	props, _ := in["properties"].(map[string]any)
	if len(props) > MaxFields {
		return fmt.Errorf("the model's schema declares %d input fields; the limit is %d", len(props), MaxFields)
	}
	req := map[string]bool{}
	if rs, ok := in["required"].([]any); ok {
		for _, r := range rs {
			if n, ok := r.(string); ok {
				req[n] = true
			}
		}
	}
	names := sortedKeys(props)
	order := func(n string) float64 {
		p, _ := props[n].(map[string]any)
		if o, ok := p["x-order"].(float64); ok {
			return o
		}
		return 1e9
	}
	slices.SortStableFunc(names, func(a, b string) int {
		switch oa, ob := order(a), order(b); {
		case oa < ob:
			return -1
		case oa > ob:
			return 1
		}
		return 0
	})
	for _, n := range names {
		p, _ := props[n].(map[string]any)
		f := Field{Name: n, Required: req[n]}
		f.Description, _ = p["description"].(string)
		f.Default = p["default"]
		merged := flatten(p, defs)
		f.Type, _ = merged["type"].(string)
		if ts, ok := merged["type"].([]any); ok { // ["string","null"]
			for _, t := range ts {
				if t, ok := t.(string); ok && t != "null" {
					f.Type = t
					break
				}
			}
		}
		f.Format, _ = merged["format"].(string)
		if e, ok := merged["enum"].([]any); ok {
			f.Enum = e
		}
		f.Minimum, f.Maximum = num(merged["minimum"]), num(merged["maximum"])
		if it, ok := deref(merged["items"], defs).(map[string]any); ok {
			f.Items, _ = it["type"].(string)
			if f.Items == "string" {
				if fm, _ := it["format"].(string); fm != "" {
					f.Items = "string (" + fm + ")"
				}
			}
		}
		if len(f.Description) > 500 {
			f.Description = f.Description[:500] + "…"
		}
		s.byName[n] = len(s.Fields)
		s.Fields = append(s.Fields, f)
	}
	return nil
}

// flatten merges a property with what its $ref, allOf and anyOf members
// say (Cog writes an enum as allOf:[{$ref}]; fal's optional fields are
// anyOf:[{type},{type:null}]), one level deep.
func flatten(p map[string]any, defs map[string]any) map[string]any {
	out := map[string]any{}
	add := func(m map[string]any) {
		for k, v := range m {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
	}
	add(p)
	if r, ok := deref(p, defs).(map[string]any); ok {
		add(r)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		xs, _ := p[k].([]any)
		for _, x := range xs {
			if m, ok := deref(x, defs).(map[string]any); ok {
				if t, _ := m["type"].(string); t == "null" {
					continue
				}
				add(m)
			}
		}
	}
	return out
}

// deref follows one local "#/components/schemas/X" (or "#/$defs/X") ref.
func deref(v any, defs map[string]any) any {
	for range 4 {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		name, ok := localRef(ref)
		if !ok {
			return nil
		}
		v = defs[name]
	}
	return v
}

func localRef(ref string) (string, bool) {
	for _, p := range []string{"#/components/schemas/", "#/$defs/"} {
		if n, ok := strings.CutPrefix(ref, p); ok && n != "" && !strings.Contains(n, "/") {
			return n, true
		}
	}
	return "", false
}

// sanitize rewrites a decoded OpenAPI schema as JSON Schema 2020-12:
// local refs into $defs, other refs removed (never fetched), the
// keywords that would move a ref's base or draft ($id, $schema, anchors,
// dynamic refs) dropped, so "#/$defs/X" always means the root's X (the
// meter follows refs the way jsonschema-go does), and the OpenAPI 3.0
// keywords that 2020-12 reads otherwise (boolean exclusiveMinimum,
// nullable, a non-array examples) dropped.
func sanitize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			switch k {
			case "$ref":
				ref, _ := x.(string)
				if n, ok := localRef(ref); ok {
					out[k] = "#/$defs/" + n
				}
				continue
			case "exclusiveMinimum", "exclusiveMaximum":
				if _, ok := x.(float64); !ok {
					continue
				}
			case "nullable", "example", "discriminator", "xml", "externalDocs", "deprecated", "readOnly", "writeOnly",
				"$id", "$schema", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef", "$recursiveAnchor", "$vocabulary":
				continue
			case "examples":
				if _, ok := x.([]any); !ok {
					continue
				}
			}
			out[k] = sanitize(x)
		}
		if n, ok := t["nullable"].(bool); ok && n {
			if ty, ok := out["type"].(string); ok {
				out["type"] = []any{ty, "null"}
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = sanitize(x)
		}
		return out
	}
	return v
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

func num(v any) *float64 {
	if f, ok := v.(float64); ok {
		return &f
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Canonical re-encodes a document compactly, for storing.
func Canonical(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}
