package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/netx"
	"github.com/darkroom-mcp/darkroom/metrics"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/server"
	"github.com/jackc/pgx/v5/pgconn"
)

// ops is what operating darkroom needs beside serving it: metrics,
// readiness and the drain at shutdown.
type ops struct {
	metrics   *metrics.Set
	obs       *server.Observer
	providers []provider.Provider // as configured (not instrumented)
	draining  atomic.Bool
}

// observe registers the scrape-time metrics and builds the request
// observer.
func (a *app) observe(hub *generation.Hub) {
	a.obs = &server.Observer{Metrics: a.metrics, Log: a.log, Tools: a.tools.Names(), ToolClass: a.tools.RateClass}
	a.metrics.Observe(a.db.Stats, metrics.Counters{
		CacheHits:   func() uint64 { h, _ := a.tasks.Store().CacheStats(); return h },
		CacheMisses: func() uint64 { _, m := a.tasks.Store().CacheStats(); return m },
		Waiters:     hub.Waiting,
		Principals:  func() int { return len(a.keys) },
	})
}

// observeHTTP counts the requests to /mcp (and nothing else: files,
// webhooks and probes have their own metrics or none).
func (a *app) observeHTTP(h http.Handler) http.Handler {
	mux := http.NewServeMux() // not a layer of ours on the request's way
	mux.Handle("/mcp", a.obs.HTTP(h))
	mux.Handle("/", h)
	return mux
}

// opsRoutes are the routes on the main listener beside /mcp: webhooks,
// /readyz, and /metrics only behind its own token.
func (a *app) opsRoutes() map[string]http.Handler {
	routes := maps.Clone(a.routes)
	if routes == nil {
		routes = map[string]http.Handler{}
	}
	routes["/readyz"] = a.readiness()
	if a.cfg.MetricsToken != "" {
		routes["/metrics"] = a.metricsGate()
	}
	return routes
}

// readiness is 200 only when the store takes a write, blob storage
// answers, the runner runs and the server is not draining; it also names
// each pingable vendor's state (advisory: a vendor outage leaves it 200).
func (a *app) readiness() http.Handler {
	checks := append([]server.Check{
		{Name: "store", Probe: func(ctx context.Context) error {
			err := a.db.Probe(ctx)
			if errors.Is(err, pgconn.ErrConnClosed) { // PostgreSQL's connection went away
				return &server.NotReady{Category: "unreachable", Err: err}
			}
			return err
		}},
		{Name: "blobs", Probe: func(ctx context.Context) error {
			if p, ok := a.blobs.(blob.Pinger); ok {
				return p.Ping(ctx)
			}
			return nil
		}},
		{Name: "runner", Probe: func(context.Context) error {
			if err := a.runner.Alive(); err != nil {
				c := "not running"
				if a.draining.Load() {
					c = "draining"
				}
				return &server.NotReady{Category: c, Err: err}
			}
			return nil
		}},
		{Name: "server", Probe: func(context.Context) error {
			if a.draining.Load() {
				return &server.NotReady{Category: "draining", Err: errors.New("draining: shutting down")}
			}
			return nil
		}},
	}, append(a.vendorChecks(), server.Check{Name: "models", Advisory: true, Probe: a.watch.probe})...)
	return server.Readiness(a.log, 3*time.Second, checks...)
}

// metricsHandler serves the metrics listener.
func (a *app) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", a.metricsGate())
	return mux
}

// metricsGate is /metrics on either listener: the Host check, and with a
// metrics token its failures drawn from /mcp's guess budget.
func (a *app) metricsGate() http.Handler {
	return server.MetricsOnly(a.cfg.MetricsToken, a.limits, a.cfg.TrustedProxies, a.metrics.Handler())
}

// listenMetrics binds the metrics listener (nil when off). Off loopback
// it needs a token: metrics are not for the world.
func listenMetrics(cfg *config, log *slog.Logger) (net.Listener, error) {
	if cfg.MetricsAddr == "" {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("DARKROOM_METRICS_ADDR %q: %w", cfg.MetricsAddr, err)
	}
	if !netx.Loopback(host) && cfg.MetricsToken == "" {
		return nil, fmt.Errorf("refusing to serve metrics on %q without a token: set DARKROOM_METRICS_TOKEN, or listen on loopback", cfg.MetricsAddr)
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil && cfg.MetricsAddr == defaultMetricsAddr {
		// The default port is taken (another darkroom on this host): serve
		// without metrics rather than not at all. An address given on
		// purpose must work.
		log.Warn("metrics are off: the default metrics address is in use; set DARKROOM_METRICS_ADDR", "addr", cfg.MetricsAddr, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metrics listener (DARKROOM_METRICS_ADDR; off to disable): %w", err)
	}
	return ln, nil
}

// banner is the start-up line of serve (mcpURL its /mcp) or, with mcpURL
// "stdio", of stdio: what runs, where, and with which limits, naming only
// what that mode serves (stdio: MCP on stdin/stdout as the local
// principal, whatever keys are set, and /files/; no probes, no /metrics
// on the files port). It names no secret.
func (a *app) banner(mcpURL string, metricsLn net.Listener) []any {
	cfg := a.cfg
	stdio := mcpURL == "stdio"
	auth, keyHow := "none: loopback only, every request is the single local principal `local`",
		"to require keys, set DARKROOM_API_KEYS=name=$(openssl rand -hex 24)"
	switch {
	case stdio:
		auth, keyHow = "none: stdio is the single local principal `local`", ""
	case cfg.Auth.Configured():
		auth = fmt.Sprintf("bearer tokens: %d API key(s), OAuth %v", len(cfg.Auth.Keys), cfg.Auth.OAuth.Enabled())
		keyHow = "a key is a name=secret entry in DARKROOM_API_KEYS or DARKROOM_API_KEYS_FILE (make a secret with openssl rand -hex 24)"
		if cfg.Auth.OAuth.Enabled() {
			keyHow += "; OAuth access tokens come from " + strings.Join(cfg.AuthServers, ", ")
		}
	}
	db, _ := filepath.Abs(filepath.Join(cfg.DataDir, "darkroom.db"))
	store := "sqlite " + db
	if cfg.DatabaseURL != "" {
		store = "postgres " + redactURL(cfg.DatabaseURL)
	}
	blobs := "local folder " + absPath(filepath.Join(cfg.DataDir, "files")) + " (signed links at " + cfg.PublicURL + "/files/)"
	if cfg.S3.Bucket != "" {
		ep := cfg.S3.Endpoint
		if ep == "" {
			ep = "AWS"
		}
		blobs = fmt.Sprintf("S3 bucket %q at %s, prefix %q", cfg.S3.Bucket, ep, cfg.S3.Prefix)
	}
	var provs []string
	for _, p := range a.providers {
		provs = append(provs, fmt.Sprintf("%s (%d models)", p.Name(), len(p.Models())))
	}
	where := "off"
	if metricsLn != nil {
		where = "http://" + metricsLn.Addr().String() + "/metrics"
	}
	if cfg.MetricsToken != "" && !stdio {
		where += "; " + cfg.PublicURL + "/metrics with the metrics token"
	}
	credits := func(p *int64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprint(*p)
	}
	out := []any{"version", buildVersion(), "addr", mcpURL, "publicURL", cfg.PublicURL, "auth", auth}
	if keyHow != "" {
		out = append(out, "keys", keyHow)
	}
	out = append(out, "store", store, "blobs", blobs, "providers", strings.Join(provs, ", "),
		slog.Group("limits", "pollRate", cfg.PollRate, "pollBurst", cfg.PollBurst, "createRate", cfg.CreateRate,
			"createBurst", cfg.CreateBurst, "dailyBudget", credits(cfg.DailyBudget), "approvalAboveCredits", credits(cfg.ApprovalAbove),
			"maxInFlight", cfg.MaxInFlight, "maxBodyBytes", cfg.MaxBodyBytes, "maxInputBytes", cfg.MaxInputBytes),
		"metrics", where)
	if stdio {
		return append(out, "files", cfg.PublicURL+"/files/", "shutdownGrace", cfg.ShutdownGrace.String())
	}
	return append(out, "probes", "liveness /healthz, readiness /readyz", "shutdownGrace", cfg.ShutdownGrace.String())
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// drain is the graceful stop of serve, begun by SIGTERM or SIGINT: stop
// accepting (readiness fails first), end listen streams and bounded
// waits, let requests in flight finish within the grace period, then
// stop the runner (bgDone: its steps finish or are handed back with their
// leases released). The store is flushed when the app closes. Everything
// is bounded by the grace period, with a tenth kept for the close.
func (a *app) drain(srv *http.Server, served <-chan error, bgDone <-chan struct{}) {
	start := time.Now()
	grace := a.cfg.ShutdownGrace
	a.log.Info("shutting down", "grace", grace.String(), "requestsInFlight", a.obs.InFlight())
	a.draining.Store(true)
	a.tasks.Drain()
	a.svc.Hub().Drain()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(grace*9/10))
	defer cancel()
	cut := int64(0)
	if err := srv.Shutdown(ctx); err != nil {
		cut = a.obs.InFlight()
		_ = srv.Close()
	}
	<-served
	<-bgDone
	left := []any{"seconds", time.Since(start).Round(time.Millisecond).Seconds(), "requestsCut", cut}
	sctx, scancel := context.WithTimeout(context.Background(), time.Second)
	defer scancel()
	if g, err := a.db.Stats(sctx, time.Now()); err == nil {
		left = append(left, "reserved", g.Active["reserved"], "queued", g.Active["queued"], "running", g.Active["running"], "leased", g.Leased)
	}
	a.log.Info("stopped; live generations resume at the next start", left...)
}

// redactURL is a database URL without its password, for the log.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
