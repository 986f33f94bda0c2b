// Command darkroom is a self-hosted MCP server for image and video
// generation.
//
//	darkroom serve     Streamable HTTP at /mcp (default 127.0.0.1:8080)
//	darkroom stdio     MCP over stdin/stdout
//	darkroom client    a Tasks client for the shell
//	darkroom healthcheck  probe /healthz or /readyz (the image's HEALTHCHECK)
//	darkroom version
//
// Every setting is a flag whose default is a DARKROOM_* environment
// variable (config.go; the tables in docs/configuration.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `darkroom: a self-hosted MCP server for image and video generation

Usage:
  darkroom serve [flags]   serve MCP over Streamable HTTP at /mcp
  darkroom stdio [flags]   serve MCP over stdin/stdout
  darkroom client ...      call tools as a Tasks client
  darkroom healthcheck     probe a running server (/healthz, or /readyz)
  darkroom models check    ask each configured provider which curated models it serves
  darkroom version         print the version

Run "darkroom COMMAND -h" for its flags. Every flag has a DARKROOM_*
environment variable that sets its default; the flag overrides it (see
docs/configuration.md).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal starts the graceful stop; a second one kills.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is darkroom with its arguments (without the program name), returning
// the exit code: 0, 1 for a failure, 2 for a command line that does not
// parse. -h and --help print usage to stdout and exit 0.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	var err error
	switch cmd {
	case "serve":
		err = serve(ctx, args)
	case "stdio":
		err = stdio(ctx, args)
	case "client":
		err = runClient(ctx, args, stdout, stderr)
	case "healthcheck":
		err = runHealthcheck(ctx, args, stdout)
	case "models":
		err = runModels(ctx, args, stdout)
	case "version", "--version", "-v":
		cmd = "version"
		err = runVersion(args, stdout)
	case "help", "-h", "--help":
		if len(args) > 0 && help(stdout, args[0]) {
			return 0
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "darkroom: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	var uerr usageError
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return 0
	case errors.Is(err, flag.ErrHelp):
		help(stdout, cmd)
		return 0
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "darkroom %s: %v\nRun \"darkroom %s -h\" for usage.\n", cmd, err, cmd)
		return 2
	}
	fmt.Fprintln(stderr, "darkroom:", err)
	return 1
}

// help prints the usage of cmd, reporting whether there is such a command.
func help(w io.Writer, cmd string) bool {
	switch cmd {
	case "serve":
		fmt.Fprint(w, serveUsage)
		writeSettings(w, serverSettings(cmd))
	case "stdio":
		fmt.Fprint(w, stdioUsage)
		writeSettings(w, serverSettings(cmd))
	case "client":
		fmt.Fprint(w, clientUsage)
		writeSettings(w, clientSettings())
	case "healthcheck":
		fmt.Fprint(w, healthcheckUsage)
		writeSettings(w, healthcheckSettings())
	case "models":
		fmt.Fprint(w, modelsUsage)
		writeSettings(w, serverSettings("serve"))
	case "version":
		fmt.Fprint(w, versionUsage)
	default:
		return false
	}
	return true
}
