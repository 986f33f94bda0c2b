// Command darkroom is a self-hosted MCP server for image and video
// generation.
//
//	darkroom serve     Streamable HTTP at /mcp (default 127.0.0.1:8080)
//	darkroom stdio     MCP over stdin/stdout
//	darkroom client    a Tasks client for the shell
//	darkroom version
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `darkroom: a self-hosted MCP server for image and video generation

Usage:
  darkroom serve [flags]   serve MCP over Streamable HTTP at /mcp
  darkroom stdio [flags]   serve MCP over stdin/stdout
  darkroom client ...      call tools as a Tasks client (darkroom client -h)
  darkroom version         print the version

Run "darkroom serve -h" for flags; every flag has a DARKROOM_* environment
equivalent (see README.md).
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(ctx, os.Args[2:])
	case "stdio":
		err = stdio(ctx, os.Args[2:])
	case "client":
		err = runClient(ctx, os.Args[2:], os.Stdout)
	case "version", "--version", "-v":
		fmt.Println("darkroom", buildVersion())
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "darkroom: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "darkroom:", err)
		os.Exit(1)
	}
}
