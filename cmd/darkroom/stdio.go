package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const stdioUsage = `Usage: darkroom stdio [flags]

Serves MCP over stdin/stdout as the single local principal, and output
files over loopback HTTP on ` + stdioFilesAddr + ` (--addr), a fixed port so
that links stay valid when the assistant restarts darkroom. When that
port is taken, a free one is used instead (a log line says which): links
made then end with the process, and get_generation gives fresh ones.

`

// stdioFilesAddr is the stdio files listener's default: a fixed port, so
// a link handed out before a restart still answers after it (the signing
// key lives in the data directory).
const stdioFilesAddr = "127.0.0.1:7412"

// stdio is `darkroom stdio`.
func stdio(ctx context.Context, args []string) error {
	cfg, err := parseConfig("stdio", args)
	if err != nil {
		return err
	}
	log := cfg.logger()
	// Output links point at /files, so stdio still serves files (only
	// files) over loopback HTTP.
	ln, err := listenFiles(cfg, log)
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
	a.announce(log, "darkroom on stdio", "stdio", mln)
	err = a.mcp.Run(ctx, a.stdioChain(&mcp.StdioTransport{}, a.limits))
	cancel()
	<-bgDone
	return err
}

// stdioChain is the transport go-sdk reads on stdio, around t: the
// observer first (it sees every request and answer, refusals included,
// and parses each message once for the layers below), then the same
// per-principal limits as HTTP, charged to c, then the tasks dispatcher,
// which serves tasks/* and listen (so tasks/get is charged as well).
// stdio is always the local principal.
func (a *app) stdioChain(t mcp.Transport, c *limit.Classes) mcp.Transport {
	limited := server.LimitTransport(a.obs.Transport(t), c, a.tools.RateClass, server.LocalPrincipal)
	return a.tasks.Transport(limited, server.LocalPrincipal)
}

// listenFiles opens the stdio files listener on cfg.Addr. When that port
// is taken (another darkroom stdio, say) and no --public-url pins the
// links, it takes a free port on the same host rather than failing the
// assistant's whole server, and says so.
func listenFiles(cfg *config, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil && errors.Is(err, syscall.EADDRINUSE) && cfg.PublicURL == "" {
		host, _, _ := net.SplitHostPort(cfg.Addr)
		var err2 error
		if ln, err2 = net.Listen("tcp", net.JoinHostPort(host, "0")); err2 == nil {
			log.Warn("darkroom stdio: the files port is taken; serving links on a free port instead, so links made now end with this process",
				"wanted", cfg.Addr, "addr", ln.Addr().String())
			err = nil
		}
	}
	if err != nil {
		return nil, err
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + ln.Addr().String()
	}
	return ln, nil
}
