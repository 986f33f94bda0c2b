package main

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP Bundle manifest 0.3, transcribed from modelcontextprotocol/mcpb
// (commit 27083dc, 2025-12-03): src/schemas/0.3.ts (strict objects: a key
// it does not define is refused), MANIFEST.md (last updated 2025-12-02)
// and src/node/validate.ts (an icon path without ${__dirname}). CI also
// runs the real `mcpb validate` of @anthropic-ai/mcpb 2.1.2 on the
// bundle (scripts/release-check.sh).
var manifestKeys = map[string][]string{
	"":              {"$schema", "dxt_version", "manifest_version", "name", "display_name", "version", "description", "long_description", "author", "repository", "homepage", "documentation", "support", "icon", "icons", "screenshots", "localization", "server", "tools", "tools_generated", "prompts", "prompts_generated", "keywords", "license", "privacy_policies", "compatibility", "user_config", "_meta"},
	"author":        {"name", "email", "url"},
	"repository":    {"type", "url"},
	"server":        {"type", "entry_point", "mcp_config"},
	"mcp_config":    {"command", "args", "env", "platform_overrides"},
	"override":      {"command", "args", "env"},
	"compatibility": {"claude_desktop", "platforms", "runtimes"},
	"tool":          {"name", "description"},
	"option":        {"type", "title", "description", "required", "default", "multiple", "sensitive", "min", "max"},
}

var userConfigRef = regexp.MustCompile(`\$\{user_config\.([^}]+)\}`)

func checkManifest(raw []byte) []string {
	var p []string
	bad := func(f string, a ...any) { p = append(p, fmt.Sprintf(f, a...)) }
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return []string{err.Error()}
	}
	strict := func(where, kind string, v any) map[string]any {
		o, ok := v.(map[string]any)
		if !ok {
			bad("%s: not an object", where)
			return nil
		}
		for k := range o {
			if !slices.Contains(manifestKeys[kind], k) {
				bad("%s: unknown key %q", where, k)
			}
		}
		return o
	}
	isURL := func(s any) bool {
		str, _ := s.(string)
		u, err := url.Parse(str)
		return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
	}
	strict("manifest", "", m)
	if m["manifest_version"] != "0.3" {
		bad("manifest_version %v, want \"0.3\"", m["manifest_version"])
	}
	for _, k := range []string{"name", "version", "description"} {
		if s, _ := m[k].(string); s == "" {
			bad("%s is required", k)
		}
	}
	if v, _ := m["version"].(string); !semver.MatchString(v) {
		bad("version %q is not a semantic version", v)
	}
	if a := strict("author", "author", m["author"]); a != nil {
		if s, _ := a["name"].(string); s == "" {
			bad("author.name is required")
		}
	}
	if r, ok := m["repository"]; ok {
		if ro := strict("repository", "repository", r); ro != nil && !isURL(ro["url"]) {
			bad("repository.url is not a URL")
		}
	}
	for _, k := range []string{"homepage", "documentation", "support"} {
		if v, ok := m[k]; ok && !isURL(v) {
			bad("%s is not a URL", k)
		}
	}
	if pp, ok := m["privacy_policies"].([]any); ok {
		for _, u := range pp {
			if !isURL(u) {
				bad("privacy_policies: %v is not a URL", u)
			}
		}
	}
	if icon, _ := m["icon"].(string); strings.Contains(icon, "${__dirname}") {
		bad("icon %q: a relative path, not ${__dirname}", icon)
	}
	uc := map[string]any{}
	if v, ok := m["user_config"]; ok {
		uc, _ = v.(map[string]any)
		for k, o := range uc {
			opt := strict("user_config."+k, "option", o)
			if opt == nil {
				continue
			}
			if !slices.Contains([]any{"string", "number", "boolean", "directory", "file"}, opt["type"]) {
				bad("user_config.%s: type %v", k, opt["type"])
			}
			for _, f := range []string{"title", "description"} {
				if s, _ := opt[f].(string); s == "" {
					bad("user_config.%s: %s is required", k, f)
				}
			}
			if s, _ := opt["sensitive"].(bool); s && opt["type"] != "string" {
				bad("user_config.%s: sensitive applies to strings", k)
			}
		}
	}
	used := map[string]bool{}
	if s := strict("server", "server", m["server"]); s != nil {
		if !slices.Contains([]any{"python", "node", "binary"}, s["type"]) {
			bad("server.type %v", s["type"])
		}
		if e, _ := s["entry_point"].(string); e == "" {
			bad("server.entry_point is required")
		}
		cfg := strict("server.mcp_config", "mcp_config", s["mcp_config"])
		if c, _ := cfg["command"].(string); c == "" {
			bad("server.mcp_config.command is required")
		}
		b, _ := json.Marshal(cfg)
		for _, ref := range userConfigRef.FindAllStringSubmatch(string(b), -1) {
			used[ref[1]] = true
			if _, ok := uc[ref[1]]; !ok {
				bad("mcp_config names ${user_config.%s}, which user_config does not define", ref[1])
			}
		}
		if po, ok := cfg["platform_overrides"].(map[string]any); ok {
			for k, v := range po {
				if !slices.Contains([]string{"darwin", "win32", "linux"}, k) {
					bad("platform_overrides.%s: not a platform", k)
				}
				strict("platform_overrides."+k, "override", v)
			}
		}
	}
	for k := range uc {
		if !used[k] {
			bad("user_config.%s is wired to nothing", k)
		}
	}
	if c, ok := m["compatibility"]; ok {
		if co := strict("compatibility", "compatibility", c); co != nil {
			ps, _ := co["platforms"].([]any)
			for _, pl := range ps {
				if !slices.Contains([]any{"darwin", "win32", "linux"}, pl) {
					bad("compatibility.platforms: %v", pl)
				}
			}
		}
	}
	tools, _ := m["tools"].([]any)
	for i, tl := range tools {
		if to := strict(fmt.Sprintf("tools[%d]", i), "tool", tl); to != nil {
			if s, _ := to["name"].(string); s == "" {
				bad("tools[%d]: a name is required", i)
			}
		}
	}
	return p
}

// TestManifest: the bundle's manifest meets manifest 0.3; its tools are
// the real tools/list's; every key and the data folder is a setting, the
// keys sensitive and optional, each wired into darkroom's variable; and
// each rule of the check fails a manifest that breaks it.
func TestManifest(t *testing.T) {
	tools := realTools(t)
	m := newManifest("1.2.3", tools)
	raw := marshalJSON(m, "  ")
	for _, p := range checkManifest(raw) {
		t.Error(p)
	}
	if len(m.Tools) != len(tools) {
		t.Errorf("%d tools in the manifest, %d in tools/list", len(m.Tools), len(tools))
	}
	for i, tl := range tools {
		if m.Tools[i].Name != tl.Name || m.Tools[i].Description != tl.Description {
			t.Errorf("manifest tool %d: %+v, tools/list's %s", i, m.Tools[i], tl.Name)
		}
	}
	for _, k := range providerKeys {
		o := m.UserConfig[k.key]
		if !o.Sensitive || o.Required || o.Type != "string" || m.Server.MCPConfig.Env[k.env] != "${user_config."+k.key+"}" {
			t.Errorf("%s: %+v, env %q", k.key, o, m.Server.MCPConfig.Env[k.env])
		}
	}
	if o := m.UserConfig["data_dir"]; o.Type != "directory" || m.Server.MCPConfig.Env["DARKROOM_DATA_DIR"] != "${user_config.data_dir}" {
		t.Errorf("data_dir: %+v", o)
	}

	edit := func(f func(map[string]any)) []byte {
		var x map[string]any
		json.Unmarshal(raw, &x)
		f(x)
		out, _ := json.Marshal(x)
		return out
	}
	server := func(x map[string]any) map[string]any { return x["server"].(map[string]any) }
	cases := []struct {
		name string
		doc  []byte
		want string
	}{
		{"manifest 0.4", edit(func(x map[string]any) { x["manifest_version"] = "0.4" }), "manifest_version"},
		{"no author", edit(func(x map[string]any) { delete(x, "author") }), "author"},
		{"a version that is not semver", edit(func(x map[string]any) { x["version"] = "e9b696a" }), "semantic"},
		{"an unknown key", edit(func(x map[string]any) { x["entry"] = "x" }), "unknown key"},
		{"a server type of 0.4", edit(func(x map[string]any) { server(x)["type"] = "uv" }), "server.type"},
		{"a setting wired to nothing", edit(func(x map[string]any) {
			x["user_config"].(map[string]any)["extra"] = map[string]any{"type": "string", "title": "x", "description": "x"}
		}), "wired to nothing"},
		{"an undefined setting", edit(func(x map[string]any) {
			server(x)["mcp_config"].(map[string]any)["args"] = []any{"${user_config.nope}"}
		}), "does not define"},
		{"a sensitive folder", edit(func(x map[string]any) {
			x["user_config"].(map[string]any)["data_dir"].(map[string]any)["sensitive"] = true
		}), "sensitive"},
		{"an override by architecture", edit(func(x map[string]any) {
			server(x)["mcp_config"].(map[string]any)["platform_overrides"] = map[string]any{"darwin-arm64": map[string]any{"command": "x"}}
		}), "not a platform"},
		{"an icon under ${__dirname}", edit(func(x map[string]any) { x["icon"] = "${__dirname}/icon.png" }), "icon"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if p := checkManifest(c.doc); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Errorf("not refused for %q: %q", c.want, p)
			}
		})
	}
}

// hostPlatformName is process.platform, the key of platform_overrides.
func hostPlatformName() string {
	if runtime.GOOS == "windows" {
		return "win32"
	}
	return runtime.GOOS
}

// hostConfig is the command, arguments and environment a host runs for
// the bundle unpacked in dir, with the user's settings, as mcpb's own
// getMcpConfigForManifest (src/shared/config.ts, commit 27083dc) builds
// it: this platform's override, then every ${…} replaced: __dirname, the
// system folders, and user_config (a setting's default, then the user's
// value).
func hostConfig(t *testing.T, dir string, m manifest, user map[string]string, home string) (string, []string, map[string]string) {
	t.Helper()
	c := m.Server.MCPConfig
	if o, ok := c.PlatformOverrides[hostPlatformName()]; ok {
		if o.Command != "" {
			c.Command = o.Command
		}
		if o.Args != nil {
			c.Args = o.Args
		}
		if o.Env != nil {
			c.Env = o.Env
		}
	}
	vars := map[string]string{"__dirname": dir, "pathSeparator": string(filepath.Separator), "/": string(filepath.Separator), "HOME": home}
	for k, o := range m.UserConfig {
		if o.Default != nil {
			vars["user_config."+k] = fmt.Sprint(o.Default)
		}
	}
	for k, v := range user {
		vars["user_config."+k] = v
	}
	sub := func(s string) string {
		for k, v := range vars {
			s = strings.ReplaceAll(s, "${"+k+"}", v)
		}
		if strings.Contains(s, "${") {
			t.Errorf("%q keeps a variable no host fills", s)
		}
		return s
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = sub(a)
	}
	env := map[string]string{}
	for k, v := range c.Env {
		env[k] = sub(v)
	}
	return sub(c.Command), args, env
}

// unpack extracts the bundle at path into dir as a host does, keeping
// each file's mode, and returns its manifest.
func unpack(t *testing.T, path, dir string) (manifest, []byte) {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		out := filepath.Join(dir, filepath.FromSlash(f.Name))
		if !strings.HasPrefix(out, filepath.Clean(dir)+string(filepath.Separator)) {
			t.Fatalf("entry %q leaves the bundle's folder", f.Name)
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, f.Mode().Perm())
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(w, r)
		r.Close()
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatalf("no manifest.json at the bundle's root: %v", err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m, raw
}

// TestBundle: the bundle (DARKROOM_BUNDLE, as make bundle built it; else
// one this test builds for this platform) holds a valid manifest at its
// root, the entry point and every platform's build it names, executable;
// started exactly as a host starts it (the unpacked folder as
// ${__dirname}, the settings substituted, on stdio), it lists the
// manifest's tools and completes a local generation, keeping its data
// where the settings say.
func TestBundle(t *testing.T) {
	path := os.Getenv("DARKROOM_BUNDLE")
	all := path != ""
	if path == "" {
		dist := t.TempDir()
		a, err := buildBundle(t.Context(), root, dist, testVersion, []platform{hostPlatform()})
		if err != nil {
			t.Fatal(err)
		}
		path = a.Path
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bundle %s: %.1f MB", filepath.Base(path), float64(fi.Size())/1e6)
	dir := t.TempDir()
	m, raw := unpack(t, path, dir)
	for _, p := range checkManifest(raw) {
		t.Error(p)
	}
	want := []string{m.Server.EntryPoint, "server/" + hostPlatform().binaryName("darkroom"), m.Icon}
	if all {
		for _, p := range bundlePlatforms {
			want = append(want, "server/"+p.binaryName("darkroom"))
		}
		want = append(want, strings.TrimPrefix(m.Server.MCPConfig.PlatformOverrides["win32"].Command, "${__dirname}/"))
	}
	for _, f := range want {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("the bundle lacks %s", f)
		} else if f != m.Icon && st.Mode().Perm()&0o111 == 0 && runtime.GOOS != "windows" {
			t.Errorf("%s is not executable (%v)", f, st.Mode())
		}
	}

	// A release's server.json beside its bundle names that bundle: its
	// version, its URL and its SHA-256.
	if sj, err := os.ReadFile(filepath.Join(filepath.Dir(path), serverJSON)); all && err == nil {
		for _, p := range checkServerJSON(sj) {
			t.Errorf("the release's server.json: %s", p)
		}
		a, err := hashFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"version": "` + m.Version + `"`, bundleURL(m.Version), `"fileSha256": "` + a.SHA256 + `"`, imageRepo + ":" + m.Version} {
			if !strings.Contains(string(sj), want) {
				t.Errorf("the release's server.json lacks %s", want)
			}
		}
	}

	cases := []struct {
		name string
		user map[string]string
		// data is where the database must be, given the test's home.
		data func(home, chosen string) string
	}{
		{"the settings left empty", nil, func(home, _ string) string {
			// darkroom stdio's user data folder (cmd/darkroom/datadir.go),
			// given the home below.
			switch runtime.GOOS {
			case "windows":
				return filepath.Join(home, "darkroom")
			case "darwin":
				return filepath.Join(home, "Library", "Application Support", "darkroom")
			}
			return filepath.Join(home, ".local", "share", "darkroom")
		}},
		{"a data folder chosen", map[string]string{"data_dir": "CHOSEN"}, func(_, chosen string) string { return chosen }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home, chosen := t.TempDir(), t.TempDir()
			user := map[string]string{}
			for k, v := range c.user {
				user[k] = strings.ReplaceAll(v, "CHOSEN", chosen)
			}
			command, args, env := hostConfig(t, dir, m, user, home)
			if env["DARKROOM_DATA_DIR"] != user["data_dir"] {
				t.Errorf("DARKROOM_DATA_DIR %q, want %q", env["DARKROOM_DATA_DIR"], user["data_dir"])
			}
			cmd := exec.Command(command, args...)
			// The host's own environment, with a home of the test's so
			// that the user data folder is one it can look in; a files
			// port of the system's choosing beside other tests.
			cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME=", "LOCALAPPDATA="+home, "DARKROOM_ADDR=127.0.0.1:0", "DARKROOM_LOCAL_LATENCY=0", "DARKROOM_MODELS_REFRESH=0")
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cl := mcp.NewClient(&mcp.Implementation{Name: "bundle-host", Version: "1"}, nil)
			cs, err := cl.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("starting %s %v: %v", command, args, err)
			}
			defer cs.Close()
			var listed []string
			for tl, err := range cs.Tools(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				listed = append(listed, tl.Name)
			}
			var inManifest []string
			for _, tl := range m.Tools {
				inManifest = append(inManifest, tl.Name)
			}
			if !slices.Equal(listed, inManifest) {
				t.Errorf("tools/list %v, the manifest %v", listed, inManifest)
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "generate", Arguments: map[string]any{
				"modelId": "local-sketch", "prompt": "a lighthouse at dusk", "wait": true, "waitSeconds": 60}})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res.StructuredContent)
			var g struct {
				Status  string
				Outputs []struct {
					URL   string
					Bytes int64
				}
			}
			if err := json.Unmarshal(b, &g); err != nil || g.Status != "completed" || len(g.Outputs) != 1 {
				t.Fatalf("generate over the bundle's stdio: %s (%v)", b, err)
			}
			resp, err := http.Get(g.Outputs[0].URL)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || n != g.Outputs[0].Bytes {
				t.Errorf("its link: %d, %d bytes of %d", resp.StatusCode, n, g.Outputs[0].Bytes)
			}
			if _, err := os.Stat(filepath.Join(c.data(home, chosen), "darkroom.db")); err != nil {
				t.Errorf("the database is not in the data folder the settings name: %v", err)
			}
		})
	}
}
