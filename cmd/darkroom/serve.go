package main

import (
	"context"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/auth"
)

const serveUsage = `Usage: darkroom serve [flags]

Serves MCP over Streamable HTTP at /mcp, output files at /files and
provider webhooks at /webhooks.

`

// serve is `darkroom serve`.
func serve(ctx context.Context, args []string) error {
	cfg, err := parseConfig("serve", args)
	if err != nil {
		return err
	}
	log := cfg.logger()
	ln, err := listen(cfg)
	if err != nil {
		return err
	}
	if cfg.Auth, err = auth.ConfigFromEnv(cfg.authEnv, cfg.PublicURL+"/mcp"); err != nil {
		_ = ln.Close()
		return err
	}
	if err := auth.CheckBind(cfg.Addr, cfg.Auth.Configured()); err != nil {
		_ = ln.Close()
		return err
	}
	mln, err := listenMetrics(cfg, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	closeAll := func() {
		_ = ln.Close()
		if mln != nil {
			_ = mln.Close()
		}
	}
	cfg.Drain = cfg.ShutdownGrace * 9 / 10
	a, err := build(ctx, cfg, log)
	if err != nil {
		closeAll()
		return err
	}
	defer a.close()
	// Header, body, per-write and idle bounds; SSE streams and bounded
	// waits still run for minutes.
	srv := server.HTTPServer(a.handler(), cfg.Timeouts)
	if mln != nil {
		msrv := &http.Server{Handler: a.metricsHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = msrv.Serve(mln) }()
		defer msrv.Close()
	}
	bgDone := a.background(ctx)
	served := make(chan error, 1)
	// Out of descriptors: a log line and darkroom_accept_errors_total,
	// while net/http retries (its own line per retry is left out).
	srv.ErrorLog = stdlog.New(httpErrors{log}, "", 0)
	go func() { served <- srv.Serve(server.AcceptErrors(ln, log, a.metrics.AcceptFailed)) }()
	a.announce(log, "darkroom serving", "http://"+ln.Addr().String()+"/mcp", mln)
	select {
	case err := <-served: // the listener failed
		_ = srv.Close()
		<-bgDone
		return err
	case <-ctx.Done():
	}
	a.drain(srv, served, bgDone)
	return nil
}

// listen binds cfg.Addr and, when no public URL is configured, derives it
// from the bound address (so port 0 works).
func listen(cfg *config) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + ln.Addr().String()
	}
	return ln, nil
}

// httpErrors is net/http's error log as slog lines, without its
// "Accept error ... retrying" line: server.AcceptErrors says it once.
type httpErrors struct{ log *slog.Logger }

func (h httpErrors) Write(p []byte) (int, error) {
	if line := strings.TrimSpace(string(p)); !strings.HasPrefix(line, "http: Accept error") {
		h.log.Warn(line)
	}
	return len(p), nil
}
