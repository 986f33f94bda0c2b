package caches

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// notCaches are the kept maps outside this package that a scan finds
// (a struct holding a map or a list beside a mutex, a sync.Map, a
// container/list, a type named like a cache), each with why it is no
// cache: dropping one of its entries would change an answer, or it holds
// one value, not keyed ones. The package doc points here.
var notCaches = map[string]string{
	"generation.Runner":                     "state: the runner's in-memory failure counts, outage and wake times, held slots",
	"generation.Hub":                        "state: the waiters of each generation (subscriptions)",
	"outbytes.Budget":                       "state: the output bytes held now, by holder (accounting)",
	"server.obsConn":                        "state: a connection's requests in flight, until their reply",
	"server/limit.Limiter":                  "state: the rate limiter's token buckets (least recently used out past MaxKeys): dropping one refills it",
	"server/limit.container/list":           "the Limiter's order of use (above)",
	"server/limit.Owed":                     "state: the tokens a refused request still owes",
	"server/limit.Slots":                    "state: the concurrent requests held per key",
	"provider/fal.Provider":                 "state: the jobs in flight (the concurrency cap) and the cancels asked",
	"provider/comfyui.Provider":             "state: the prompts we asked to cancel",
	"provider/comfyui.liveSet":              "state: the prompts a websocket follows",
	"provider/comfyui.backend":              "state: what a backend answered at the last look (its node classes from /object_info, read by Listed)",
	"provider/openai.livePreviews":          "state: the latest partial image of each call in flight, dropped with its call",
	"provider/modelschema.Registry":         "state: the refreshes under way (one at a time per model); its models and misses are caches.SchemaModels and SchemaMisses",
	"provider/replicate.Provider":           "state: the submits this process made, the only record that finds a lost one (find.go)",
	"provider/internal/httpx.limiters":      "state: the rate limiters shared by the clients of one provider, key and class",
	"provider/internal/seen.Set":            "state: the webhook ids already delivered (replay protection): dropping one lets a replay in",
	"provider/internal/seen.container/list": "the Set's order of arrival (above)",
	"tasks.Broker":                          "state: the subscribers of each task",
	"tasks.subscription":                    "state: the task ids a subscriber has yet to hear of",
	"tasks.conn":                            "state: a session's listen streams",
	"cmd/darkroom.modelWatch":               "state: each provider's last vendor listing, also stored (model_listings)",
	"cmd/darkroom.pingCache":                "one value, not keyed: a vendor's last ping, reused 15 s so /readyz does not ping the vendor per probe (a rate, not a speed-up)",
	"storage/postgres.ownerBatches":         "state: the writes waiting for their owner's batch",
	"storage/postgres.Fence":                "state: the fence notifications sent and not yet echoed",
	"metrics.Set":                           "an index of the Prometheus children, which the vectors hold for ever anyway: bounded by the label values, which the labels already bound",
	"storage/postgres/pgtest.byKey":         "state: the test databases by key, dropped with the test that made them",
	"cmd/darkroom-conformance.fixtures":     "state: a conformance fixture's tasks",
}

// TestNoOtherCaches: every cache in the code is a Bounded built for a
// cache listed here, and every listed cache is built somewhere. It scans
// the module's non-test Go code (testdata aside) and fails on a sync.Map,
// a container/list, a struct with a map beside a mutex, or a type named
// like a cache, unless it is in notCaches with its reason or is built on
// Bounded; and on a notCaches entry the scan no longer finds.
func TestNoOtherCaches(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	found := map[string]bool{}
	built := map[string]bool{}
	newCall := regexp.MustCompile(`caches\.New\(caches\.(\w+)|Cache:\s+caches\.(\w+)`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, m := range newCall.FindAllStringSubmatch(string(src), -1) {
			built[m[1]+m[2]] = true
		}
		if pkg == "internal/caches" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if imp.Path.Value == `"container/list"` {
				found[pkg+".container/list"] = true
			}
		}
		// Package-level maps beside a mutex.
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			var mutex bool
			var maps []string
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				ft := types(vs.Type)
				if ft == "" && len(vs.Values) == 1 {
					if cl, ok := vs.Values[0].(*ast.CompositeLit); ok {
						ft = types(cl.Type)
					}
				}
				switch ft {
				case "sync.Mutex", "sync.RWMutex":
					mutex = true
				case "sync.Map":
					found[pkg+"."+vs.Names[0].Name] = true
				case "map[":
					maps = append(maps, vs.Names[0].Name)
				}
			}
			for _, m := range maps {
				if mutex {
					found[pkg+"."+m] = true
				}
			}
		}
		// Each struct type, and the types named like a cache.
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			name := pkg + "." + ts.Name.Name
			text := string(src[fset.Position(ts.Pos()).Offset:fset.Position(ts.End()).Offset])
			onBounded := strings.Contains(text, "caches.Bounded") || strings.Contains(text, "rowcache.Cache")
			if strings.Contains(strings.ToLower(ts.Name.Name), "cache") && !onBounded {
				found[name] = true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			var mutex, kept bool
			for _, fld := range st.Fields.List {
				switch ft := types(fld.Type); {
				case ft == "sync.Mutex" || ft == "sync.RWMutex":
					mutex = true
				case ft == "sync.Map":
					found[name] = true
				case strings.HasPrefix(ft, "map[") || strings.Contains(ft, "list.List"):
					kept = true
				}
			}
			if mutex && kept {
				found[name] = true
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var unlisted []string
	for name := range found {
		if _, ok := notCaches[name]; !ok {
			unlisted = append(unlisted, name)
		}
	}
	slices.Sort(unlisted)
	for _, name := range unlisted {
		t.Errorf("%s keeps entries outside internal/caches: build it on caches.Bounded with a Spec, or list it in notCaches with why it is not a cache", name)
	}
	for name := range notCaches {
		if !found[name] {
			t.Errorf("notCaches lists %s, which the scan no longer finds: take it out", name)
		}
	}
	for _, c := range All() {
		if !built[constName[c]] {
			t.Errorf("caches.%s (%s) is built nowhere: drop it from the list", constName[c], c)
		}
	}
}

// constName is each cache's constant, as the code names it.
var constName = func() map[Cache]string {
	f, err := parser.ParseFile(token.NewFileSet(), "caches.go", nil, 0)
	if err != nil {
		panic(err)
	}
	out := map[Cache]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for i, s := range g.Specs {
			if vs := s.(*ast.ValueSpec); i < int(count) && len(g.Specs) > int(count) {
				out[Cache(i)] = vs.Names[0].Name
			}
		}
	}
	return out
}()

// types is a field type's text, as written (enough to tell a map, a
// mutex, a sync.Map and a list apart).
func types(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return types(x.X)
	case *ast.SelectorExpr:
		return types(x.X) + "." + x.Sel.Name
	case *ast.Ident:
		return x.Name
	case *ast.MapType:
		return "map["
	case *ast.IndexExpr:
		return types(x.X)
	case *ast.IndexListExpr:
		return types(x.X)
	}
	return ""
}
