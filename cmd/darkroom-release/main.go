// Command darkroom-release builds what a darkroom release ships, from a
// checkout, without publishing anything:
//
//	darkroom-release bundle  [-version V] [-out dist] [-platforms all|host]
//	darkroom-release release [-version V] [-out dist]
//	darkroom-release catalog [-commit SHA] [-dir deploy/docker-mcp]
//
// bundle cross-builds darkroom (static: CGO_ENABLED=0, -trimpath, the
// version stamped into `darkroom version`) for every platform of the MCP
// Bundle, asks the host's build for its tools/list over stdio, and writes
// darkroom-V.mcpb (manifest.json, manifest_version 0.3, at its root).
// release does the same and adds SHA256SUMS and server.json (the
// repository's, with the version, the image tag, the bundle's URL and its
// fileSha256 filled in) and the Docker MCP catalog's files. catalog
// rewrites deploy/docker-mcp/tools.json and server.yaml from the real
// tools/list (what the test TestCatalogFiles checks). Run it from the
// repository's root (make bundle, make release).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

const usage = `Usage:
  darkroom-release bundle  [-version V] [-out dist] [-platforms all|host]
  darkroom-release release [-version V] [-out dist]
  darkroom-release catalog [-commit SHA] [-dir deploy/docker-mcp]
  darkroom-release icon     (rewrites docs/icon.png)
`

// errUsage is a command line it does not know: main prints the usage.
var errUsage = errors.New("unknown command")

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "darkroom-release:", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	version := fs.String("version", "", "release version (default: from git: the v* tag at HEAD, else 0.0.0-dev.gSHA)")
	dist := fs.String("out", "dist", "output folder")
	platforms := fs.String("platforms", "all", "all: every platform of the bundle; host: this one only (tests)")
	commit := fs.String("commit", "", "source commit the Docker catalog entry pins (catalog; release: HEAD)")
	dir := fs.String("dir", filepath.Join("deploy", "docker-mcp"), "the Docker MCP catalog files' folder (catalog)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *version == "" {
		*version = gitVersion(".")
	}
	t0 := time.Now()
	switch args[0] {
	case "bundle":
		ps := bundlePlatforms
		if *platforms == "host" {
			ps = []platform{hostPlatform()}
		}
		b, err := buildBundle(ctx, ".", *dist, *version, ps)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s (%d bytes, sha256 %s) in %s\n", b.Path, b.Size, b.SHA256, time.Since(t0).Round(time.Second))
	case "release":
		r, err := buildRelease(ctx, ".", *dist, *version)
		if err != nil {
			return err
		}
		for _, f := range r.Files {
			fmt.Fprintln(out, f)
		}
		fmt.Fprintf(out, "release %s in %s\n", *version, time.Since(t0).Round(time.Second))
	case "catalog":
		bin, err := buildHost(ctx, ".", *version)
		if err != nil {
			return err
		}
		defer os.RemoveAll(filepath.Dir(bin))
		tools, err := listTools(ctx, bin)
		if err != nil {
			return err
		}
		if err := writeCatalog(*dir, tools, *commit); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: server.yaml and tools.json (%d tools)\n", *dir, len(tools))
	case "icon":
		if err := os.WriteFile(iconSrc, drawIcon(), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(out, iconSrc)
	default:
		return errUsage
	}
	return nil
}
