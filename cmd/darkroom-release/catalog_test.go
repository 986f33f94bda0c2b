package main

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The Docker MCP catalog's checks of an entry, transcribed from
// docker/mcp-registry cmd/validate/main.go (commit 818bf16, 2026-07-08):
// isNameValid, isTitleValid, isCommitPinnedIfNecessary, areSecretsValid,
// isConfigEnvValid and validateTools (prettier's formatting, the licence
// and the icon's fetch need the network and are not repeated here).
var (
	catalogNameRE   = regexp.MustCompile(`^[a-z0-9-]+$`)
	catalogCommitRE = regexp.MustCompile(`^[a-f0-9]{40}$`)
	catalogSecretRE = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9._-]+$`)
)

func checkCatalog(c catalog, tools []catalogTool) []string {
	var p []string
	bad := func(f string, a ...any) { p = append(p, fmt.Sprintf(f, a...)) }
	if !catalogNameRE.MatchString(c.Name) {
		bad("name %q: lowercase letters, digits and hyphens only", c.Name)
	}
	if strings.Contains(c.Title, "MCP") || strings.Contains(c.Title, "Server") {
		bad("title %q names MCP or Server", c.Title)
	}
	for _, w := range strings.Fields(c.Title) {
		if r := []rune(w)[0]; w != "and" && w != "for" && unicode.ToUpper(r) != r {
			bad("title %q: every word capitalized (%q)", c.Title, w)
		}
	}
	if c.Type == "server" && !catalogCommitRE.MatchString(c.Commit) {
		bad("source.commit %q: a local server pins a 40-character lowercase SHA-1", c.Commit)
	}
	for _, s := range c.Secrets {
		if !catalogSecretRE.MatchString(s.Name) {
			bad("secret %q: prefix.name", s.Name)
		}
		if !strings.HasPrefix(s.Name, c.Name+".") {
			bad("secret %q is not under the server's name", s.Name)
		}
	}
	for _, t := range tools {
		for _, a := range t.Arguments {
			if a.Desc == "" {
				bad("tool %q argument %q has no desc", t.Name, a.Name)
			}
		}
	}
	return p
}

// TestCatalogFiles: deploy/docker-mcp's tools.json is the real tools/list
// in the catalog's format, and server.yaml is what the release tool
// writes (DARKROOM_UPDATE_DOCS=1 rewrites both); the entry passes the
// catalog's checks once a release pins its commit, and each check fails
// an entry that breaks it.
func TestCatalogFiles(t *testing.T) {
	tools := realTools(t)
	dir := filepath.Join(root, "deploy", "docker-mcp")
	want, err := os.MkdirTemp("", "catalog-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(want)
	if err := writeCatalog(want, tools, ""); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tools.json", "server.yaml"} {
		w, _ := os.ReadFile(filepath.Join(want, f))
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err == nil && bytes.Equal(got, w) {
			continue
		}
		if os.Getenv("DARKROOM_UPDATE_DOCS") == "1" {
			if err := os.WriteFile(filepath.Join(dir, f), w, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s rewritten", f)
			continue
		}
		t.Errorf("deploy/docker-mcp/%s differs from what darkroom's tools/list makes (%v): go run ./cmd/darkroom-release catalog, or DARKROOM_UPDATE_DOCS=1 go test -run TestCatalogFiles ./cmd/darkroom-release/", f, err)
	}
	ct := catalogTools(tools)
	var names []string
	for _, x := range ct {
		names = append(names, x.Name)
	}
	for _, n := range []string{"generate", "get_generation", "wait_generation", "list_models"} {
		if !slices.Contains(names, n) {
			t.Errorf("tools.json lacks %s: %v", n, names)
		}
	}
	pinned := newCatalog(strings.Repeat("0123456789", 4))
	for _, p := range checkCatalog(pinned, ct) {
		t.Errorf("the catalog entry: %s", p)
	}
	if !strings.Contains(pinned.yaml(), "commit: \""+pinned.Commit+"\"\n") {
		t.Error("server.yaml does not carry the pinned commit")
	}

	cases := []struct {
		name string
		edit func(*catalog, *[]catalogTool)
		want string
	}{
		{"a capital in the name", func(c *catalog, _ *[]catalogTool) { c.Name = "Darkroom" }, "name"},
		{"Server in the title", func(c *catalog, _ *[]catalogTool) { c.Title = "Darkroom Server" }, "title"},
		{"a lowercase word", func(c *catalog, _ *[]catalogTool) { c.Title = "Darkroom images" }, "capitalized"},
		{"no commit", func(c *catalog, _ *[]catalogTool) { c.Commit = "" }, "source.commit"},
		{"a secret without a prefix", func(c *catalog, _ *[]catalogTool) {
			c.Secrets = append(slices.Clone(c.Secrets), catalogSecret{"FAL_KEY", "FAL_KEY"})
		}, "prefix.name"},
		{"an argument without desc", func(_ *catalog, ts *[]catalogTool) {
			*ts = []catalogTool{{Name: "x", Arguments: []catalogArgs{{Name: "a", Type: "string"}}}}
		}, "desc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cat, ts := pinned, slices.Clone(ct)
			c.edit(&cat, &ts)
			if p := checkCatalog(cat, ts); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("not refused for %q: %q", c.want, p)
			}
		})
	}
}

// TestCatalogArguments: an argument's type is its schema's (the first
// type that is not null of a list), an array's items are typed, a
// required one is not optional, and one without a description gets one.
func TestCatalogArguments(t *testing.T) {
	got := catalogTools([]tool{{Name: "t", Description: "d", InputSchema: map[string]any{
		"type":     "object",
		"required": []any{"a"},
		"properties": map[string]any{
			"a": map[string]any{"type": "string", "description": "the a"},
			"b": map[string]any{"type": []any{"null", "integer"}},
			"c": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{}}},
			"d": map[string]any{"properties": map[string]any{}},
		},
	}}})
	want := []catalogArgs{
		{Name: "a", Type: "string", Desc: "the a"},
		{Name: "b", Type: "integer", Desc: "b (integer)", Optional: true},
		{Name: "c", Type: "array", Items: &catalogItems{"object"}, Desc: "c (array)", Optional: true},
		{Name: "d", Type: "object", Desc: "d (object)", Optional: true},
	}
	if len(got) != 1 || len(got[0].Arguments) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i, w := range want {
		g := got[0].Arguments[i]
		if g.Name != w.Name || g.Type != w.Type || g.Desc != w.Desc || g.Optional != w.Optional || (w.Items == nil) != (g.Items == nil) || (w.Items != nil && *w.Items != *g.Items) {
			t.Errorf("argument %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestIcon: docs/icon.png is the icon the code draws (go run
// ./cmd/darkroom-release icon), a 512×512 PNG.
func TestIcon(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, iconSrc))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, drawIcon()) {
		t.Error("docs/icon.png is not what drawIcon draws: go run ./cmd/darkroom-release icon")
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil || cfg.Width != 512 || cfg.Height != 512 {
		t.Errorf("docs/icon.png: %v, %dx%d", err, cfg.Width, cfg.Height)
	}
}

// TestYAMLString: a scalar is plain only when YAML reads it back as the
// same string.
func TestYAMLString(t *testing.T) {
	for in, want := range map[string]string{
		"darkroom": "darkroom", "a: b": `"a: b"`, "<KEY>": `"<KEY>"`, "-x": `"-x"`, "true": `"true"`,
		"": `""`, "0123": `"0123"`, "1e5": `"1e5"`, "https://x": `"https://x"`, "a #b": `"a #b"`, "{{x}}": `"{{x}}"`,
	} {
		if got := yamlString(in); got != want {
			t.Errorf("yamlString(%q) = %s, want %s", in, got, want)
		}
	}
}
