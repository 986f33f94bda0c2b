package provider_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGenericPackagesNameNoProvider: provider/catalog and
// provider/modelschema name no provider in their code (comments aside):
// each adapter's CheckEntry and Dialect say what they would otherwise
// switch on its name for. The names are the adapters' own (each provider
// package's const Name).
func TestGenericPackagesNameNoProvider(t *testing.T) {
	nameDecl := regexp.MustCompile(`(?m)^const Name = "([^"]+)"`)
	var names []string
	adapters, _ := filepath.Glob("*/*.go")
	for _, f := range adapters {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range nameDecl.FindAllSubmatch(b, -1) {
			names = append(names, string(m[1]))
		}
	}
	for _, n := range []string{"replicate", "fal", "google", "openai", "local", "comfyui"} {
		if !slices.Contains(names, n) {
			t.Fatalf("provider names found %v; %s's is not among them", names, n)
		}
	}
	for _, dir := range []string{"catalog", "modelschema"} {
		files, _ := filepath.Glob(dir + "/*.go")
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "//") {
					continue
				}
				for _, n := range names {
					if strings.Contains(line, `"`+n+`"`) {
						t.Errorf("%s:%d names the provider %q: ask its adapter instead\n\t%s", f, i+1, n, strings.TrimSpace(line))
					}
				}
			}
		}
	}
}
