package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// platform is one build of the binary: GOOS and GOARCH.
type platform struct{ OS, Arch string }

// bundlePlatforms are the builds a release and its bundle carry: macOS on
// Apple silicon and Intel, Windows on x86-64, Linux on x86-64 and arm64.
var bundlePlatforms = []platform{
	{"darwin", "arm64"}, {"darwin", "amd64"},
	{"windows", "amd64"},
	{"linux", "amd64"}, {"linux", "arm64"},
}

func hostPlatform() platform { return platform{runtime.GOOS, runtime.GOARCH} }

// binaryName is the file a release names the build of p: in a bundle
// darkroom-OS-ARCH under server/, in a release darkroom-V-OS-ARCH; .exe
// on Windows.
func (p platform) binaryName(prefix string) string {
	n := prefix + "-" + p.OS + "-" + p.Arch
	if p.OS == "windows" {
		n += ".exe"
	}
	return n
}

// semver is Semantic Versioning 2.0.0's grammar (semver.org), which the
// bundle's manifest and server.json's version follow.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// gitVersion is the version of the checkout at root: the tag vX.Y.Z at
// HEAD without its v, else 0.0.0-dev.gSHA (g and the short commit, so the
// identifier is never all digits), else 0.0.0-dev.
func gitVersion(root string) string {
	if out, err := exec.Command("git", "-C", root, "describe", "--tags", "--exact-match", "--match", "v[0-9]*").Output(); err == nil {
		if v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v"); semver.MatchString(v) {
			return v
		}
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		return "0.0.0-dev.g" + strings.TrimSpace(string(out))
	}
	return "0.0.0-dev"
}

// build compiles cmd/darkroom for p into file: static (no cgo: the SQLite
// driver is pure Go), -trimpath, without symbol tables, the version
// stamped where `darkroom version` reads it.
func build(ctx context.Context, root string, p platform, version, file string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version="+version, "-o", file, "./cmd/darkroom")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s/%s: %v\n%s", p.OS, p.Arch, err, out)
	}
	return nil
}

// buildHost builds this platform's binary into a new temporary folder.
func buildHost(ctx context.Context, root, version string) (string, error) {
	dir, err := os.MkdirTemp("", "darkroom-release-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, hostPlatform().binaryName("darkroom"))
	if err := build(ctx, root, hostPlatform(), version, bin); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return bin, nil
}
