package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
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

// journeyHead is a journey's heading: its name and the hops it claims.
var journeyHead = regexp.MustCompile(`^\*\*(.+?)\((?:[^)]*?, )?(\d+) hops\)\.\*\*$`)

// hopItem is a numbered hop ("7. ", or a range "1–5. ").
var hopItem = regexp.MustCompile(`^(\d+)(?:–(\d+))?\. `)

// maxMCPHops bounds each MCP journey (a request's, through the edge):
// issue 42's goal.
const maxMCPHops = 14

// TestArchitectureGraph rebuilds darkroom's import graph from `go list`
// and holds ARCHITECTURE.md to it: every darkroom import its package
// listing names exists and every one the code has is named (a leaf
// imports none); each journey has the hops its heading says, the MCP
// ones at most maxMCPHops; and each hop's package is within two imports
// of the one before it (an import, or a callback wired by a package that
// imports both).
func TestArchitectureGraph(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	graph := importGraph(t, root)
	pkgOf := func(file string) string { return filepath.ToSlash(filepath.Dir(file)) }
	near := func(a, b string) bool { return a == b || graph[a][b] || graph[b][a] }
	// A hop follows the one before it through an import, or through a
	// callback a package importing both wires (gentask's InTx between
	// generation and tasks, cmd's handlers between server and generation).
	edge := func(a, b string) bool {
		if near(a, b) {
			return true
		}
		for via := range graph {
			if near(a, via) && near(via, b) {
				return true
			}
		}
		return false
	}

	// The package listing: the fenced block after "## Packages and their
	// imports".
	text := string(doc)
	start := strings.Index(text, "## Packages and their imports")
	block := text[start:]
	block = block[strings.Index(block, "```\n")+4:]
	block = block[:strings.Index(block, "```")]
	listed := map[string]map[string]bool{}
	var entries [][2]string // left side, right side (continuations joined)
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
		case line[0] == ' ' && len(entries) > 0:
			entries[len(entries)-1][1] += ", " + strings.TrimSpace(line)
		default:
			lhs, rhs, ok := cutArrow(line)
			if !ok {
				lhs, rhs, ok = strings.Cut(line, ":") // "leaves: ..."
				if !ok {
					t.Fatalf("ARCHITECTURE.md's listing: %q is neither an import nor the leaves", line)
				}
			}
			entries = append(entries, [2]string{lhs, rhs})
		}
	}
	for _, e := range entries {
		lhs, rhs := strings.TrimSpace(e[0]), e[1]
		if strings.Contains(rhs, "every package below") {
			continue // cmd/darkroom: wire.go builds the graph
		}
		deps := packagesIn(rhs, graph)
		for _, from := range strings.Split(lhs, ", ") {
			if lhs == "leaves" {
				for dep := range deps {
					if len(graph[dep]) > 0 {
						t.Errorf("ARCHITECTURE.md calls %s a leaf; it imports %v", dep, sortedKeys(graph[dep]))
					}
					listed[dep] = map[string]bool{}
				}
				break
			}
			if _, ok := graph[from]; !ok {
				t.Errorf("ARCHITECTURE.md lists %q, which go list does not know", from)
				continue
			}
			if listed[from] == nil {
				listed[from] = map[string]bool{}
			}
			for dep := range deps {
				if !graph[from][dep] {
					t.Errorf("ARCHITECTURE.md: %s ──▶ %s, but %s does not import it", from, dep, from)
				}
				listed[from][dep] = true
			}
		}
	}
	for from, deps := range graph {
		if strings.HasPrefix(from, "cmd/") || strings.HasPrefix(from, "testdata/") || strings.HasPrefix(from, "tools/") {
			continue // binaries and test fixtures
		}
		for dep := range deps {
			if !listed[from][dep] {
				t.Errorf("ARCHITECTURE.md's listing misses %s ──▶ %s", from, dep)
			}
		}
	}

	// The journeys.
	journeys := 0
	lines := strings.Split(text[strings.Index(text, "## Three journeys, hop by hop"):], "\n")
	for i := 0; i < len(lines); i++ {
		m := journeyHead.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		name, claimed := m[1], m[2]
		journeys++
		hops, prevPkg, prevHop := 0, "", ""
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "**") && !strings.HasPrefix(lines[i], "#"); i++ {
			h := hopItem.FindStringSubmatch(lines[i])
			if h == nil {
				continue
			}
			n := h[1]
			if h[2] != "" {
				n = h[2]
			}
			hops, _ = strconv.Atoi(n)
			ref := hopRef.FindStringSubmatch(lines[i])
			if ref == nil {
				continue // "1–5. As above."
			}
			pkg := pkgOf(ref[1])
			if prevPkg != "" && !edge(prevPkg, pkg) {
				t.Errorf("%s: hop %s (%s) follows %s, but neither %s nor %s imports the other", name, n, ref[0], prevHop, prevPkg, pkg)
			}
			prevPkg, prevHop = pkg, ref[0]
		}
		i--
		if claimed != strconv.Itoa(hops) {
			t.Errorf("%s: its heading says %s hops; it lists %d", name, claimed, hops)
		}
		if journeys <= 2 && hops > maxMCPHops {
			t.Errorf("%s: %d hops; an MCP journey takes at most %d", name, hops, maxMCPHops)
		}
	}
	if journeys < 3 {
		t.Fatalf("ARCHITECTURE.md walks %d journeys; want the three", journeys)
	}
}

// cutArrow splits a listing line at its arrow (a run of ─ then ▶).
func cutArrow(line string) (string, string, bool) {
	i := strings.Index(line, "▶")
	if i < 0 {
		return "", "", false
	}
	return strings.TrimRight(line[:i], "─ "), line[i+len("▶"):], true
}

// packagesIn is the darkroom packages a listing's right side names: its
// comma-separated items, each without its parenthesised note.
func packagesIn(rhs string, graph map[string]map[string]bool) map[string]bool {
	out := map[string]bool{}
	depth := 0
	var b strings.Builder
	for _, r := range rhs { // drop parenthesised notes (which may hold commas)
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	known := func(p string) bool { // a package, or an import of one (testdata is outside ./...)
		if _, ok := graph[p]; ok {
			return true
		}
		for _, deps := range graph {
			if deps[p] {
				return true
			}
		}
		return false
	}
	for _, item := range strings.Split(b.String(), ",") {
		if f := strings.Fields(item); len(f) > 0 && known(f[0]) {
			out[f[0]] = true
		}
	}
	return out
}

// importGraph is darkroom's packages (module-relative) and the darkroom
// packages each imports, from `go list` (tests' imports left out).
func importGraph(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	const module = "github.com/darkroom-mcp/darkroom"
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string]map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		from := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		graph[from] = map[string]bool{}
		for _, imp := range strings.Fields(imports) {
			if dep, ok := strings.CutPrefix(imp, module+"/"); ok {
				graph[from][dep] = true
			}
		}
	}
	return graph
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
