package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/compat"
	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/storage/blob"
	"github.com/darkroom-mcp/darkroom/storage/db"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// config is every setting, from flags with DARKROOM_* environment defaults.
type config struct {
	Addr           string
	DataDir        string
	PublicURL      string
	LocalLatency   float64
	MaxBodyBytes   int64
	MaxInputBytes  int64
	LinkTTL        time.Duration
	AllowedOrigins []string
	LogLevel       slog.Level
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// parseConfig reads flags for cmd, each defaulting to its environment
// variable, and validates them.
func parseConfig(cmd string, args []string) (*config, error) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	addr := fs.String("addr", env("DARKROOM_ADDR", "127.0.0.1:8080"), "HTTP listen address (DARKROOM_ADDR)")
	data := fs.String("data", env("DARKROOM_DATA_DIR", "./darkroom-data"), "data directory: database and local files (DARKROOM_DATA_DIR)")
	public := fs.String("public-url", env("DARKROOM_PUBLIC_URL", ""), "public base URL for links and webhooks (DARKROOM_PUBLIC_URL; default http://ADDR)")
	latency := fs.String("local-latency", env("DARKROOM_LOCAL_LATENCY", "1"), "local provider latency scale, 0 = instant (DARKROOM_LOCAL_LATENCY)")
	body := fs.String("max-body-bytes", env("DARKROOM_MAX_BODY_BYTES", strconv.Itoa(16<<20)), "request body cap (DARKROOM_MAX_BODY_BYTES)")
	input := fs.String("max-input-bytes", env("DARKROOM_MAX_INPUT_BYTES", strconv.Itoa(10<<20)), "input image cap (DARKROOM_MAX_INPUT_BYTES)")
	ttl := fs.String("link-ttl", env("DARKROOM_LINK_TTL", "15m"), "signed link lifetime (DARKROOM_LINK_TTL)")
	origins := fs.String("allowed-origins", env("DARKROOM_ALLOWED_ORIGINS", ""), "comma-separated extra browser origins allowed on /mcp (DARKROOM_ALLOWED_ORIGINS)")
	level := fs.String("log-level", env("DARKROOM_LOG_LEVEL", "info"), "debug, info, warn or error (DARKROOM_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c := &config{Addr: *addr, DataDir: *data, PublicURL: strings.TrimSuffix(*public, "/")}
	var err error
	if c.LocalLatency, err = local.ParseLatencyScale(*latency); err != nil {
		return nil, fmt.Errorf("DARKROOM_LOCAL_LATENCY: %w", err)
	}
	if c.MaxBodyBytes, err = strconv.ParseInt(*body, 10, 64); err != nil || c.MaxBodyBytes < 1024 {
		return nil, fmt.Errorf("DARKROOM_MAX_BODY_BYTES: %q is not a byte count >= 1024", *body)
	}
	if c.MaxInputBytes, err = strconv.ParseInt(*input, 10, 64); err != nil || c.MaxInputBytes < 1 {
		return nil, fmt.Errorf("DARKROOM_MAX_INPUT_BYTES: %q is not a positive byte count", *input)
	}
	if c.LinkTTL, err = time.ParseDuration(*ttl); err != nil || c.LinkTTL < time.Second || c.LinkTTL > 7*24*time.Hour {
		return nil, fmt.Errorf("DARKROOM_LINK_TTL: %q is not a duration between 1s and 168h", *ttl)
	}
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			c.AllowedOrigins = append(c.AllowedOrigins, strings.TrimSuffix(o, "/"))
		}
	}
	if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return nil, fmt.Errorf("DARKROOM_LOG_LEVEL: %w", err)
	}
	return c, nil
}

// app is darkroom wired together.
type app struct {
	cfg    *config
	log    *slog.Logger
	db     *db.DB
	svc    *generation.Service
	runner *generation.Runner
	tools  *compat.Tools
	files  *blob.Local
	mcp    *mcp.Server
	local  *local.Provider
}

func newApp(ctx context.Context, cfg *config, log *slog.Logger) (*app, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	d, err := db.Open(ctx, filepath.Join(cfg.DataDir, "darkroom.db"))
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	a := &app{cfg: cfg, log: log, db: d}
	if err := a.wire(); err != nil {
		_ = d.Close()
		return nil, err
	}
	return a, nil
}

func (a *app) wire() error {
	secret, err := loadSecret(filepath.Join(a.cfg.DataDir, "link-secret"))
	if err != nil {
		return err
	}
	if a.files, err = blob.NewLocal(filepath.Join(a.cfg.DataDir, "files"), secret, a.cfg.PublicURL); err != nil {
		return fmt.Errorf("local file store: %w", err)
	}
	if a.local, err = local.New(local.Options{Dir: a.cfg.DataDir, Scale: a.cfg.LocalLatency}); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	a.svc, err = generation.NewService(generation.Config{
		DB:            a.db,
		Blobs:         a.files,
		Providers:     []provider.Provider{a.local},
		MaxInputBytes: a.cfg.MaxInputBytes,
		LinkTTL:       a.cfg.LinkTTL,
	})
	if err != nil {
		return err
	}
	a.runner = generation.NewRunner(a.svc, generation.RunnerConfig{Logger: a.log})
	a.tools = compat.New(compat.Config{
		Service:       a.svc,
		Owner:         server.Owner(nil),
		MaxInputBytes: a.cfg.MaxInputBytes,
	})
	a.mcp = server.New(a.serverConfig())
	return nil
}

func (a *app) serverConfig() server.Config {
	return server.Config{
		Version:        buildVersion(),
		Tools:          a.tools,
		Files:          a.files.Handler(),
		AllowedOrigins: a.cfg.AllowedOrigins,
		MaxBodyBytes:   a.cfg.MaxBodyBytes,
		Logger:         a.log,
	}
}

func (a *app) handler() http.Handler { return server.Handler(a.serverConfig(), a.mcp) }

// close stops background work and the database.
func (a *app) close() error { return a.db.Close() }

// loadSecret reads the HMAC key for file links, creating it on first start
// so links stay valid across restarts.
func loadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read link secret: %w", err)
	}
	b = make([]byte, 32)
	_, _ = rand.Read(b)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("write link secret: %w", err)
	}
	return b, nil
}

func newLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func serve(ctx context.Context, args []string) error {
	cfg, err := parseConfig("serve", args)
	if err != nil {
		return err
	}
	log := newLogger(cfg.LogLevel)
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return fmt.Errorf("DARKROOM_ADDR %q: %w", cfg.Addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("refusing to listen on %s without authentication: bind a loopback address (127.0.0.1) or configure API keys", cfg.Addr)
	}
	ln, err := listen(cfg)
	if err != nil {
		return err
	}
	a, err := newApp(ctx, cfg, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer a.close()
	srv := &http.Server{
		Handler:           a.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: SSE streams and bounded waits run for minutes.
	}
	runDone := make(chan error, 1)
	go func() { runDone <- a.runner.Run(ctx) }()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("darkroom serving", "version", buildVersion(), "addr", "http://"+ln.Addr().String()+"/mcp",
		"data", cfg.DataDir, "principal", server.LocalPrincipal, "auth", "none: loopback only, single local principal")
	err = srv.Serve(ln)
	<-runDone
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

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
	a, err := newApp(ctx, cfg, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer a.close()
	mux := http.NewServeMux()
	mux.Handle("/files/", a.files.Handler())
	files := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = files.Serve(ln) }()
	defer files.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- a.runner.Run(ctx) }()
	log.Info("darkroom on stdio", "version", buildVersion(), "files", cfg.PublicURL+"/files/", "data", cfg.DataDir)
	err = a.mcp.Run(ctx, &mcp.StdioTransport{})
	cancel()
	<-runDone
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
