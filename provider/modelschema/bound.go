package modelschema

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp/syntax"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// The work one validation may do, whatever the schema's author wrote.
// Anyone can publish a model, so its schema is untrusted: a $ref cycle
// would recurse until the stack overflows, a ladder of allOf over $refs
// doubles the work at every rung, and a pattern costs its program size
// times the string it matches. Compile refuses what no input could pass
// within these bounds; CheckInput meters each input before it validates.
const (
	// MaxSchemaNodes bounds the schema nodes one value can meet: the
	// input schema with every $ref expanded in place.
	MaxSchemaNodes = 5_000
	// MaxSchemaNesting bounds the depth of that expansion (jsonschema-go
	// recurses once per level and wraps its error at each).
	MaxSchemaNesting = 128
	// MaxPatternInsts bounds one pattern's compiled program (Go's regexp
	// is linear in input × program).
	MaxPatternInsts = 2_000
	// MaxVisits bounds the (schema node, value) pairs one CheckInput
	// visits, counting every branch, the element schemas once per element
	// and the second pass that names a failing field.
	MaxVisits = 25_000
	// MaxPatternSteps bounds the cheap steps one CheckInput makes: Σ
	// program size × string length over its pattern matches, and
	// enumStep per enum member an equality test may compare.
	MaxPatternSteps = 4_000_000
	enumStep        = 4 // a reflective equality test is about 4 regexp steps
)

// shape is what Compile learns of the validating schema by walking it
// with every $ref followed: nodes and nesting as an input meets them, and
// each pattern's program size (the metering reads it).
type shape struct {
	root  *jsonschema.Schema
	defs  map[string]*jsonschema.Schema
	insts map[string]int
	// enums is each enum's size in JSON values: what one equality test of
	// a value against all its members can cost.
	enums map[*jsonschema.Schema]int
}

// measure walks the schema from root, following local $refs, and refuses
// a $ref cycle, an expansion over MaxSchemaNodes or MaxSchemaNesting, and
// a pattern over MaxPatternInsts. $defs not reached are never visited.
func measure(root *jsonschema.Schema) (*shape, error) {
	sh := &shape{root: root, defs: root.Defs, insts: map[string]int{}, enums: map[*jsonschema.Schema]int{}}
	type size struct{ nodes, depth int }
	done := map[*jsonschema.Schema]size{}
	onPath := map[*jsonschema.Schema]bool{}
	var refs []string // the $ref names on the current path, for the message
	var walk func(s *jsonschema.Schema) (size, error)
	walk = func(s *jsonschema.Schema) (size, error) {
		if z, ok := done[s]; ok {
			return z, nil
		}
		if onPath[s] {
			return size{}, fmt.Errorf("the model's schema refers to itself ($ref cycle %s): darkroom cannot validate against it", strings.Join(refs, " → "))
		}
		onPath[s] = true
		defer delete(onPath, s)
		for _, p := range patternsOf(s) {
			if err := sh.pattern(p); err != nil {
				return size{}, err
			}
		}
		if len(s.Enum) > 0 {
			sh.enums[s] = values(s.Enum)
		}
		z := size{nodes: 1}
		add := func(c *jsonschema.Schema) error {
			cz, err := walk(c)
			if err != nil {
				return err
			}
			z.nodes = min(z.nodes+cz.nodes, MaxSchemaNodes+1) // saturate: 2^30 fits no int we sum
			z.depth = max(z.depth, cz.depth)
			return nil
		}
		if s.Ref != "" {
			name, target := sh.ref(s.Ref)
			if target != nil {
				refs = append(refs, name)
				err := add(target)
				refs = refs[:len(refs)-1]
				if err != nil {
					return size{}, err
				}
			}
		}
		for c := range applied(s) {
			if err := add(c); err != nil {
				return size{}, err
			}
		}
		z.depth++
		done[s] = z
		return z, nil
	}
	z, err := walk(root)
	switch {
	case err != nil:
		return nil, err
	case z.nodes > MaxSchemaNodes:
		return nil, fmt.Errorf("the model's schema expands to more than %d nodes with its $refs followed: darkroom cannot validate against it", MaxSchemaNodes)
	case z.depth > MaxSchemaNesting:
		return nil, fmt.Errorf("the model's schema nests %d levels deep with its $refs followed; the limit is %d", z.depth, MaxSchemaNesting)
	}
	return sh, nil
}

// ref finds a local $ref's target ("#/$defs/X", the only form sanitize
// keeps); nil for one jsonschema-go would refuse to resolve anyway.
func (sh *shape) ref(r string) (string, *jsonschema.Schema) {
	name, ok := strings.CutPrefix(r, "#/$defs/")
	if !ok {
		return r, nil
	}
	return name, sh.defs[name]
}

// pattern records a pattern's program size, refusing one over the bound.
func (sh *shape) pattern(p string) error {
	if _, ok := sh.insts[p]; ok {
		return nil
	}
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil // jsonschema-go's Resolve refuses it, with its own words
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil
	}
	if n := len(prog.Inst); n > MaxPatternInsts {
		return fmt.Errorf("the model's schema has a pattern of %d regexp instructions (%q); the limit is %d", n, clip(p, 40), MaxPatternInsts)
	}
	sh.insts[p] = len(prog.Inst)
	return nil
}

// values counts the JSON values in v, nested ones included.
func values(v any) int {
	n := 1
	switch t := v.(type) {
	case []any:
		for _, x := range t {
			n += values(x)
		}
	case map[string]any:
		for _, x := range t {
			n += values(x)
		}
	}
	return n
}

func patternsOf(s *jsonschema.Schema) []string {
	ps := make([]string, 0, 1+len(s.PatternProperties))
	if s.Pattern != "" {
		ps = append(ps, s.Pattern)
	}
	return append(ps, sortedKeys(s.PatternProperties)...)
}

// applied yields every subschema validation may apply, in a fixed order:
// each field of type *Schema, []*Schema or map[string]*Schema, but the
// definitions, which apply only through a $ref.
func applied(s *jsonschema.Schema) func(yield func(*jsonschema.Schema) bool) {
	return func(yield func(*jsonschema.Schema) bool) {
		v := reflect.ValueOf(s).Elem()
		for i := range v.NumField() {
			switch v.Type().Field(i).Name {
			case "Defs", "Definitions":
				continue
			}
			switch f := v.Field(i).Interface().(type) {
			case *jsonschema.Schema:
				if f != nil && !yield(f) {
					return
				}
			case []*jsonschema.Schema:
				for _, c := range f {
					if !yield(c) {
						return
					}
				}
			case map[string]*jsonschema.Schema:
				for _, k := range sortedKeys(f) {
					if !yield(f[k]) {
						return
					}
				}
			}
		}
	}
}

// errCostly stops a meter that ran out.
var errCostly = errors.New("input too costly to check")

// meter counts what validating values will cost, before jsonschema-go
// does it, and stops at the bounds or when ctx ends. Its counts are an
// upper bound of jsonschema-go's (every branch of anyOf, oneOf and
// if/then/else, every element against items and contains), and counting
// costs at most one step per visit it counts.
type meter struct {
	ctx    context.Context
	sh     *shape
	visits int
	steps  int
}

// charge adds the cost of validating v against s; errCostly or ctx's
// error once a bound is passed.
func (m *meter) charge(s *jsonschema.Schema, v any) error {
	if err := m.spend(1, 0); err != nil {
		return err
	}
	if m.visits%1024 == 0 {
		if err := m.ctx.Err(); err != nil {
			return err
		}
	}
	if s.Ref != "" {
		if _, target := m.sh.ref(s.Ref); target != nil {
			if err := m.charge(target, v); err != nil {
				return err
			}
		}
	}
	steps := enumStep * m.sh.enums[s]
	if str, ok := v.(string); ok && s.Pattern != "" {
		steps += len(str) * m.sh.insts[s.Pattern]
	}
	if err := m.spend(0, steps); err != nil {
		return err
	}
	if err := m.chargeEach(v, s.Not, s.If, s.Then, s.Else); err != nil {
		return err
	}
	for _, subs := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		if err := m.chargeEach(v, subs...); err != nil {
			return err
		}
	}
	switch t := v.(type) {
	case []any:
		for i, x := range t {
			if err := m.chargeEach(x, s.Items, s.AdditionalItems, s.Contains, s.UnevaluatedItems, at(s.PrefixItems, i), at(s.ItemsArray, i)); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, x := range t {
			if err := m.chargeEach(x, s.Properties[k], s.AdditionalProperties, s.UnevaluatedProperties); err != nil {
				return err
			}
			for p, ps := range s.PatternProperties {
				if err := m.spend(0, len(k)*m.sh.insts[p]); err != nil {
					return err
				}
				if err := m.chargeEach(x, ps); err != nil {
					return err
				}
			}
			if err := m.chargeEach(k, s.PropertyNames); err != nil {
				return err
			}
			if err := m.chargeEach(t, s.DependentSchemas[k], s.DependencySchemas[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// spend counts visits and pattern steps, errCostly past either bound.
func (m *meter) spend(visits, steps int) error {
	m.visits += visits
	m.steps += steps
	if m.visits > MaxVisits || m.steps > MaxPatternSteps {
		return errCostly
	}
	return nil
}

// chargeEach charges v against each schema that is present.
func (m *meter) chargeEach(v any, subs ...*jsonschema.Schema) error {
	for _, c := range subs {
		if c != nil {
			if err := m.charge(c, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func at(ss []*jsonschema.Schema, i int) *jsonschema.Schema {
	if i < len(ss) {
		return ss[i]
	}
	return nil
}
