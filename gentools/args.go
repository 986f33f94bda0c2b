package gentools

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"

	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DecodeArgs unmarshals a tool's arguments, turning type errors into messages a
// model can act on. An argument the tool does not know is refused by
// name: a caller who sends count to a server without it must not get one
// output and no word why.
func DecodeArgs(req *mcp.CallToolRequest, v any) *mcp.CallToolResult {
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return toolError("argument %s must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return toolError("%s takes no argument %s; its arguments are %s", req.Params.Name, name, words.And(argNames(reflect.TypeOf(v))))
		}
		return toolError("arguments must be a JSON object: %v", err)
	}
	if dec.More() {
		return toolError("arguments must be one JSON object")
	}
	return nil
}

// argNames lists the JSON names of a struct's fields, sorted.
func argNames(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			names = append(names, argNames(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "-" {
			if name == "" {
				name = f.Name
			}
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "bool":
		return "true or false"
	case goKind == "string":
		return "a string"
	}
	return "an object"
}
