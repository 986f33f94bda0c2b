package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// releaseResult is what a release wrote, in the order it is listed.
type releaseResult struct{ Files []string }

// buildRelease writes a release of version into dist: every platform's
// binary (darkroom-V-OS-ARCH), the bundle (darkroom-V.mcpb), server.json
// for that version and bundle, the Docker catalog's files pinned to HEAD
// (docker-mcp/), and SHA256SUMS of the binaries and the bundle, in the
// format sha256sum -c reads.
func buildRelease(ctx context.Context, root, dist, version string) (releaseResult, error) {
	var r releaseResult
	if !semver.MatchString(version) {
		return r, fmt.Errorf("version %q is not a semantic version", version)
	}
	if err := os.MkdirAll(dist, 0o755); err != nil {
		return r, err
	}
	for _, p := range bundlePlatforms {
		if err := build(ctx, root, p, version, filepath.Join(dist, p.binaryName("darkroom-"+version))); err != nil {
			return r, err
		}
	}
	b, err := buildBundle(ctx, root, dist, version, bundlePlatforms)
	if err != nil {
		return r, err
	}
	sj, err := readServerJSON(root)
	if err != nil {
		return r, err
	}
	rel, err := releaseServerJSON(sj, version, b.SHA256)
	if err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(dist, serverJSON), rel, 0o644); err != nil {
		return r, err
	}
	commit := ""
	if out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	}
	host := filepath.Join(dist, hostPlatform().binaryName("darkroom-"+version))
	tools, err := listTools(ctx, host)
	if err != nil {
		return r, err
	}
	if err := writeCatalog(filepath.Join(dist, "docker-mcp"), tools, commit); err != nil {
		return r, err
	}
	var sums []string
	names := []string{filepath.Base(b.Path)}
	for _, p := range bundlePlatforms {
		names = append(names, p.binaryName("darkroom-"+version))
	}
	sort.Strings(names)
	for _, n := range names {
		a, err := hashFile(filepath.Join(dist, n))
		if err != nil {
			return r, err
		}
		sums = append(sums, a.SHA256+"  "+n)
		r.Files = append(r.Files, fmt.Sprintf("%s  %d bytes", a.Path, a.Size))
	}
	if err := os.WriteFile(filepath.Join(dist, "SHA256SUMS"), []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		return r, err
	}
	r.Files = append(r.Files, filepath.Join(dist, "SHA256SUMS"), filepath.Join(dist, serverJSON), filepath.Join(dist, "docker-mcp", "server.yaml"), filepath.Join(dist, "docker-mcp", "tools.json"))
	return r, nil
}
