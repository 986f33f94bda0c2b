// Package server builds darkroom's MCP server on go-sdk and its HTTP
// handler chain: Origin check, body cap, authentication, per-caller limits,
// then the Streamable HTTP endpoint at /mcp, signed file links at /files/
// and provider webhooks.
package server

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/darkroom-mcp/darkroom/compat"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name is the serverInfo name.
const Name = "darkroom"

// LocalPrincipal owns everything on stdio and on unauthenticated loopback.
const LocalPrincipal = "local"

// Config wires the server.
type Config struct {
	Version string
	Tools   *compat.Tools
	// Files serves signed links to the local blob store (nil with S3).
	Files http.Handler
	// AllowedOrigins lists extra browser origins allowed to call /mcp
	// (scheme://host[:port]); loopback origins are always allowed.
	AllowedOrigins []string
	// MaxBodyBytes caps a request body (default 16 MiB).
	MaxBodyBytes int64
	Logger       *slog.Logger
	// Extra routes (webhooks, metadata) mounted beside /mcp.
	Routes map[string]http.Handler
	// Wrap, when set, wraps the /mcp handler (auth, limits, task routing).
	Wrap func(http.Handler) http.Handler
	// Configure runs on the new mcp.Server before it is used (the tasks
	// layer adds its methods, capabilities and middleware here).
	Configure func(*mcp.Server)
	// Capabilities are advertised in server/discover.
	Capabilities *mcp.ServerCapabilities
}

// New builds the MCP server with the compatibility tools registered.
func New(cfg Config) *mcp.Server {
	caps := cfg.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Title: "darkroom media generation", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "darkroom generates images and videos. Call list_models, then generate. Generation takes seconds to minutes: " +
			"poll with wait_generation (or tasks/get when you use the Tasks extension); never call generate twice for one request.",
		Logger:       cfg.Logger,
		Capabilities: caps,
	})
	cfg.Tools.Register(s)
	if cfg.Configure != nil {
		cfg.Configure(s)
	}
	return s
}

// Handler returns the HTTP handler for all of darkroom's routes.
func Handler(cfg Config, s *mcp.Server) http.Handler {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 16 << 20
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        false,
		Logger:              cfg.Logger,
		MaxRequestBodyBytes: cfg.MaxBodyBytes,
	})
	if cfg.Wrap != nil {
		h = cfg.Wrap(h)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", checkOrigin(cfg.AllowedOrigins, h))
	if cfg.Files != nil {
		mux.Handle("/files/", cfg.Files)
	}
	for p, rh := range cfg.Routes {
		mux.Handle(p, rh)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// checkOrigin answers 403 when a browser Origin is present and not allowed
// (DNS-rebinding and cross-site protection; MCP requires it).
func checkOrigin(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !originAllowed(o, allowed) {
			http.Error(w, "Forbidden: origin "+o+" is not allowed (set DARKROOM_ALLOWED_ORIGINS)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func originAllowed(origin string, allowed []string) bool {
	if slices.Contains(allowed, strings.TrimSuffix(origin, "/")) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Owner is compat's Owner func for the local single-principal setup and
// for stdio.
func Owner(principal func(ctx context.Context) (string, bool)) func(ctx context.Context, req *mcp.CallToolRequest) string {
	return func(ctx context.Context, _ *mcp.CallToolRequest) string {
		if principal != nil {
			if p, ok := principal(ctx); ok {
				return p
			}
		}
		return LocalPrincipal
	}
}
