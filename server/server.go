// Package server builds darkroom's MCP server on go-sdk and its HTTP
// handler chain: Origin check, body cap, authentication, per-caller limits,
// then the Streamable HTTP endpoint at /mcp, signed file links at /files/
// and provider webhooks.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/internal/methods"
	"github.com/darkroom-mcp/darkroom/internal/netx"
	"github.com/darkroom-mcp/darkroom/internal/sse"
	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/edge"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name is the serverInfo name.
const Name = "darkroom"

// LocalPrincipal owns everything on stdio and on unauthenticated loopback.
const LocalPrincipal = "local"

// Config wires the server.
type Config struct {
	Version string
	Tools   *gentools.Tools
	// Files serves signed links to the local blob store (nil with S3).
	Files http.Handler
	// AllowedOrigins lists extra browser origins allowed to call /mcp
	// (scheme://host[:port]); loopback origins are always allowed.
	AllowedOrigins []string
	// TrustedProxies are the peers whose X-Forwarded-For / Forwarded
	// name the client address (the guess guard's key); empty: none.
	TrustedProxies limit.TrustedProxies
	// MaxBodyBytes caps a request body (default 16 MiB).
	MaxBodyBytes int64
	Logger       *slog.Logger
	// Extra routes (webhooks, metadata) mounted beside /mcp.
	Routes map[string]http.Handler
	// Auth authenticates HTTP callers (nil: the single local principal).
	Auth *auth.Authenticator
	// ResourceURL is darkroom's own resource URL (OAuth audience, PRM).
	ResourceURL string
	// AuthServers are named in the Protected Resource Metadata.
	AuthServers []string
	// Limits are the per-caller rate limits (nil: none).
	Limits *limit.Classes
	// Edge routes /mcp's POSTs (to its Tasks dispatcher, its own lean
	// engine or go-sdk) and serves the tool table's lean forms.
	Edge *edge.Engine
	// Configure runs on the new mcp.Server before it is used (the tasks
	// layer adds its methods, capabilities and middleware here).
	Configure func(*mcp.Server)
	// Capabilities are advertised in server/discover.
	Capabilities *mcp.ServerCapabilities
	// StreamKeepAlive spaces the SSE comments on go-sdk's held answers
	// (wait_generation, generate with wait:true; sse.Hold); 0: none.
	StreamKeepAlive time.Duration
}

// Implementation is darkroom's serverInfo, the one value every answer that
// carries one gives (go-sdk's initialize, and the Tasks methods' _meta).
func Implementation(version string) *mcp.Implementation {
	return &mcp.Implementation{Name: Name, Title: "darkroom media generation", Version: version}
}

// New builds the MCP server with the compatibility tools registered.
func New(cfg Config) *mcp.Server {
	caps := cfg.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	impl := Implementation(cfg.Version)
	s := mcp.NewServer(impl, &mcp.ServerOptions{
		Instructions: "darkroom generates images and videos. Call list_models, then generate. Generation takes seconds to minutes: " +
			"poll with wait_generation (or tasks/get when you use the Tasks extension); never call generate twice for one request.",
		Logger:       cfg.Logger,
		Capabilities: caps,
		SetCacheable: privateCache,
	})
	s.AddReceivingMiddleware(countRuns) // added first: innermost
	cfg.Tools.Register(s, cfg.Edge.Tasks())
	if cfg.Edge != nil {
		// The lean forms of the tool table, below go-sdk where its answer
		// can be matched (serverInfo is this server's, as go-sdk adds it).
		for _, row := range cfg.Tools.Table() {
			if row.Task != nil || row.Read != nil {
				cfg.Edge.ServeTool(row.Def.Name, edge.Tool{Task: row.Task, Read: row.Read, Bytes: row.Bytes, Lean: row.Lean})
			}
		}
		cfg.Edge.ServeResource(cfg.Tools.ReadResource, gentools.LeanResource)
	}
	if cfg.Configure != nil {
		cfg.Configure(s)
	}
	s.AddReceivingMiddleware(declaredOnly(caps))
	s.AddReceivingMiddleware(holdCall)
	s.AddReceivingMiddleware(guard(cfg.Logger))
	s.AddReceivingMiddleware(recordOutcome) // added last: outermost
	return s
}

// countRuns counts each run of a method's handler on go-sdk's path
// (edgecount.Handlers): innermost, so a request refused before it (an
// undeclared capability) ran none.
func countRuns(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		edgecount.Handler()
		return next(ctx, method, req)
	}
}

// recordOutcome tells the request's recorder (envelope.OutcomeFrom: the
// Observer's, on HTTP) that a handler ran and what go-sdk will answer,
// from the handler chain's own result and error: the code go-sdk puts
// on the wire (an error's *jsonrpc.Error code, else none), a tool
// result's isError. So the Observer never reads go-sdk's reply.
func recordOutcome(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		o, ok := envelope.OutcomeFrom(ctx)
		if !ok || strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		if rec, ok := o.(*respRecorder); ok {
			rec.handlerRan()
		}
		res, err := next(ctx, method, req)
		var wire *jsonrpc.Error
		switch {
		case errors.As(err, &wire):
			o.RPCOutcome(wire.Code, false)
		case err != nil:
			o.RPCOutcome(0, false) // go-sdk sends it without a code
		default:
			tr, _ := res.(*mcp.CallToolResult)
			o.RPCOutcome(0, tr != nil && tr.IsError)
		}
		return res, err
	}
}

// privateCache marks the cacheable results that depend on the caller
// private (go-sdk's default is public): tools/list varies with what the
// client declared (the viewer's tool), resources/list and resources/read
// are the caller's own outputs.
func privateCache(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	switch req.(type) {
	case *mcp.ListToolsRequest, *mcp.ListResourcesRequest, *mcp.ReadResourceRequest:
		c.CacheScope = "private"
	}
}

// guard answers a request whose handler (a tool's, most likely) panicked
// with tasks.Recovered's internal error: go-sdk recovers none, on any
// transport, and the process would end. An error of our handlers (the
// tools' and resources/read's, which reach the store) that carries no
// JSON-RPC error of its own, a store's naming the database's address
// say, is answered with tasks.Internal's instead of its text, which
// go-sdk would send as it is. (go-sdk's own errors on other methods,
// an unreadable cursor say, are for the caller and stay.)
func guard(log *slog.Logger) mcp.Middleware {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				if v := recover(); v != nil {
					e := tasks.Recovered(log, method, toolName(req), v)
					res, err = nil, &jsonrpc.Error{Code: e.Code, Message: e.Message}
				}
			}()
			res, err = next(ctx, method, req)
			var wire *jsonrpc.Error
			if err != nil && (method == "tools/call" || method == "resources/read") && !errors.As(err, &wire) {
				e := tasks.Internal(ctx, log, method, toolName(req), err)
				return nil, &jsonrpc.Error{Code: e.Code, Message: e.Message}
			}
			return res, err
		}
	}
}

// toolName is the tool a tools/call names ("" for another request).
func toolName(req mcp.Request) string {
	if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
		return p.Name
	}
	return ""
}

// holdCall gives a call that has no output-bytes hold yet (stdio, or any
// transport but HTTP's, where holdOutputBytes put one) a hold of its own,
// released when the handler chain returns.
func holdCall(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if outbytes.HasHold(ctx) {
			return next(ctx, method, req)
		}
		ctx, release := outbytes.WithHold(ctx)
		defer release()
		return next(ctx, method, req)
	}
}

// declaredOnly answers -32601 (HTTP 404 on 2026-07-28) to every method of a
// capability the server does not declare in caps, on every protocol
// version and transport: go-sdk would otherwise answer prompts/list and
// resources/list with empty lists. Serving them needs the capability set
// in Config.Capabilities.
func declaredOnly(caps *mcp.ServerCapabilities) mcp.Middleware {
	declared := map[string]bool{"prompts": caps.Prompts != nil, "resources": caps.Resources != nil, "completion": caps.Completions != nil}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if c := methods.CapabilityOf(method); c != "" && !declared[c] {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
					Message: fmt.Sprintf("Method not found: %s (this server declares no %s capability)", method, c)}
			}
			return next(ctx, method, req)
		}
	}
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
		// The Host was checked once, at the door (checkOrigin), with
		// go-sdk's own rule (edge.HostAllowed).
		DisableLocalhostProtection: true,
	})
	h = sse.KeepAlive(cfg.StreamKeepAlive, h)
	if cfg.Edge != nil { // nil: go-sdk alone (the lean paths' oracle in tests)
		h = cfg.Edge.Middleware(OwnerOf, cfg.MaxBodyBytes)(h)
	}
	h = admit(cfg.Limits, cfg.MaxBodyBytes, cfg.Tools.RateClass, h)
	mux := http.NewServeMux()
	if cfg.Auth != nil && !cfg.Auth.LocalMode() {
		// The challenge names the metadata only where it is served (with
		// authorization servers to name); fail closed: authentication
		// applies even if the metadata URL cannot be derived.
		var prm string
		if paths, err := auth.PRMPaths(cfg.ResourceURL); err == nil && len(cfg.AuthServers) > 0 {
			prm, _ = auth.MetadataURL(cfg.ResourceURL)
			ph := auth.PRMHandler(cfg.ResourceURL, cfg.AuthServers, cfg.Auth.RequiredScopes())
			for _, p := range paths {
				mux.Handle(p, ph)
			}
		}
		if prm == "" && !cfg.Auth.OAuthEnabled() {
			mux.HandleFunc("POST /register", auth.NoRegistration)
		}
		opts := auth.MiddlewareOptions{ResourceMetadataURL: prm, Scopes: cfg.Auth.RequiredScopes(), Logger: cfg.Logger}
		if cfg.Limits != nil {
			opts.Throttle = guessThrottle(cfg.Limits.PreAuth, cfg.TrustedProxies)
		}
		open := h
		h = auth.Middleware(cfg.Auth, opts)(h)
		if prm == "" && !cfg.Auth.OAuthEnabled() {
			h = publicHandshake(open, h)
		}
	}
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

// handshakeMaxBytes bounds the body of an unauthenticated handshake
// (publicHandshake): an initialize is a few hundred bytes.
const handshakeMaxBytes = 16 << 10

// handshakeReadTimeout bounds the read of that body: a stranger's few
// hundred bytes get the time its headers had, not a body's minute.
var handshakeReadTimeout = DefaultReadHeaderTimeout

// publicHandshake serves, without a credential, the legacy handshake
// (initialize, notifications/initialized) of a request that names it in
// its Mcp-Method header, on a server that takes API keys only; anything
// else goes to authed. mcp-remote (the stdio bridge of most desktop
// hosts) sends that header, and when its own handshake fails it exits
// before reading its host's first message: the host shows only
// "Connection closed". Let through, it fails its host's first real
// request instead, answering it with the error of the sign-in it then
// tries, which carries POST /register's answer (auth.NoRegistration):
// the host shows that the server takes an API key, and how to pass it.
// The handshake reveals nothing a key protects (the server's name,
// version and capabilities); its body is read before authentication only
// for such a request, and only when declared and small. It draws from
// the local principal's buckets, which no caller has on such a server.
func publicHandshake(open, authed http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := r.Header.Get("Mcp-Method")
		if r.Method != http.MethodPost || r.Header.Get("Authorization") != "" ||
			(method != "initialize" && method != "notifications/initialized") ||
			r.ContentLength < 0 || r.ContentLength > handshakeMaxBytes {
			authed.ServeHTTP(w, r)
			return
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(handshakeReadTimeout))
		e, r, ok := edge.Admit(w, r, handshakeMaxBytes) // the door, before authentication: admit reads what it left
		if !ok {
			return // answered: not a JSON-RPC message
		}
		if e.IsBatch || e.Method != method {
			authed.ServeHTTP(w, r) // the header named the handshake, the body does not
			return
		}
		open.ServeHTTP(w, r)
	})
}

// checkOrigin answers 403 when a browser Origin is present and not allowed
// (DNS-rebinding and cross-site protection; MCP requires it), and when the
// Host is not loopback on a loopback listener (go-sdk's DNS-rebinding
// guard, here for every path below it too, before authentication).
func checkOrigin(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refusedHost(w, r) {
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !originAllowed(o, allowed) {
			http.Error(w, "Forbidden: origin "+o+" is not allowed (set DARKROOM_ALLOWED_ORIGINS)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refusedHost answers 403 when the Host is not loopback on a loopback
// listener (edge.HostAllowed: DNS rebinding), and says so.
func refusedHost(w http.ResponseWriter, r *http.Request) bool {
	if edge.HostAllowed(r) {
		return false
	}
	http.Error(w, "Forbidden: invalid Host header "+strconv.Quote(r.Host), http.StatusForbidden)
	return true
}

func originAllowed(origin string, allowed []string) bool {
	if slices.Contains(allowed, strings.TrimSuffix(origin, "/")) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return netx.Loopback(u.Hostname())
}

// Owner names the caller of a request: the authenticated principal, or
// the local principal on stdio and unauthenticated loopback.
func Owner(ctx context.Context) string {
	if p, ok := auth.FromContext(ctx); ok {
		return p.ID
	}
	return LocalPrincipal
}

// OwnerOf is Owner for an HTTP request.
func OwnerOf(r *http.Request) string { return Owner(r.Context()) }

// ToolOwner is gentools's Owner func.
func ToolOwner(ctx context.Context, _ *mcp.CallToolRequest) string { return Owner(ctx) }
