package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The official MCP Registry's server.json schema, 2025-12-11, transcribed
// (never copied) from modelcontextprotocol/registry
// docs/reference/server-json: server.schema.json as of its 2025-09-29
// revision (stored version 05f550bd), with CHANGELOG.md's later entries
// (2025-10-11: a package's version optional; 2025-10-17: an MCPB's too;
// 2025-12-11: a remote's URL may hold {variables}), read 2026-12-07; and
// official-registry-requirements.md / package-types.mdx as summarized in
// ../shared/spec/landscape-2026-12.md §6 (MCPB: fileSha256 required, a
// GitHub or GitLab release URL containing "mcp"; OCI: an allowed
// registry, the image labelled with the server's name).

const schema20251211 = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"

var (
	serverNameRE = regexp.MustCompile(`^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`)
	sha256RE     = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// A version range, which the schema rejects: ^1.2.3, ~1.2.3, >=1.2.3,
	// 1.x, 1.*, and "latest".
	versionRangeRE = regexp.MustCompile(`^[\^~<>=]|\.(x|X|\*)(\.|$)|^\*$|\s|\|\|`)
	templateVarRE  = regexp.MustCompile(`\{([^{}]+)\}`)
)

var packageKeys = []string{"registryType", "registryBaseUrl", "identifier", "version", "fileSha256", "runtimeHint", "transport", "runtimeArguments", "packageArguments", "environmentVariables"}

var inputKeys = []string{"description", "isRequired", "format", "value", "isSecret", "default", "placeholder", "choices", "variables"}

// checkServerJSON lists where doc breaks the 2025-12-11 schema or the
// official registry's requirements for darkroom's kinds of package.
func checkServerJSON(doc []byte) []string {
	var p []string
	bad := func(f string, a ...any) { p = append(p, fmt.Sprintf(f, a...)) }
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	str := func(m map[string]any, k string) (string, bool) { s, ok := m[k].(string); return s, ok }
	if s, _ := str(d, "$schema"); s != schema20251211 {
		bad("$schema %q, want %s", s, schema20251211)
	}
	name, _ := str(d, "name")
	if !serverNameRE.MatchString(name) || len(name) < 3 || len(name) > 200 {
		bad("name %q: want namespace/name, 3 to 200 characters", name)
	}
	desc, ok := str(d, "description")
	if n := utf8.RuneCountInString(desc); !ok || n < 1 || n > 100 {
		bad("description: %d characters, want 1 to 100", n)
	}
	version, ok := str(d, "version")
	if !ok || version == "" || len(version) > 255 || versionRangeRE.MatchString(version) || version == "latest" {
		bad("version %q: want one specific version", version)
	}
	isURI := func(s string) bool { u, err := url.Parse(s); return err == nil && u.Scheme != "" && u.Host != "" }
	if r, ok := d["repository"].(map[string]any); ok {
		u, _ := str(r, "url")
		if s, _ := str(r, "source"); !isURI(u) || s == "" {
			bad("repository needs a url and a source")
		}
	}
	if w, ok := str(d, "websiteUrl"); ok && !isURI(w) {
		bad("websiteUrl %q is not a URI", w)
	}
	var checkInput func(where string, in map[string]any, keyed bool)
	checkInput = func(where string, in map[string]any, keyed bool) {
		for k := range in {
			if !slices.Contains(inputKeys, k) && !(keyed && k == "name") && k != "type" && k != "valueHint" && k != "isRepeated" {
				bad("%s: unknown field %q", where, k)
			}
		}
		if keyed {
			if n, _ := str(in, "name"); n == "" {
				bad("%s: a name is required", where)
			}
		}
		if f, ok := in["format"]; ok && !slices.Contains([]any{"string", "number", "boolean", "filepath"}, f) {
			bad("%s: format %v", where, f)
		}
		for _, k := range []string{"isSecret", "isRequired", "isRepeated"} {
			if v, ok := in[k]; ok {
				if _, isBool := v.(bool); !isBool {
					bad("%s: %s must be a boolean", where, k)
				}
			}
		}
		if vars, ok := in["variables"].(map[string]any); ok {
			for k, v := range vars {
				vm, _ := v.(map[string]any)
				checkInput(where+".variables."+k, vm, false)
			}
		}
	}
	checkTransport := func(where string, tr map[string]any, remote bool) {
		typ, _ := str(tr, "type")
		switch {
		case typ == "stdio" && !remote:
		case typ == "streamable-http" || typ == "sse":
			u, _ := str(tr, "url")
			vars, _ := tr["variables"].(map[string]any)
			for _, m := range templateVarRE.FindAllStringSubmatch(u, -1) {
				if _, ok := vars[m[1]]; !ok && remote {
					bad("%s: url variable {%s} is not defined in variables", where, m[1])
				}
			}
			if !isURI(templateVarRE.ReplaceAllString(u, "x")) {
				bad("%s: url %q is not a URI once its variables are filled", where, u)
			}
			hs, _ := tr["headers"].([]any)
			for i, h := range hs {
				hm, _ := h.(map[string]any)
				checkInput(fmt.Sprintf("%s.headers[%d]", where, i), hm, true)
			}
		default:
			bad("%s: transport type %q", where, typ)
		}
	}
	pkgs, _ := d["packages"].([]any)
	for i, x := range pkgs {
		pk, _ := x.(map[string]any)
		where := fmt.Sprintf("packages[%d]", i)
		for k := range pk {
			if !slices.Contains(packageKeys, k) {
				bad("%s: unknown field %q (the schema allows no other)", where, k)
			}
		}
		rt, _ := str(pk, "registryType")
		id, _ := str(pk, "identifier")
		if rt == "" || id == "" {
			bad("%s: registryType and identifier are required", where)
		}
		if v, ok := pk["version"]; ok {
			if s, _ := v.(string); s == "" || s == "latest" || versionRangeRE.MatchString(s) {
				bad("%s: version %q", where, s)
			}
		}
		sha, hasSHA := str(pk, "fileSha256")
		if hasSHA && !sha256RE.MatchString(sha) {
			bad("%s: fileSha256 %q is not 64 lowercase hex digits", where, sha)
		}
		tr, _ := pk["transport"].(map[string]any)
		if tr == nil {
			bad("%s: transport is required", where)
		} else {
			checkTransport(where+".transport", tr, false)
		}
		for _, list := range []string{"runtimeArguments", "packageArguments"} {
			args, _ := pk[list].([]any)
			for j, a := range args {
				am, _ := a.(map[string]any)
				aw := fmt.Sprintf("%s.%s[%d]", where, list, j)
				switch am["type"] {
				case "positional":
					_, v := am["value"]
					_, h := am["valueHint"]
					if !v && !h {
						bad("%s: a positional argument needs a value or a valueHint", aw)
					}
					checkInput(aw, am, false)
				case "named":
					checkInput(aw, am, true)
				default:
					bad("%s: type %v", aw, am["type"])
				}
			}
		}
		envs, _ := pk["environmentVariables"].([]any)
		for j, e := range envs {
			em, _ := e.(map[string]any)
			checkInput(fmt.Sprintf("%s.environmentVariables[%d]", where, j), em, true)
		}
		switch rt {
		case "mcpb":
			if !hasSHA {
				bad("%s: an MCPB package needs fileSha256", where)
			}
			u, err := url.Parse(id)
			if err != nil || u.Scheme != "https" || (u.Host != "github.com" && u.Host != "gitlab.com") || !strings.Contains(id, "/releases/download/") || !strings.Contains(strings.ToLower(id), "mcp") {
				bad("%s: an MCPB identifier must be a GitHub or GitLab release download URL containing \"mcp\": %q", where, id)
			}
		case "oci":
			host, _, _ := strings.Cut(id, "/")
			if !slices.Contains([]string{"docker.io", "ghcr.io", "quay.io", "mcr.microsoft.com"}, host) && !strings.HasSuffix(host, ".pkg.dev") && !strings.HasSuffix(host, ".azurecr.io") {
				bad("%s: OCI image %q is not on a registry the official registry accepts", where, id)
			}
			if !strings.Contains(id, ":") {
				bad("%s: OCI identifier %q carries no tag", where, id)
			}
		default:
			bad("%s: registryType %q (darkroom publishes oci and mcpb)", where, rt)
		}
	}
	remotes, _ := d["remotes"].([]any)
	for i, x := range remotes {
		rm, _ := x.(map[string]any)
		checkTransport(fmt.Sprintf("remotes[%d]", i), rm, true)
	}
	if m, ok := d["_meta"].(map[string]any); ok {
		for k := range m {
			if k != "io.modelcontextprotocol.registry/publisher-provided" {
				bad("_meta.%s: the official registry keeps only io.modelcontextprotocol.registry/publisher-provided", k)
			}
		}
	}
	return p
}

// TestServerJSON: the repository's server.json, and the one a release
// writes from it, meet the registry's schema 2025-12-11; the name is
// io.github.darkroom-mcp/darkroom, the one the Dockerfile's label carries;
// it names the same secrets the bundle's settings are; and each rule of
// the check fails the document that breaks it.
func TestServerJSON(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, serverJSON))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkServerJSON(b) {
		t.Errorf("server.json: %s", p)
	}
	var d struct {
		Name     string `json:"name"`
		Packages []struct {
			RegistryType string `json:"registryType"`
			Env          []struct {
				Name     string `json:"name"`
				IsSecret bool   `json:"isSecret"`
			} `json:"environmentVariables"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "io.github.darkroom-mcp/darkroom" {
		t.Errorf("name %q", d.Name)
	}
	for _, p := range d.Packages {
		secrets := map[string]bool{}
		for _, e := range p.Env {
			if e.IsSecret {
				secrets[e.Name] = true
			}
		}
		for _, k := range providerKeys {
			name := k.env
			if p.RegistryType == "oci" {
				name = strings.TrimPrefix(k.env, "DARKROOM_")
			}
			if !secrets[name] {
				t.Errorf("%s package: %s is not a secret environment variable", p.RegistryType, name)
			}
		}
	}
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*(LABEL\s+)?io\.modelcontextprotocol\.server\.name="` + regexp.QuoteMeta(d.Name) + `"`).Match(df) {
		t.Errorf("the Dockerfile has no LABEL io.modelcontextprotocol.server.name=%q", d.Name)
	}

	sha := strings.Repeat("ab", 32)
	rel, err := releaseServerJSON(b, "1.2.3", sha)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkServerJSON(rel) {
		t.Errorf("a release's server.json: %s", p)
	}
	for _, want := range []string{`"version": "1.2.3"`, imageRepo + ":1.2.3", bundleURL("1.2.3"), sha} {
		if !strings.Contains(string(rel), want) {
			t.Errorf("a release's server.json lacks %s", want)
		}
	}
	if strings.Contains(string(rel), templateVer) {
		t.Errorf("a release's server.json still names %s", templateVer)
	}
	if _, err := releaseServerJSON([]byte(`{"version":"9.9.9","packages":[]}`), "1.2.3", sha); err == nil {
		t.Error("a template without the placeholders was filled")
	}

	edit := func(f func(map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(rel, &m)
		f(m)
		out, _ := json.Marshal(m)
		return out
	}
	pkg := func(m map[string]any, kind string) map[string]any {
		for _, p := range m["packages"].([]any) {
			if p.(map[string]any)["registryType"] == kind {
				return p.(map[string]any)
			}
		}
		return nil
	}
	cases := []struct {
		name string
		doc  []byte
		want string
	}{
		{"an older schema", edit(func(m map[string]any) { m["$schema"] = strings.Replace(schema20251211, "2025-12-11", "2025-09-29", 1) }), "$schema"},
		{"a name without a namespace", edit(func(m map[string]any) { m["name"] = "darkroom" }), "name"},
		{"101 characters of description", edit(func(m map[string]any) { m["description"] = strings.Repeat("é", 101) }), "description"},
		{"a version range", edit(func(m map[string]any) { m["version"] = "^1.2.3" }), "version"},
		{"an unknown package field", edit(func(m map[string]any) { pkg(m, "oci")["title"] = "x" }), "unknown field"},
		{"an MCPB without its digest", edit(func(m map[string]any) { delete(pkg(m, "mcpb"), "fileSha256") }), "fileSha256"},
		{"an uppercase digest", edit(func(m map[string]any) { pkg(m, "mcpb")["fileSha256"] = strings.ToUpper(sha) }), "fileSha256"},
		{"an MCPB off a release", edit(func(m map[string]any) { pkg(m, "mcpb")["identifier"] = "https://example.com/darkroom.mcpb" }), "release"},
		{"an image on another registry", edit(func(m map[string]any) { pkg(m, "oci")["identifier"] = "registry.example.com/darkroom:1" }), "OCI image"},
		{"a secret that is not a boolean", edit(func(m map[string]any) {
			pkg(m, "oci")["environmentVariables"].([]any)[0].(map[string]any)["isSecret"] = "yes"
		}), "boolean"},
		{"a remote variable undefined", edit(func(m map[string]any) {
			m["remotes"].([]any)[0].(map[string]any)["url"] = "https://{host}/{path}"
		}), "{path}"},
		{"a positional argument without a value", edit(func(m map[string]any) {
			delete(pkg(m, "oci")["packageArguments"].([]any)[0].(map[string]any), "value")
		}), "positional"},
		{"a stdio remote", edit(func(m map[string]any) { m["remotes"].([]any)[0].(map[string]any)["type"] = "stdio" }), "transport type"},
		{"other _meta", edit(func(m map[string]any) { m["_meta"] = map[string]any{"x.y/z": map[string]any{}} }), "_meta"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := checkServerJSON(c.doc)
			if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("not refused for %q: %q", c.want, p)
			}
		})
	}
}
