package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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
	log := newLogger(cfg.LogLevel)
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
	a, err := build(ctx, cfg, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer a.close()
	// Header, body, per-write and idle bounds; SSE streams and bounded
	// waits still run for minutes.
	srv := server.HTTPServer(a.handler(), cfg.Timeouts)
	bgDone := a.background(ctx)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	mode := "none: loopback only, every request is the single local principal"
	if cfg.Auth.Configured() {
		mode = fmt.Sprintf("bearer tokens: %d API key(s), OAuth %v", len(cfg.Auth.Keys), cfg.Auth.OAuth.Enabled())
	}
	log.Info("darkroom serving", "version", buildVersion(), "addr", "http://"+ln.Addr().String()+"/mcp",
		"data", cfg.DataDir, "auth", mode)
	err = srv.Serve(ln)
	<-bgDone
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
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
