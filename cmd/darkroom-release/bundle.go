package main

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The MCP Bundle's manifest, as modelcontextprotocol/mcpb's MANIFEST.md
// ("Current version: 0.3", last updated 2025-12-02) and its schema
// src/schemas/0.3.ts (commit 27083dc, 2025-12-03) define it: only the
// fields darkroom's bundle uses.
type manifest struct {
	ManifestVersion string                `json:"manifest_version"`
	Name            string                `json:"name"`
	DisplayName     string                `json:"display_name,omitempty"`
	Version         string                `json:"version"`
	Description     string                `json:"description"`
	LongDescription string                `json:"long_description,omitempty"`
	Author          author                `json:"author"`
	Repository      *repository           `json:"repository,omitempty"`
	Homepage        string                `json:"homepage,omitempty"`
	Documentation   string                `json:"documentation,omitempty"`
	Support         string                `json:"support,omitempty"`
	Icon            string                `json:"icon,omitempty"`
	Server          server                `json:"server"`
	Tools           []manifestTool        `json:"tools,omitempty"`
	Keywords        []string              `json:"keywords,omitempty"`
	License         string                `json:"license,omitempty"`
	PrivacyPolicies []string              `json:"privacy_policies,omitempty"`
	Compatibility   *compatibility        `json:"compatibility,omitempty"`
	UserConfig      map[string]userOption `json:"user_config,omitempty"`
}

type author struct {
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
}

type repository struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

type server struct {
	Type       string    `json:"type"`
	EntryPoint string    `json:"entry_point"`
	MCPConfig  mcpConfig `json:"mcp_config"`
}

type mcpConfig struct {
	Command           string               `json:"command"`
	Args              []string             `json:"args,omitempty"`
	Env               map[string]string    `json:"env,omitempty"`
	PlatformOverrides map[string]mcpConfig `json:"platform_overrides,omitempty"`
}

type manifestTool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

type compatibility struct {
	ClaudeDesktop string   `json:"claude_desktop,omitempty"`
	Platforms     []string `json:"platforms,omitempty"`
}

type userOption struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
	Default     any    `json:"default,omitempty"`
	Sensitive   bool   `json:"sensitive,omitempty"`
}

const (
	repoURL   = "https://github.com/darkroom-mcp/darkroom"
	launcher  = "server/darkroom"
	iconFile  = "icon.png"
	iconSrc   = "docs/icon.png"
	winBinary = "server/darkroom-windows-amd64.exe"
)

// providerKeys are the bundle's settings for the providers' keys: each
// optional and sensitive (a host keeps it in the system's secret store),
// wired into the darkroom variable of that key, which wins over the
// conventional one a user's environment may also hold.
var providerKeys = []struct{ key, env, title, what string }{
	{"replicate_api_token", "DARKROOM_REPLICATE_API_TOKEN", "Replicate API token", "turns on Replicate's models (FLUX, Veo 3 Fast, Kling)"},
	{"fal_key", "DARKROOM_FAL_KEY", "fal API key", "turns on fal's models (FLUX, Veo 3 Fast, Kling)"},
	{"gemini_api_key", "DARKROOM_GEMINI_API_KEY", "Gemini API key", "turns on Google's Gemini image models and Gemini Omni video"},
	{"openai_api_key", "DARKROOM_OPENAI_API_KEY", "OpenAI API key", "turns on OpenAI's gpt-image-2"},
}

// newManifest is the bundle's manifest for version, listing tools. The
// command is a POSIX launcher that runs the binary built for the machine
// (macOS and Linux, arm64 and x86-64: the platform_overrides of a
// manifest are keyed by operating system only), and the Windows build
// directly on win32. Every setting has a default, the empty string for a
// key or the data folder, so that a host substitutes an empty value
// (which darkroom reads as unset: stdio's data folder is then the user
// data folder) rather than leave ${user_config.…} in place.
func newManifest(version string, tools []tool) manifest {
	env := map[string]string{"DARKROOM_DATA_DIR": "${user_config.data_dir}"}
	opts := map[string]userOption{
		"data_dir": {Type: "directory", Title: "Data folder",
			Description: "Where darkroom keeps its database and the images and videos it makes. Empty: the user data folder (~/Library/Application Support/darkroom, %LOCALAPPDATA%\\darkroom, ~/.local/share/darkroom).",
			Default:     ""},
	}
	for _, k := range providerKeys {
		env[k.env] = "${user_config." + k.key + "}"
		opts[k.key] = userOption{Type: "string", Title: k.title, Sensitive: true, Default: "",
			Description: "Optional: " + k.what + ". Without any key darkroom still works, offline, with its local models."}
	}
	m := manifest{
		ManifestVersion: "0.3",
		Name:            "darkroom",
		DisplayName:     "darkroom",
		Version:         version,
		Description:     "Image and video generation: Replicate, fal, Google, OpenAI, or offline. Durable, self-hosted.",
		LongDescription: "darkroom lets Claude make images and videos. Without any key it draws offline with its local models, so the whole flow can be tried for free; add a Replicate, fal, Gemini or OpenAI key for real models. Every generation is durable: a long video never holds a request open, and nothing is lost when Claude or darkroom restarts. Outputs stay in your data folder and are handed to Claude as previews and short-lived links.",
		Author:          author{Name: "darkroom contributors", URL: repoURL},
		Repository:      &repository{Type: "git", URL: repoURL + ".git"},
		Homepage:        repoURL,
		Documentation:   repoURL + "#readme",
		Support:         repoURL + "/issues",
		Icon:            iconFile,
		Server: server{
			Type:       "binary",
			EntryPoint: launcher,
			MCPConfig: mcpConfig{
				Command: "${__dirname}/" + launcher,
				Args:    []string{"stdio"},
				Env:     env,
				PlatformOverrides: map[string]mcpConfig{
					"win32": {Command: "${__dirname}/" + winBinary},
				},
			},
		},
		Keywords: []string{"image", "video", "generation", "replicate", "fal", "gemini", "veo", "openai", "flux"},
		PrivacyPolicies: []string{
			"https://replicate.com/privacy",
			"https://fal.ai/privacy",
			"https://policies.google.com/privacy",
			"https://openai.com/policies/privacy-policy/",
		},
		Compatibility: &compatibility{ClaudeDesktop: ">=0.10.0", Platforms: []string{"darwin", "win32", "linux"}},
		UserConfig:    opts,
	}
	for _, t := range tools {
		m.Tools = append(m.Tools, manifestTool{t.Name, t.Description})
	}
	return m
}

// launcherScript runs the bundle's build for this machine, passing its
// arguments and environment through (exec: the host's signals reach
// darkroom itself).
const launcherScript = `#!/bin/sh
# darkroom's MCP Bundle: run the build for this machine.
dir=$(dirname "$0")
case "$(uname -s)-$(uname -m)" in
Darwin-arm64) exec "$dir/darkroom-darwin-arm64" "$@" ;;
Darwin-x86_64) exec "$dir/darkroom-darwin-amd64" "$@" ;;
Linux-x86_64 | Linux-amd64) exec "$dir/darkroom-linux-amd64" "$@" ;;
Linux-aarch64 | Linux-arm64) exec "$dir/darkroom-linux-arm64" "$@" ;;
esac
echo "darkroom: this bundle has no build for $(uname -s) $(uname -m)" >&2
exit 1
`

// artifact is a file a build wrote.
type artifact struct {
	Path   string
	Size   int64
	SHA256 string
}

func hashFile(path string) (artifact, error) {
	f, err := os.Open(path)
	if err != nil {
		return artifact{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return artifact{}, err
	}
	return artifact{path, n, hex.EncodeToString(h.Sum(nil))}, nil
}

// buildBundle builds darkroom for platforms into dist (as
// darkroom-V-OS-ARCH, reused when present: release builds them first),
// lists the host build's tools, and writes dist/darkroom-V.mcpb.
func buildBundle(ctx context.Context, root, dist, version string, platforms []platform) (artifact, error) {
	if !semver.MatchString(version) {
		return artifact{}, fmt.Errorf("version %q is not a semantic version (a bundle's manifest needs one)", version)
	}
	if err := os.MkdirAll(dist, 0o755); err != nil {
		return artifact{}, err
	}
	bins := map[platform]string{}
	for _, p := range platforms {
		bins[p] = filepath.Join(dist, p.binaryName("darkroom-"+version))
		if _, err := os.Stat(bins[p]); err == nil {
			continue
		}
		if err := build(ctx, root, p, version, bins[p]); err != nil {
			return artifact{}, err
		}
	}
	host, ok := bins[hostPlatform()]
	if !ok {
		var err error
		if host, err = buildHost(ctx, root, version); err != nil {
			return artifact{}, err
		}
		defer os.RemoveAll(filepath.Dir(host))
	}
	tools, err := listTools(ctx, host)
	if err != nil {
		return artifact{}, err
	}
	icon, err := os.ReadFile(filepath.Join(root, iconSrc))
	if err != nil {
		return artifact{}, err
	}
	m := newManifest(version, tools)
	mj := marshalJSON(m, "  ")
	out := filepath.Join(dist, "darkroom-"+version+".mcpb")
	if err := writeZip(out, mj, icon, platforms, bins); err != nil {
		return artifact{}, err
	}
	return hashFile(out)
}

// writeZip writes the bundle: manifest.json and the icon at its root, the
// launcher and each build under server/, executables mode 0755, every
// entry with one fixed time so that the same inputs make the same bytes.
func writeZip(out string, manifestJSON, icon []byte, platforms []platform, bins map[platform]string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	stamp := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(name string, mode os.FileMode, r io.Reader) error {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: stamp}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, r)
		return err
	}
	if err := add("manifest.json", 0o644, bytes.NewReader(append(manifestJSON, '\n'))); err != nil {
		return err
	}
	if err := add(iconFile, 0o644, bytes.NewReader(icon)); err != nil {
		return err
	}
	if err := add(launcher, 0o755, strings.NewReader(launcherScript)); err != nil {
		return err
	}
	for _, p := range platforms {
		f, err := os.Open(bins[p])
		if err != nil {
			return err
		}
		err = add("server/"+p.binaryName("darkroom"), 0o755, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}
