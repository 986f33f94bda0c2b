package modelschema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/darkroom-mcp/darkroom/internal/words"
)

// Bounds on a caller's provider-native input, checked on its bytes before
// it is decoded, so validation costs at most this much CPU.
const (
	MaxInputBytes = 64 << 10
	MaxInputDepth = 16
)

// InputError is a refused input: Field names the field, Msg says what was
// sent and what is allowed.
type InputError struct {
	Field string
	Msg   string
}

func (e *InputError) Error() string { return e.Msg }

// DecodeInput bounds and decodes a caller's input object.
func DecodeInput(raw []byte) (map[string]any, error) {
	if err := CheckBounds(raw, MaxInputBytes, MaxInputDepth); err != nil {
		return nil, &InputError{Msg: "input " + err.Error()}
	}
	var in map[string]any
	if err := json.Unmarshal(raw, &in); err != nil || in == nil {
		return nil, &InputError{Msg: "input must be a JSON object of the model's own fields (see describe_model)"}
	}
	return in, nil
}

// CheckInput validates a caller's input against the schema. owned maps a
// field darkroom sets itself to the argument that sets it ("prompt",
// "inputs"): such a field is refused with a pointer to that argument.
// required fields darkroom does not set must be present (or defaulted).
func (s *Schema) CheckInput(ctx context.Context, modelID string, in map[string]any, owned map[string]string) error {
	for _, k := range sortedKeys(in) {
		if arg, ok := owned[k]; ok {
			return &InputError{Field: k, Msg: fmt.Sprintf("input.%s is set by darkroom's %s argument for %s: pass it there (once), not in input", k, arg, modelID)}
		}
		if _, ok := s.byName[k]; !ok {
			names := make([]string, 0, len(s.Fields))
			for _, f := range s.Fields {
				if _, own := owned[f.Name]; !own {
					names = append(names, f.Name)
				}
			}
			return &InputError{Field: k, Msg: fmt.Sprintf("input.%s: %s has no such field; its fields are %s (describe_model lists them)", k, modelID, clip(strings.Join(names, ", "), 400))}
		}
	}
	for _, f := range s.Fields {
		if _, ok := in[f.Name]; ok || !f.Required || f.Default != nil {
			continue
		}
		if _, own := owned[f.Name]; own {
			continue
		}
		return &InputError{Field: f.Name, Msg: fmt.Sprintf("input.%s is required by %s (%s)", f.Name, modelID, allowed(f))}
	}
	if s.resolved == nil {
		return nil
	}
	// Meter each validation before jsonschema-go runs it (it can neither
	// be bounded nor cancelled once started).
	m := &meter{ctx: ctx, sh: s.shape}
	valid := func(v map[string]any) (bool, error) {
		if err := m.chargeEach(v, s.shape.root); err != nil {
			if errors.Is(err, errCostly) {
				return false, &InputError{Msg: fmt.Sprintf("input is too costly to check against %s's schema (over %d schema visits or %d pattern steps): send fewer or shorter values", modelID, MaxVisits, MaxPatternSteps)}
			}
			return false, err
		}
		return s.resolved.Validate(v) == nil, nil
	}
	if ok, err := valid(in); ok || err != nil {
		return err
	}
	// Name the field: the whole object failed, so one field does.
	for _, k := range sortedKeys(in) {
		ok, err := valid(map[string]any{k: in[k]})
		if err != nil {
			return err
		}
		if !ok {
			f := s.Fields[s.byName[k]]
			return &InputError{Field: k, Msg: fmt.Sprintf("input.%s: sent %s; %s allows %s", k, show(in[k]), modelID, allowed(f))}
		}
	}
	return &InputError{Msg: fmt.Sprintf("input does not match %s's schema (describe_model shows it)", modelID)}
}

// allowed says what a field accepts, for a person.
func allowed(f Field) string {
	var b strings.Builder
	if len(f.Enum) > 0 {
		vs := make([]string, len(f.Enum))
		for i, e := range f.Enum {
			vs[i] = show(e)
		}
		b.WriteString("one of " + clip(words.Or(vs), 400))
	} else {
		t := f.Type
		if t == "" {
			t = "a value"
		}
		if f.Type == "array" && f.Items != "" {
			t = "array of " + f.Items
		}
		b.WriteString(t)
		switch {
		case f.Minimum != nil && f.Maximum != nil:
			fmt.Fprintf(&b, " from %s to %s", fnum(*f.Minimum), fnum(*f.Maximum))
		case f.Minimum != nil:
			fmt.Fprintf(&b, " ≥ %s", fnum(*f.Minimum))
		case f.Maximum != nil:
			fmt.Fprintf(&b, " ≤ %s", fnum(*f.Maximum))
		}
	}
	if f.Default != nil {
		b.WriteString(", default " + show(f.Default))
	}
	return b.String()
}

func fnum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func show(v any) string {
	b, _ := json.Marshal(v)
	return clip(string(b), 80)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
