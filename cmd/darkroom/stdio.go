package main

import (
	"context"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func stdio(ctx context.Context, args []string) error {
	cfg, err := parseConfig("stdio", args)
	if err != nil {
		return err
	}
	log := newLogger(cfg.LogLevel)
	// Output links point at /files, so stdio still serves files (only
	// files) over loopback HTTP; a free port unless DARKROOM_ADDR says.
	if _, set := os.LookupEnv("DARKROOM_ADDR"); !set && !flagSet(args, "addr") {
		cfg.Addr = "127.0.0.1:0"
	}
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
	files := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = files.Serve(ln) }()
	defer files.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bgDone := a.background(ctx)
	log.Info("darkroom on stdio", "version", buildVersion(), "files", cfg.PublicURL+"/files/", "data", cfg.DataDir)
	// stdio is always the local principal; tasks/* and listen are served by
	// the tasks dispatcher wrapped around the transport.
	err = a.mcp.Run(ctx, a.tasks.Transport(&mcp.StdioTransport{}, server.LocalPrincipal))
	cancel()
	<-bgDone
	return err
}

func flagSet(args []string, name string) bool {
	for _, a := range args {
		if a == "-"+name || a == "--"+name || strings.HasPrefix(a, "-"+name+"=") || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}
