package gentools

import (
	"reflect"
	"testing"
	"unsafe"
)

// TestViewKeyCoversTheView: every field of a view without outputs is in
// its reply key, so a field added to GenerationView cannot be left out
// (a kept reply would then hide its changes).
func TestViewKeyCoversTheView(t *testing.T) {
	base := GenerationView{Outputs: []OutputView{}}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Outputs" || f.Name == "Inputs" {
			continue // a view with outputs or inputs (signed links) is never shared
		}
		for _, variant := range variants(t, f.Type) {
			v := base
			field := reflect.ValueOf(&v).Elem().Field(i)
			reflect.NewAt(f.Type, unsafe.Pointer(field.UnsafeAddr())).Elem().Set(variant)
			if keyOf(&v) == keyOf(&base) {
				t.Errorf("GenerationView.%s = %v leaves the reply key unchanged", f.Name, variant)
			}
		}
	}
}

// variants returns values of typ that differ from its zero value, and
// from each other in each of their fields.
func variants(t *testing.T, typ reflect.Type) []reflect.Value {
	switch typ.Kind() {
	case reflect.String:
		return []reflect.Value{reflect.ValueOf("x").Convert(typ)}
	case reflect.Float64:
		return []reflect.Value{reflect.ValueOf(0.5)}
	case reflect.Int64:
		return []reflect.Value{reflect.ValueOf(int64(7))}
	case reflect.Bool:
		return []reflect.Value{reflect.ValueOf(true)}
	case reflect.Pointer:
		var out []reflect.Value
		zero := reflect.New(typ.Elem()) // a pointer to the zero value
		out = append(out, zero)
		for _, inner := range variantsOfStruct(t, typ.Elem()) {
			p := reflect.New(typ.Elem())
			p.Elem().Set(inner)
			out = append(out, p)
		}
		return out
	}
	t.Fatalf("no variants for a field of type %s: add them here and to viewKey", typ)
	return nil
}

func variantsOfStruct(t *testing.T, typ reflect.Type) []reflect.Value {
	if typ.Kind() != reflect.Struct {
		return variants(t, typ)
	}
	var out []reflect.Value
	for i := range typ.NumField() {
		for _, fv := range variants(t, typ.Field(i).Type) {
			s := reflect.New(typ).Elem()
			s.Field(i).Set(fv)
			out = append(out, s)
		}
	}
	return out
}
