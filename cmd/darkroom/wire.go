package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentask"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/metrics"
	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/edge"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/storage/postgres"
	"github.com/darkroom-mcp/darkroom/storage/sqlite"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/darkroom-mcp/darkroom/ui"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// app is darkroom wired together.
type app struct {
	cfg    *config
	log    *slog.Logger
	db     engine
	svc    *generation.Service
	runner *generation.Runner
	tools  *gentools.Tools
	models *modelschema.Catalog // models beyond the curated catalog (models.go)
	blobs  blob.Store
	files  http.Handler // signed links to the local store; nil with S3
	mcp    *mcp.Server
	local  *local.Provider
	// unavailable: curated models whose provider has no key here, with
	// the key (models.go)
	unavailable map[string]string
	// replicaSplit divides per-caller rates among live replicas (nil on
	// SQLite: one process).
	replicaSplit *limit.Split
	tasks        *tasks.Dispatcher
	edge         *edge.Engine // /mcp's dispatch and lean engine, in front of tasks
	gen          *gentask.GenTasks
	auth         *auth.Authenticator
	limits       *limit.Classes
	secret       []byte
	keys         map[string]auth.Overrides // per-caller overrides by principal id
	routes       map[string]http.Handler   // provider webhooks
	bytes        *outbytes.Budget          // output bytes in flight
	watch        modelWatch                // what each vendor lists (modelwatch.go)
	ops                                    // ops.go: metrics, readiness, drain
}

// build constructs darkroom from cfg, in order: data directory, database,
// link secret, output store, providers, authentication, limits, tasks,
// the generation service and runner, the tools and the MCP server. On
// error everything opened so far is released.
func build(ctx context.Context, cfg *config, log *slog.Logger) (_ *app, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	d, err := openEngine(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	a := &app{cfg: cfg, log: log, db: d}
	a.metrics = metrics.New()
	d.OnCommit(a.metrics.Commit)
	defer func() {
		if err != nil {
			a.auth.Close() // nil-safe
			_ = d.Close()
		}
	}()
	secret, err := loadSecret(filepath.Join(cfg.DataDir, "link-secret"))
	if err != nil {
		return nil, err
	}
	if a.blobs, a.files, err = openBlobs(ctx, cfg, secret); err != nil {
		return nil, err
	}
	if a.local, err = local.New(local.Options{Dir: cmp.Or(a.cfg.LocalDir, a.cfg.DataDir), Scale: a.cfg.LocalLatency}); err != nil {
		return nil, fmt.Errorf("local provider: %w", err)
	}
	providers, err := remoteProviders(ctx, cfg, log, blobSpool{a.blobs})
	if err != nil {
		return nil, err
	}
	a.secret = secret
	if a.auth, err = auth.New(a.cfg.Auth); err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	a.keys = map[string]auth.Overrides{}
	for _, k := range a.cfg.Auth.Keys {
		a.keys[k.Principal().ID] = k.Principal().Limits
	}
	a.setLimits()
	a.bytes = outbytes.New(a.cfg.OutputBytes)
	store := tasks.NewStore(a.db.Tasks(), a.cfg.tasksNow, a.storeOptions()...)
	a.tasks = tasks.NewDispatcher(tasks.Options{Store: store, ServerInfo: server.Implementation(buildVersion()), PollInterval: server.PollInterval(a.limits),
		OpenListen: server.ListenSlots(a.limits), Logger: a.log, KeepAlive: a.cfg.StreamKeepAlive})
	a.edge = edge.New(a.tasks, edge.Options{Logger: a.log, Bytes: a.bytes})
	mirror := gentask.NewMirror(a.tasks)
	hub := generation.NewHub()
	hub.Subscribe(mirror.Notify)
	a.providers = append([]provider.Provider{a.local}, providers...)
	entries, err := curatedEntries(cfg)
	if err != nil {
		return nil, err
	}
	a.buildModels(entries)
	a.unavailable = unavailableModels(entries, a.providers)
	if err := a.buildService(hub, mirror); err != nil {
		return nil, err
	}
	a.gen = &gentask.GenTasks{Mirror: mirror, Svc: a.svc, TTL: a.cfg.TaskTTL, Approval: gentask.ApprovalToken{Secret: secret}, ApprovalAbove: a.approvalAbove}
	a.buildRunner(providers)
	a.buildTools()
	a.observe(hub)
	return a, nil
}

// setLimits builds the per-caller rate limits from the settings.
func (a *app) setLimits() {
	a.limits = limit.NewClasses(limit.Options{})
	a.limits.Poll.Rate, a.limits.Poll.Burst = a.cfg.PollRate, a.cfg.PollBurst
	a.limits.Create.Rate, a.limits.Create.Burst = a.cfg.CreateRate, a.cfg.CreateBurst
	// Bytes and listen streams guard each replica's own CPU: not split.
	a.limits.Bytes.Rate, a.limits.Bytes.Burst = float64(a.cfg.ByteRate), int(a.cfg.ByteBurst)
	a.limits.Listens.SetMax(a.cfg.MaxListens)
	// The create rate is decided in the creating transaction (exact across
	// replicas); the admission's create bucket is only a per-replica flood
	// guard in front of it (README: Limits).
	a.limits.Create.Scale = createFloodScale
	if _, ok := a.fleet(); ok {
		// Replicas share each caller's poll rate (README: More than one machine).
		a.replicaSplit = &limit.Split{}
		a.limits.Poll.Split = a.replicaSplit
	}
}

// buildService builds the generation service over the providers, each
// instrumented, with the task mirror as its observer.
func (a *app) buildService(hub *generation.Hub, mirror *gentask.Mirror) (err error) {
	instrumented := make([]provider.Provider, len(a.providers))
	for i, p := range a.providers {
		instrumented[i] = a.metrics.Provider(p)
	}
	a.svc, err = generation.NewService(generation.Config{
		Store:          a.db.Generations(),
		Blobs:          a.metrics.Blobs(a.blobs),
		Retention:      a.cfg.Retention,
		History:        a.cfg.History,
		ReservationTTL: a.cfg.ReservationTTL,
		Providers:      instrumented,
		Logger:         a.log,
		Metrics:        a.metrics,
		Hub:            hub,
		MaxInputBytes:  a.cfg.MaxInputBytes,
		LinkTTL:        a.cfg.LinkTTL,
		Observer:       mirror,
		Budget:         a.budget,
		CreateRate:     a.createRate,
		Exclusive:      a.exclusive(),
		InlinePreview:  a.cfg.InlinePreview,
		Models:         a.models,
		Unavailable:    a.unavailable,
	})
	return err
}

// buildRunner builds the runner, and the webhook route of each remote
// provider that sends webhooks.
func (a *app) buildRunner(providers []provider.Provider) {
	rc := generation.RunnerConfig{Logger: a.log, MaxInFlight: a.maxInFlight, StorageGiveUp: a.cfg.StorageGiveUp, Lease: a.cfg.RunnerLease, Drain: a.cfg.Drain, PollOnly: a.cfg.pollOnly, Held: a.cfg.runnerHeld,
		MaxLifetime: map[provider.Kind]time.Duration{provider.KindImage: a.cfg.MaxLifetimeImage, provider.KindVideo: a.cfg.MaxLifetimeVideo}}
	if a.cfg.Webhooks {
		rc.WebhookBase = a.cfg.PublicURL
	}
	a.runner = generation.NewRunner(a.svc, rc)
	a.routes = map[string]http.Handler{}
	for _, p := range providers {
		if wp, ok := p.(provider.WebhookParser); ok {
			a.routes["/webhooks/"+p.Name()] = server.WebhookHandler(p.Name(), a.intake(p.Name(), wp), a.log)
		}
	}
}

// buildTools builds the tool table (the generation tools and the
// viewer's) and the MCP server that serves it.
func (a *app) buildTools() {
	a.tools = gentools.New(gentools.Config{
		Service:       a.svc,
		Owner:         server.ToolOwner,
		MaxInputBytes: a.cfg.MaxInputBytes,
		Budget:        a.budget,
		ApprovalAbove: a.approvalAbove,
		MaxReadBytes:  a.cfg.MaxResourceBytes,
		Bytes:         a.bytes,
		MaxWait:       a.cfg.MaxWait,
		Models:        a.models,
	})
	a.tools.Add(ui.Tool(a.viewerConfig()))
	a.gen.Register(a.tools)
	a.mcp = server.New(a.serverConfig())
}

// engine is the database behind both store contracts, with what
// operations read of it.
type engine interface {
	Generations() generation.Store
	Tasks() tasks.Backend
	Close() error
	Stats(ctx context.Context, now time.Time) (metrics.Gauges, error)
	Leased(ctx context.Context) (int64, error)
	Probe(ctx context.Context) error
	OnCommit(fn func(batch int, took time.Duration, err error))
}

// openEngine opens PostgreSQL when a database URL is set, else SQLite in
// the data directory.
func openEngine(ctx context.Context, cfg *config) (engine, error) {
	if cfg.DatabaseURL != "" {
		return postgres.Open(ctx, cfg.DatabaseURL)
	}
	return sqlite.Open(ctx, filepath.Join(cfg.DataDir, "darkroom.db"))
}

// fleet is the engine when several replicas may share it (PostgreSQL).
func (a *app) fleet() (*postgres.DB, bool) {
	pg, ok := a.db.(*postgres.DB)
	return pg, ok
}

// storeOptions: on a shared engine the task cache serves a live task only
// while the listener's fence is fresh (tasks.Shared) and the sweep runs on
// one replica at a time; on SQLite nothing changes.
func (a *app) storeOptions() []tasks.StoreOption {
	pg, ok := a.fleet()
	if !ok {
		return nil
	}
	return []tasks.StoreOption{tasks.Shared(pg.Fence().Fresh), tasks.Exclusive(pg.Exclusive)}
}

// exclusive is how fleet-wide jobs run once across replicas (nil: this
// process is alone on its engine).
func (a *app) exclusive() func(ctx context.Context, job string, fn func(context.Context) error) error {
	if pg, ok := a.fleet(); ok {
		return pg.Exclusive
	}
	return nil
}

// intake hands a provider's deliveries to the runner, telling server
// which refusals are whose.
func (a *app) intake(name string, wp provider.WebhookParser) server.Intake {
	return func(ctx context.Context, h http.Header, q url.Values, body []byte) error {
		err := a.runner.Deliver(ctx, name, wp, h, q, body)
		switch {
		case errors.Is(err, provider.ErrWebhookUnauthenticated):
			a.metrics.Webhook(name, "refused")
			return fmt.Errorf("%w: %v", server.ErrUnverified, err)
		case errors.Is(err, generation.ErrMalformedWebhook):
			a.metrics.Webhook(name, "refused")
			return fmt.Errorf("%w: %v", server.ErrMalformed, err)
		case err != nil:
			a.metrics.Webhook(name, "error")
		}
		return err
	}
}

// blobSpool is the blob store as a provider.Spool: a replica that takes
// a generation over reads what another one spooled.
type blobSpool struct{ s blob.Store }

func (b blobSpool) Put(ctx context.Context, key string, r io.Reader, contentType string) error {
	_, err := b.s.Put(ctx, key, r, contentType, 0)
	return err
}

func (b blobSpool) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, _, err := b.s.Open(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", provider.ErrNotFound, err)
	}
	return rc, err
}

func (b blobSpool) Delete(ctx context.Context, key string) error { return b.s.Delete(ctx, key) }

// openBlobs picks the output store: S3 when a bucket is configured (the
// bucket must exist and be writable, or darkroom refuses to start), else
// a folder under the data directory served by /files links.
func openBlobs(ctx context.Context, cfg *config, secret []byte) (blob.Store, http.Handler, error) {
	if cfg.S3.Bucket == "" {
		l, err := blob.NewLocal(filepath.Join(cfg.DataDir, "files"), secret, cfg.PublicURL)
		if err != nil {
			return nil, nil, fmt.Errorf("local file store: %w", err)
		}
		_, _ = l.Sweep(ctx, time.Hour) // temp files a crash left behind
		return l, l.Handler(), nil
	}
	s3, err := blob.NewS3(ctx, cfg.S3)
	if err != nil {
		return nil, nil, fmt.Errorf("S3 storage: %w", err)
	}
	if cfg.CreateBucket {
		if err := s3.CreateBucket(ctx); err != nil {
			return nil, nil, fmt.Errorf("create S3 bucket %q: %w", cfg.S3.Bucket, err)
		}
	}
	if err := s3.CheckBucket(ctx); err != nil {
		return nil, nil, fmt.Errorf("S3 bucket %q is not usable (%w); create it, fix DARKROOM_S3_* and the AWS credentials, or start with --create-bucket", cfg.S3.Bucket, err)
	}
	_, _ = s3.Sweep(ctx, time.Hour) // staging objects and unfinished uploads
	return s3, nil, nil
}

// overrides returns the caller's per-key limits.
func (a *app) overrides(ctx context.Context) auth.Overrides {
	p, _ := auth.FromContext(ctx)
	return p.Limits
}

func (a *app) approvalAbove(ctx context.Context) *int64 {
	if o := a.overrides(ctx); o.ApprovalAboveCredits != nil {
		return o.ApprovalAboveCredits
	}
	return a.cfg.ApprovalAbove
}

func (a *app) budget(ctx context.Context, _ string) *int64 {
	if o := a.overrides(ctx); o.BudgetPerDay != nil {
		return o.BudgetPerDay
	}
	return a.cfg.DailyBudget
}

// createFloodScale is how much looser than the caller's create rate and
// burst the admission's per-replica create bucket is: it only sheds a
// flood before it costs transactions; the creating transaction decides.
const createFloodScale = 4

// createRate is the caller's create rate, taken in the creating
// transaction: per-key overrides over the configured defaults.
func (a *app) createRate(ctx context.Context, _ string) *generation.Rate {
	o := a.overrides(ctx)
	r, b := a.limits.Create.Effective(o.CreateRate, o.CreateBurst)
	return &generation.Rate{PerSecond: r, Burst: b}
}

func (a *app) maxInFlight(owner string) int {
	if o, ok := a.keys[owner]; ok && o.MaxInFlight != nil {
		return *o.MaxInFlight
	}
	return a.cfg.MaxInFlight
}

// background runs the runner, the task sweeper, limiter eviction, output
// retention and, on PostgreSQL, the cross-replica listener until ctx ends.
func (a *app) background(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	// Alive from now on, not from when Run's goroutine is scheduled: a
	// readiness probe right after start must not see it missing.
	a.runner.Starting()
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		if n, err := a.db.Leased(ctx); err == nil {
			a.metrics.LeaseTakeovers(n) // the runner takes them over as it starts
		}
		wg.Go(func() { _ = a.runner.Run(ctx) })
		wg.Go(func() {
			a.tasks.Store().RunSweeper(ctx, time.Minute, func(err error) { a.log.Error("task sweeper", "err", err) })
		})
		wg.Go(func() { a.limits.Run(ctx) })
		wg.Go(func() { a.watchModels(ctx) })
		if pg, ok := a.fleet(); ok {
			// Per-caller buckets are split by the live replica count.
			wg.Go(func() { pg.Heartbeat(ctx, 0, a.replicaSplit.Set) })
			// Other replicas' commits wake this one's waiters and listen
			// streams; the resync makes up for a lost notification.
			hub, store := a.svc.Hub(), a.tasks.Store()
			wg.Go(func() {
				// A change on another replica can make work due here (a
				// lease that will expire, a queued generation): the runner
				// recomputes its next wake-up on each, and on the resync.
				pg.Listen(ctx, postgres.Listener{
					Generation: func(id string) { hub.Publish(id); a.runner.Kick() },
					Task:       store.NotifyVersion,
					Connected:  store.FlushLive,
					Resync: func() {
						// The cache first, so that the re-reads it wakes find
						// the rows a lost notification would have dropped.
						if err := store.Revalidate(ctx); err != nil && ctx.Err() == nil {
							a.log.Warn("task cache resync", "err", err)
						}
						hub.WakeAll()
						store.NotifyAll()
						a.runner.Kick()
					},
					ResyncEvery: a.cfg.listenResync,
					Chaos:       listenChaos(a.log),
				})
			})
		}
		wg.Go(func() {
			// Often enough that a reservation ends within a third of its TTL
			// after it expires.
			every := 10 * time.Minute
			if t := a.cfg.ReservationTTL / 3; t > 0 {
				every = min(every, t)
			}
			a.svc.RunRetention(ctx, every, func(err error) { a.log.Error("output retention", "err", err) })
		})
		wg.Wait()
	}()
	return done
}

func (a *app) serverConfig() server.Config {
	return server.Config{
		Version:         buildVersion(),
		Tools:           a.tools,
		Files:           a.files,
		Routes:          a.opsRoutes(),
		AllowedOrigins:  a.cfg.AllowedOrigins,
		TrustedProxies:  a.cfg.TrustedProxies,
		MaxBodyBytes:    a.cfg.MaxBodyBytes,
		Logger:          server.QuietSDK(a.log),
		Auth:            a.auth,
		ResourceURL:     a.cfg.PublicURL + "/mcp",
		AuthServers:     a.cfg.AuthServers,
		Limits:          a.limits,
		Edge:            a.edge,
		Capabilities:    capabilities(),
		StreamKeepAlive: a.cfg.StreamKeepAlive,
		Configure: func(s *mcp.Server) {
			// The viewer first: middleware added later wraps it, so the
			// era's list shaping and the resources errors apply to what
			// it answers (a hidden view reads as any unknown URI).
			a.registerViewer(s)
			s.AddReceivingMiddleware(tasks.SDKMiddleware())
			a.tools.RegisterResources(s)
		},
	}
}

func capabilities() *mcp.ServerCapabilities {
	// The tool list is fixed at start, so no tools/list_changed is ever
	// sent: no listChanged (go-sdk's default would claim it).
	c := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	c.AddExtension(tasks.ExtensionID, nil)
	// Outputs are resources (gentools.RegisterResources); the list never
	// changes and nothing is subscribable.
	c.Resources = &mcp.ResourceCapabilities{}
	ui.Capability(c)
	return c
}

func (a *app) handler() http.Handler { return a.observeHTTP(server.Handler(a.serverConfig(), a.mcp)) }

// close releases the database and the authenticator.
func (a *app) close() error {
	a.auth.Close()
	for _, p := range a.providers {
		if c, ok := p.(interface{ Close() }); ok { // ComfyUI's websockets
			c.Close()
		}
	}
	return a.db.Close()
}

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

// registerViewer adds the MCP Apps generation view (ui package); its tool
// is a row of the tool table (ui.Tool, added with the tools).
func (a *app) registerViewer(s *mcp.Server) { ui.Register(s) }

func (a *app) viewerConfig() ui.Config {
	return ui.Config{
		Service: a.svc, Blobs: a.blobs, Owner: server.ToolOwner,
		PollInterval: server.PollInterval(a.limits), MaxBytes: a.cfg.MaxResourceBytes, Bytes: a.bytes,
	}
}

// listenChaos is the listener's test hook (postgres.Chaos), set only by
// tests through DARKROOM_TEST_LISTEN_CHAOS (not a setting: never set it in
// production).
func listenChaos(log *slog.Logger) *postgres.Chaos {
	v := os.Getenv("DARKROOM_TEST_LISTEN_CHAOS")
	if v == "" {
		return nil
	}
	c, err := postgres.ParseChaos(v)
	if err != nil {
		log.Error("DARKROOM_TEST_LISTEN_CHAOS ignored", "err", err)
		return nil
	}
	log.Warn("listener chaos on (a test hook)", "chaos", v)
	return c
}
