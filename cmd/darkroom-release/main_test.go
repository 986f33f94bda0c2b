package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// hostBin is darkroom built for this machine, as a release builds it,
// once for every test of the package; root is the repository's root.
var hostBin string

const root = "../.."

const testVersion = "0.0.0-test.1"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "darkroom-release-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hostBin = filepath.Join(dir, hostPlatform().binaryName("darkroom-"+testVersion))
	if err := build(context.Background(), root, hostPlatform(), testVersion, hostBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// realTools is the host build's tools/list.
func realTools(t *testing.T) []tool {
	t.Helper()
	tools, err := listTools(t.Context(), hostBin)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}
