package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
)

// TestJourneyLayers counts the MCP journeys' hops in the code: a probe
// at the handler run (edgecount.SetProbe) takes the request's stack, and
// each darkroom function on it between net/http and the handler (a
// layer: a closure counts as the function that made it) must be a hop
// of its own in ARCHITECTURE.md's journey, in order. So a journey cannot
// hide a layer, and its heading's count (TestArchitectureGraph) is at
// least the layers it passes. The server is the walk's (API keys, so
// auth and publicHandshake are layers; httptest serves it, so
// server/conn.go's deadlines is not on the stack).
func TestJourneyLayers(t *testing.T) {
	fs := admissionServer(t, nil, 0)
	var layers []layer
	edgecount.SetProbe(func() { layers = stackLayers(4) }) // without the probe and edgecount.Handler
	defer edgecount.SetProbe(nil)
	journeys := journeyHops(t)
	for _, c := range []struct {
		journey, era string
		m            wireMethod
	}{
		{"A Tasks client's `generate`", "2026-07-28 tasks", wireMethod{method: "tools/call", name: "generate",
			params: map[string]any{"name": "generate", "arguments": map[string]any{"modelId": "local-sketch", "prompt": "a kite"}}}},
		{"A legacy client's `get_generation`", "2025-06-18", wireMethod{method: "tools/call", name: "get_generation",
			params: map[string]any{"name": "get_generation", "arguments": map[string]any{"generationId": "g-0"}}}},
	} {
		t.Run(c.journey, func(t *testing.T) {
			layers = nil
			if code, body := postEraWithCaps(t, fs.url, c.era, c.m); code != 200 || layers == nil {
				t.Fatalf("%d %s; the probe saw %d layers", code, body, len(layers))
			}
			hops, ok := journeys[c.journey]
			if !ok {
				t.Fatalf("ARCHITECTURE.md walks no journey %q", c.journey)
			}
			at := 0 // the hop the previous layer is, +1
			for _, l := range layers {
				i := slices.IndexFunc(hops[at:], func(refs []string) bool { return slices.ContainsFunc(refs, l.named) })
				if i < 0 {
					t.Errorf("layer %s (%s) is not a hop of its own after hop %d", l.fn, l.file, at)
					continue
				}
				at += i + 1
			}
			t.Logf("%d layers to the handler, the handler at hop %d of %d: %v", len(layers), at, len(hops), layers)
		})
	}
}

// layer is one darkroom function on a stack: its file (from the
// repository's root) and its name as ARCHITECTURE.md writes it (Name, or
// Type.Method).
type layer struct{ file, fn string }

func (l layer) String() string { return l.file + ":" + l.fn }

// named reports whether ref (`file.go:Name`, `file.go:Type.Method`)
// names l (a value receiver's method is Method on the stack).
func (l layer) named(ref string) bool {
	return ref == l.String() || (strings.HasPrefix(ref, l.file+":") && strings.HasSuffix(ref, "."+l.fn))
}

// stackLayers is the darkroom layers of the calling goroutine's stack,
// outermost first, skip frames left out (the probe's own).
func stackLayers(skip int) []layer {
	pc := make([]uintptr, 256)
	frames := runtime.CallersFrames(pc[:runtime.Callers(skip, pc)])
	const module = "github.com/darkroom-mcp/darkroom/"
	var out []layer
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, module) && !strings.HasSuffix(f.File, "_test.go") {
			l := layer{file: repoPath(f.File), fn: funcName(f.Function)}
			if len(out) == 0 || out[len(out)-1] != l {
				out = append(out, l)
			}
		}
		if !more {
			break
		}
	}
	slices.Reverse(out)
	return out
}

// repoPath is path from the repository's root (the module's directory).
func repoPath(path string) string {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	if rel, err := filepath.Rel(root, path); err == nil {
		return filepath.ToSlash(rel)
	}
	return path
}

// funcName is a runtime function name as ARCHITECTURE.md writes it: the
// innermost named function of a closure (server.Handler.checkOrigin.func9
// is checkOrigin's), a method as Type.Method.
func funcName(full string) string {
	name := full[strings.LastIndex(full, "/")+1:]
	parts := strings.Split(name, ".")[1:] // without the package
	for len(parts) > 1 && isClosure(parts[len(parts)-1]) {
		parts = parts[:len(parts)-1]
	}
	fn := parts[len(parts)-1]
	if len(parts) > 1 && strings.HasPrefix(parts[len(parts)-2], "(*") { // a method's receiver
		return strings.Trim(parts[len(parts)-2], "(*)") + "." + fn
	}
	return fn
}

func isClosure(s string) bool {
	s = strings.TrimPrefix(s, "func")
	_, err := strconv.Atoi(s)
	return err == nil || s == ""
}

// journeyHops is each journey of ARCHITECTURE.md by its name: per hop,
// the `file.go:Name` references it makes ("1–5. As above." repeats the
// first journey's hops).
func journeyHops(t *testing.T) map[string][][]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	out := map[string][][]string{}
	var first, cur [][]string
	name := ""
	for _, line := range strings.Split(text[strings.Index(text, "## Three journeys, hop by hop"):], "\n") {
		if m := journeyHead.FindStringSubmatch(line); m != nil {
			if name != "" {
				out[name] = cur
			}
			if first == nil {
				first = cur
			}
			name, cur = strings.TrimSpace(m[1]), nil
			continue
		}
		h := hopItem.FindStringSubmatch(line)
		if name == "" || h == nil {
			continue
		}
		if h[2] != "" { // a range of the first journey's hops
			to, _ := strconv.Atoi(h[2])
			cur = append(cur, first[:min(to, len(first))]...)
			continue
		}
		var refs []string
		for _, r := range hopRef.FindAllStringSubmatch(line, -1) {
			ref := r[1] + ":" + r[2]
			if r[3] != "" {
				ref += "." + r[3]
			}
			refs = append(refs, ref)
		}
		cur = append(cur, refs)
	}
	if name != "" {
		out[name] = cur
	}
	return out
}
