package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hopRef is a `file.go:Name` or `file.go:Type.Method` reference, as
// ARCHITECTURE.md's journeys name each hop.
var hopRef = regexp.MustCompile("`([a-z0-9_/]+\\.go):([A-Za-z_][A-Za-z0-9_]*)(?:\\.([A-Za-z_][A-Za-z0-9_]*))?`")

// TestArchitectureHops: every `file.go:Function` (or `file.go:Type.Method`)
// ARCHITECTURE.md names exists in that file, so the journeys it walks are
// the code's.
func TestArchitectureHops(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	refs := hopRef.FindAllStringSubmatch(string(doc), -1)
	if len(refs) < 30 {
		t.Fatalf("ARCHITECTURE.md names %d hops as file:function; the journeys name more", len(refs))
	}
	decls := map[string]map[string]bool{} // file → its functions, as Name and Type.Method
	for _, r := range refs {
		file, want := r[1], r[2]
		if r[3] != "" {
			want += "." + r[3]
		}
		names, ok := decls[file]
		if !ok {
			names = funcsOf(t, filepath.Join(root, file))
			decls[file] = names
		}
		if names == nil {
			t.Errorf("ARCHITECTURE.md names %s, which does not exist", r[0])
		} else if !names[want] {
			t.Errorf("ARCHITECTURE.md names %s: %s declares no %s", r[0], file, want)
		}
	}
}

// funcsOf is the functions path declares (nil when it does not parse).
func funcsOf(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			typ := fd.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				name = strings.TrimPrefix(id.Name, "*") + "." + name
			}
		}
		names[name] = true
	}
	return names
}
