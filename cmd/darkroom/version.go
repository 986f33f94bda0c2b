package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

const versionUsage = `Usage: darkroom version

Prints the version.
`

// runVersion is `darkroom version`; it takes no flags but -h.
func runVersion(args []string, out io.Writer) error {
	if _, err := parseSettings[struct{}]("version", nil, args, false, &struct{}{}); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out, "darkroom", buildVersion())
	return err
}
