package main

import (
	"context"
	"net/http"

	"github.com/darkroom-mcp/darkroom/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const stdioUsage = `Usage: darkroom stdio [flags]

Serves MCP over stdin/stdout as the single local principal, and output
files over loopback HTTP.

`

// stdio is `darkroom stdio`.
func stdio(ctx context.Context, args []string) error {
	cfg, err := parseConfig("stdio", args)
	if err != nil {
		return err
	}
	log := newLogger(cfg.LogLevel)
	// Output links point at /files, so stdio still serves files (only
	// files) over loopback HTTP: on a free port unless --addr says.
	ln, err := listen(cfg)
	if err != nil {
		return err
	}
	a, err := build(ctx, cfg, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer a.close()
	mux := http.NewServeMux()
	if a.files != nil {
		mux.Handle("/files/", a.files)
	}
	files := server.HTTPServer(mux, cfg.Timeouts)
	go func() { _ = files.Serve(ln) }()
	defer files.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bgDone := a.background(ctx)
	log.Info("darkroom on stdio", "version", buildVersion(), "files", cfg.PublicURL+"/files/", "data", cfg.DataDir)
	// stdio is always the local principal; tasks/* and listen are served by
	// the tasks dispatcher wrapped around the transport.
	// The same per-principal limits as HTTP apply, inside the dispatcher's
	// transport so that tasks/get is charged as well.
	limited := server.LimitTransport(&mcp.StdioTransport{}, a.limits, a.tools.RateClass, server.LocalPrincipal)
	err = a.mcp.Run(ctx, a.tasks.Transport(limited, server.LocalPrincipal))
	cancel()
	<-bgDone
	return err
}
