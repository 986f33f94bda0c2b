package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The Docker MCP catalog's entry (docker/mcp-registry CONTRIBUTING.md and
// pkg/servers/types.go, internal/mcp/types.go, commit 818bf16,
// 2026-07-08): servers/darkroom/server.yaml, and tools.json, which the
// catalog's build reads instead of starting the server to list its tools.

// catalogTool is one entry of tools.json (internal/mcp/types.go Tool).
type catalogTool struct {
	Name        string        `json:"name"`
	Description string        `json:"description,omitempty"`
	Arguments   []catalogArgs `json:"arguments,omitempty"`
}

// catalogArgs is one argument of a tool (ToolArgument): desc is required,
// never empty (cmd/validate validateTools).
type catalogArgs struct {
	Name     string        `json:"name"`
	Type     string        `json:"type"`
	Items    *catalogItems `json:"items,omitempty"`
	Desc     string        `json:"desc"`
	Optional bool          `json:"optional,omitempty"`
}

type catalogItems struct {
	Type string `json:"type,omitempty"`
}

// catalogTools turns tools/list into tools.json's entries: each argument
// with its JSON Schema type (the first one that is not null), its
// items' type for an array, and its description (a schema without one
// is described by its name and type).
func catalogTools(tools []tool) []catalogTool {
	var out []catalogTool
	for _, t := range tools {
		ct := catalogTool{Name: t.Name, Description: t.Description}
		props, _ := t.InputSchema["properties"].(map[string]any)
		required := map[string]bool{}
		if rs, ok := t.InputSchema["required"].([]any); ok {
			for _, r := range rs {
				required[fmt.Sprint(r)] = true
			}
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p, _ := props[n].(map[string]any)
			a := catalogArgs{Name: n, Type: schemaType(p), Optional: !required[n]}
			if a.Type == "array" {
				items, _ := p["items"].(map[string]any)
				a.Items = &catalogItems{Type: schemaType(items)}
			}
			a.Desc, _ = p["description"].(string)
			if a.Desc == "" {
				a.Desc = n + " (" + a.Type + ")"
			}
			ct.Arguments = append(ct.Arguments, a)
		}
		out = append(out, ct)
	}
	return out
}

// schemaType is a schema's type: its "type", the first that is not
// "null" of a list of types, else "object" for a schema with properties
// and "string" for any other.
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if x != "null" {
				return fmt.Sprint(x)
			}
		}
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	return "string"
}

// catalogSecret is one secret of server.yaml's config (pkg/servers
// Secret): a name prefix.name, the variable it is given as.
type catalogSecret struct{ Name, Env string }

var catalogSecrets = []catalogSecret{
	{"darkroom.replicate_api_token", "REPLICATE_API_TOKEN"},
	{"darkroom.fal_key", "FAL_KEY"},
	{"darkroom.gemini_api_key", "GEMINI_API_KEY"},
	{"darkroom.openai_api_key", "OPENAI_API_KEY"},
}

// catalog is the server.yaml of darkroom's entry.
type catalog struct {
	Name, Image, Type, Category string
	Tags                        []string
	Title, Description, Icon    string
	Project, Commit             string
	Command                     []string
	ConfigDescription           string
	Secrets                     []catalogSecret
}

func newCatalog(commit string) catalog {
	return catalog{
		Name: "darkroom", Image: "mcp/darkroom", Type: "server", Category: "ai",
		Tags:        []string{"ai", "image-generation", "video-generation", "media"},
		Title:       "Darkroom",
		Description: "Image and video generation: Replicate, fal, Google, OpenAI, or offline with local models",
		Icon:        "https://raw.githubusercontent.com/darkroom-mcp/darkroom/main/docs/icon.png",
		Project:     repoURL, Commit: commit,
		Command:           []string{"stdio"},
		ConfigDescription: "Provider keys, each optional: without any, darkroom draws offline with its local models",
		Secrets:           catalogSecrets,
	}
}

// yamlString writes s as a YAML scalar: plain when that reads back as the
// same string, else double-quoted (JSON's escapes are YAML's).
func yamlString(s string) string {
	plain := s != "" && !strings.ContainsAny(s, ":#{}[],&*!|>'\"%@`\n") && strings.TrimSpace(s) == s &&
		!strings.ContainsAny(s[:1], "-?.+0123456789") && s != "true" && s != "false" && s != "null" && s != "~"
	if plain {
		return s
	}
	return string(marshalJSON(s, ""))
}

// yaml is server.yaml's text, laid out as prettier leaves it (the
// catalog's CI runs prettier --check): two-space indents, sequences
// indented under their key.
func (c catalog) yaml() string {
	var b strings.Builder
	w := func(indent int, k, v string) {
		fmt.Fprintf(&b, "%s%s: %s\n", strings.Repeat("  ", indent), k, yamlString(v))
	}
	list := func(indent int, k string, vs []string) {
		fmt.Fprintf(&b, "%s%s:\n", strings.Repeat("  ", indent), k)
		for _, v := range vs {
			fmt.Fprintf(&b, "%s  - %s\n", strings.Repeat("  ", indent), yamlString(v))
		}
	}
	section := func(k string) { fmt.Fprintf(&b, "%s:\n", k) }
	w(0, "name", c.Name)
	w(0, "image", c.Image)
	w(0, "type", c.Type)
	section("meta")
	w(1, "category", c.Category)
	list(1, "tags", c.Tags)
	section("about")
	w(1, "title", c.Title)
	w(1, "description", c.Description)
	w(1, "icon", c.Icon)
	section("source")
	w(1, "project", c.Project)
	if c.Commit != "" {
		w(1, "commit", c.Commit)
	}
	section("run")
	list(1, "command", c.Command)
	section("config")
	w(1, "description", c.ConfigDescription)
	fmt.Fprintf(&b, "  secrets:\n")
	for _, s := range c.Secrets {
		fmt.Fprintf(&b, "    - name: %s\n      env: %s\n      example: %s\n", yamlString(s.Name), yamlString(s.Env), yamlString("<"+s.Env+">"))
	}
	return b.String()
}

// catalogHeader starts the committed server.yaml: what it is and how it
// is made (a comment the catalog's own copy may drop).
const catalogHeader = `# darkroom's entry in the Docker MCP catalog (docker/mcp-registry,
# servers/darkroom/server.yaml), with tools.json beside it. Generated:
# go run ./cmd/darkroom-release catalog (TestCatalogFiles fails when stale);
# a release writes the same with source.commit pinned to its commit.
`

// writeCatalog writes server.yaml and tools.json into dir.
func writeCatalog(dir string, tools []tool, commit string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.json"), append(marshalJSON(catalogTools(tools), "  "), '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "server.yaml"), []byte(catalogHeader+newCatalog(commit).yaml()), 0o644)
}

// marshalJSON is v as JSON, indented by indent (none when empty), with
// <, > and & as themselves: the files are read by people too.
func marshalJSON(v any, indent string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		panic(err) // only darkroom's own types and strings reach here
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
