package main

import (
	"context"
	"net/http"
	"time"

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
	mln, err := listenMetrics(cfg, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	cfg.Drain = cfg.ShutdownGrace * 9 / 10
	a, err := build(ctx, cfg, log)
	if err != nil {
		_ = ln.Close()
		if mln != nil {
			_ = mln.Close()
		}
		return err
	}
	defer a.close()
	if mln != nil {
		msrv := &http.Server{Handler: a.metricsHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = msrv.Serve(mln) }()
		defer msrv.Close()
	}
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
	log.Info("darkroom on stdio", append(a.banner("stdio", mln), "files", cfg.PublicURL+"/files/")...)
	// stdio is always the local principal; tasks/* and listen are served by
	// the tasks dispatcher wrapped around the transport.
	// The same per-principal limits as HTTP apply, inside the dispatcher's
	// transport so that tasks/get is charged as well; the observer sees
	// every request and answer, refusals included.
	limited := server.LimitTransport(a.obs.Transport(&mcp.StdioTransport{}), a.limits, a.tools.RateClass, server.LocalPrincipal)
	err = a.mcp.Run(ctx, a.tasks.Transport(limited, server.LocalPrincipal))
	cancel()
	<-bgDone
	return err
}
