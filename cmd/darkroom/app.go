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
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/compat"
	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentask"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/provider/fetch"
	"github.com/darkroom-mcp/darkroom/provider/local"
	"github.com/darkroom-mcp/darkroom/provider/replicate"
	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/storage/blob"
	"github.com/darkroom-mcp/darkroom/storage/sqlite"
	"github.com/darkroom-mcp/darkroom/tasks"
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
	TaskTTL        time.Duration
	PollRate       float64
	PollBurst      int
	CreateRate     float64
	CreateBurst    int
	ApprovalAbove  *int64 // credits above which a spend needs approval
	DailyBudget    *int64
	MaxInFlight    int
	Auth           auth.Config
	S3             blob.S3Config // Bucket set: outputs go to S3
	CreateBucket   bool
	Retention      time.Duration
	StorageGiveUp  time.Duration
	// Providers beyond the local one; each is on only with its credential.
	ReplicateToken   string
	ReplicateBaseURL string
	ReplicateSecret  string // webhook signing secret; fetched from Replicate when empty
	FalKey           string
	FalQueueURL      string
	FalConcurrency   int
	ModelsFile       string
	OutputHosts      []string // extra hosts outputs may be fetched from
	// UnsafeOutputFetch allows plain-http and private-address output
	// hosts: for tests against a local provider emulator only.
	UnsafeOutputFetch bool
	// Webhooks is set when DARKROOM_PUBLIC_URL is configured: providers
	// then call back instead of being polled.
	Webhooks bool
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
	taskTTL := fs.String("task-ttl", env("DARKROOM_TASK_TTL", "24h"), "lifetime of a task (DARKROOM_TASK_TTL)")
	pollRate := fs.String("poll-rate", env("DARKROOM_POLL_RATE", "5"), "polls per second per caller (DARKROOM_POLL_RATE)")
	pollBurst := fs.String("poll-burst", env("DARKROOM_POLL_BURST", "20"), "poll burst per caller (DARKROOM_POLL_BURST)")
	createRate := fs.String("create-rate", env("DARKROOM_CREATE_RATE", "1"), "generations started per second per caller (DARKROOM_CREATE_RATE)")
	createBurst := fs.String("create-burst", env("DARKROOM_CREATE_BURST", "10"), "creation burst per caller (DARKROOM_CREATE_BURST)")
	approval := fs.String("approval-above-credits", env("DARKROOM_APPROVAL_ABOVE_CREDITS", ""), "ask before spending more credits than this on one generation; empty = never (DARKROOM_APPROVAL_ABOVE_CREDITS)")
	budget := fs.String("daily-budget", env("DARKROOM_DAILY_BUDGET", ""), "credits per caller per UTC day; empty = unlimited (DARKROOM_DAILY_BUDGET)")
	inflight := fs.String("max-in-flight", env("DARKROOM_MAX_IN_FLIGHT", "4"), "generations per caller at the provider at once; more wait queued (DARKROOM_MAX_IN_FLIGHT)")
	createBucket := fs.Bool("create-bucket", false, "create the S3 bucket if it does not exist")
	retention := fs.String("retention", env("DARKROOM_RETENTION", "168h"), "how long outputs are kept (DARKROOM_RETENTION)")
	giveUp := fs.String("storage-give-up", env("DARKROOM_STORAGE_GIVE_UP", "30m"), "how long to retry an unreachable output store before failing (DARKROOM_STORAGE_GIVE_UP)")
	falConc := fs.String("fal-max-concurrent", env("DARKROOM_FAL_MAX_CONCURRENT", "2"), "fal requests in flight at once; more wait queued (DARKROOM_FAL_MAX_CONCURRENT)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c := &config{Addr: *addr, DataDir: *data, PublicURL: strings.TrimSuffix(*public, "/"), CreateBucket: *createBucket}
	c.Webhooks = c.PublicURL != ""
	c.ReplicateToken, c.ReplicateBaseURL = os.Getenv("REPLICATE_API_TOKEN"), os.Getenv("DARKROOM_REPLICATE_BASE_URL")
	c.ReplicateSecret = os.Getenv("DARKROOM_REPLICATE_WEBHOOK_SECRET")
	c.FalKey, c.FalQueueURL = os.Getenv("FAL_KEY"), os.Getenv("DARKROOM_FAL_QUEUE_URL")
	c.ModelsFile = os.Getenv("DARKROOM_MODELS_FILE")
	for _, h := range strings.Split(os.Getenv("DARKROOM_OUTPUT_HOSTS"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			if host, _, err := net.SplitHostPort(h); err == nil {
				h = host // hosts are matched by name; a port would never match
			}
			c.OutputHosts = append(c.OutputHosts, h)
		}
	}
	c.UnsafeOutputFetch = os.Getenv("DARKROOM_UNSAFE_OUTPUT_FETCH") == `1`
	c.S3 = blob.S3Config{
		Bucket:         os.Getenv("DARKROOM_S3_BUCKET"),
		Endpoint:       os.Getenv("DARKROOM_S3_ENDPOINT"),
		Region:         env("DARKROOM_S3_REGION", "us-east-1"),
		Prefix:         os.Getenv("DARKROOM_S3_PREFIX"),
		PathStyle:      os.Getenv("DARKROOM_S3_PATH_STYLE") == "true" || os.Getenv("DARKROOM_S3_PATH_STYLE") == "1",
		PublicEndpoint: os.Getenv("DARKROOM_S3_PUBLIC_ENDPOINT"),
	}
	var err error
	if c.FalConcurrency, err = strconv.Atoi(*falConc); err != nil || c.FalConcurrency < 1 {
		return nil, fmt.Errorf("DARKROOM_FAL_MAX_CONCURRENT: %q is not a positive integer", *falConc)
	}
	if c.Retention, err = time.ParseDuration(*retention); err != nil || c.Retention < time.Minute {
		return nil, fmt.Errorf("DARKROOM_RETENTION: %q is not a duration of at least 1m", *retention)
	}
	if c.StorageGiveUp, err = time.ParseDuration(*giveUp); err != nil || c.StorageGiveUp < time.Second {
		return nil, fmt.Errorf("DARKROOM_STORAGE_GIVE_UP: %q is not a duration of at least 1s", *giveUp)
	}
	if c.TaskTTL, err = time.ParseDuration(*taskTTL); err != nil || c.TaskTTL < time.Minute {
		return nil, fmt.Errorf("DARKROOM_TASK_TTL: %q is not a duration of at least 1m", *taskTTL)
	}
	if c.PollRate, err = strconv.ParseFloat(*pollRate, 64); err != nil || c.PollRate <= 0 {
		return nil, fmt.Errorf("DARKROOM_POLL_RATE: %q is not a positive number", *pollRate)
	}
	if c.CreateRate, err = strconv.ParseFloat(*createRate, 64); err != nil || c.CreateRate <= 0 {
		return nil, fmt.Errorf("DARKROOM_CREATE_RATE: %q is not a positive number", *createRate)
	}
	if c.PollBurst, err = strconv.Atoi(*pollBurst); err != nil || c.PollBurst < 1 {
		return nil, fmt.Errorf("DARKROOM_POLL_BURST: %q is not a positive integer", *pollBurst)
	}
	if c.CreateBurst, err = strconv.Atoi(*createBurst); err != nil || c.CreateBurst < 1 {
		return nil, fmt.Errorf("DARKROOM_CREATE_BURST: %q is not a positive integer", *createBurst)
	}
	if c.MaxInFlight, err = strconv.Atoi(*inflight); err != nil || c.MaxInFlight < 0 {
		return nil, fmt.Errorf("DARKROOM_MAX_IN_FLIGHT: %q is not a non-negative integer", *inflight)
	}
	if c.ApprovalAbove, err = optionalCredits("DARKROOM_APPROVAL_ABOVE_CREDITS", *approval); err != nil {
		return nil, err
	}
	if c.DailyBudget, err = optionalCredits("DARKROOM_DAILY_BUDGET", *budget); err != nil {
		return nil, err
	}
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

func optionalCredits(name, v string) (*int64, error) {
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%s: %q is not a credit count", name, v)
	}
	return &n, nil
}

// app is darkroom wired together.
type app struct {
	cfg    *config
	log    *slog.Logger
	db     *sqlite.DB
	svc    *generation.Service
	runner *generation.Runner
	tools  *compat.Tools
	blobs  blob.Store
	files  http.Handler // signed links to the local store; nil with S3
	mcp    *mcp.Server
	local  *local.Provider
	tasks  *tasks.Dispatcher
	gen    *gentask.GenTasks
	auth   *auth.Authenticator
	limits *limit.Classes
	secret []byte
	keys   map[string]auth.Overrides // per-caller overrides by principal id
	routes map[string]http.Handler   // provider webhooks
}

func newApp(ctx context.Context, cfg *config, log *slog.Logger) (*app, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	d, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "darkroom.db"))
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
	if err := a.openBlobs(secret); err != nil {
		return err
	}
	if a.local, err = local.New(local.Options{Dir: a.cfg.DataDir, Scale: a.cfg.LocalLatency}); err != nil {
		return fmt.Errorf("local provider: %w", err)
	}
	providers, err := a.remoteProviders()
	if err != nil {
		return err
	}
	a.secret = secret
	if a.auth, err = auth.New(a.cfg.Auth); err != nil {
		return fmt.Errorf("authentication: %w", err)
	}
	a.keys = map[string]auth.Overrides{}
	for _, k := range a.cfg.Auth.Keys {
		a.keys[k.Principal().ID] = k.Principal().Limits
	}
	a.limits = limit.NewClasses(limit.Options{})
	a.limits.Poll.Rate, a.limits.Poll.Burst = a.cfg.PollRate, a.cfg.PollBurst
	a.limits.Create.Rate, a.limits.Create.Burst = a.cfg.CreateRate, a.cfg.CreateBurst
	store := tasks.NewStore(a.db.Tasks(), nil)
	info := &mcp.Implementation{Name: server.Name, Version: buildVersion()}
	a.tasks = tasks.NewDispatcher(tasks.Options{Store: store, ServerInfo: info, PollInterval: server.PollInterval(a.limits), Logger: a.log})
	a.gen = &gentask.GenTasks{D: a.tasks, TTL: a.cfg.TaskTTL, Approval: gentask.ApprovalToken{Secret: secret}, ApprovalAbove: a.approvalAbove}
	hub := generation.NewHub()
	hub.Subscribe(a.gen.Notify)
	a.svc, err = generation.NewService(generation.Config{
		Store:         a.db.Generations(),
		Blobs:         a.blobs,
		Retention:     a.cfg.Retention,
		Providers:     append([]provider.Provider{a.local}, providers...),
		Hub:           hub,
		MaxInputBytes: a.cfg.MaxInputBytes,
		LinkTTL:       a.cfg.LinkTTL,
		Observer:      a.gen,
		Budget:        a.budget,
	})
	if err != nil {
		return err
	}
	rc := generation.RunnerConfig{Logger: a.log, MaxInFlight: a.maxInFlight, StorageGiveUp: a.cfg.StorageGiveUp}
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
	a.tools = compat.New(compat.Config{
		Service:        a.svc,
		Owner:          server.ToolOwner,
		MaxInputBytes:  a.cfg.MaxInputBytes,
		Budget:         a.budget,
		BeforeGenerate: a.gen.BeforeGenerate,
	})
	a.gen.Svc, a.gen.Tools = a.svc, a.tools
	a.gen.Register()
	a.mcp = server.New(a.serverConfig())
	return nil
}

// intake hands a provider's deliveries to the runner, telling server
// which refusals are whose.
func (a *app) intake(name string, wp provider.WebhookParser) server.Intake {
	return func(ctx context.Context, h http.Header, q url.Values, body []byte) error {
		err := a.runner.Deliver(ctx, name, wp, h, q, body)
		switch {
		case errors.Is(err, provider.ErrWebhookUnauthenticated):
			return fmt.Errorf("%w: %v", server.ErrUnverified, err)
		case errors.Is(err, generation.ErrMalformedWebhook):
			return fmt.Errorf("%w: %v", server.ErrMalformed, err)
		}
		return err
	}
}

// remoteProviders builds Replicate and fal when their credentials are
// set; a provider without a key is simply absent, and so are its models.
func (a *app) remoteProviders() ([]provider.Provider, error) {
	entries := catalog.Default()
	if a.cfg.ModelsFile != "" {
		over, err := catalog.Load(a.cfg.ModelsFile)
		if err != nil {
			return nil, fmt.Errorf("DARKROOM_MODELS_FILE: %w", err)
		}
		entries = catalog.Merge(entries, over)
	}
	fetchOpts := func(defaults []string) fetch.Options {
		o := fetch.Options{AllowHTTP: a.cfg.UnsafeOutputFetch, AllowPrivate: a.cfg.UnsafeOutputFetch}
		if len(a.cfg.OutputHosts) > 0 {
			o.Hosts = append(slices.Clone(defaults), a.cfg.OutputHosts...)
		}
		return o
	}
	var out []provider.Provider
	if a.cfg.ReplicateToken != "" {
		p, err := replicate.New(replicate.Config{
			Token: a.cfg.ReplicateToken, BaseURL: a.cfg.ReplicateBaseURL, WebhookSecret: a.cfg.ReplicateSecret,
			Models: catalog.ForProvider(entries, "replicate"), Fetch: fetchOpts(replicate.DefaultOutputHosts),
		})
		if err != nil {
			return nil, fmt.Errorf("replicate: %w", err)
		}
		if a.cfg.Webhooks && a.cfg.ReplicateSecret == "" {
			if err := p.LoadWebhookSecret(context.Background()); err != nil {
				a.log.Warn("replicate: no webhook secret; polling instead", "err", err)
			}
		}
		out = append(out, p)
	}
	if a.cfg.FalKey != "" {
		p, err := fal.New(fal.Config{
			Key: a.cfg.FalKey, QueueURL: a.cfg.FalQueueURL, MaxConcurrent: a.cfg.FalConcurrency,
			Models: catalog.ForProvider(entries, "fal"), Fetch: fetchOpts(fal.DefaultOutputHosts),
		})
		if err != nil {
			return nil, fmt.Errorf("fal: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// openBlobs picks the output store: S3 when a bucket is configured (the
// bucket must exist and be writable, or darkroom refuses to start), else
// a folder under the data directory served by /files links.
func (a *app) openBlobs(secret []byte) error {
	ctx := context.Background()
	if a.cfg.S3.Bucket == "" {
		l, err := blob.NewLocal(filepath.Join(a.cfg.DataDir, "files"), secret, a.cfg.PublicURL)
		if err != nil {
			return fmt.Errorf("local file store: %w", err)
		}
		_, _ = l.Sweep(ctx, time.Hour) // temp files a crash left behind
		a.blobs, a.files = l, l.Handler()
		return nil
	}
	s3, err := blob.NewS3(ctx, a.cfg.S3)
	if err != nil {
		return fmt.Errorf("S3 storage: %w", err)
	}
	if a.cfg.CreateBucket {
		if err := s3.CreateBucket(ctx); err != nil {
			return fmt.Errorf("create S3 bucket %q: %w", a.cfg.S3.Bucket, err)
		}
	}
	if err := s3.CheckBucket(ctx); err != nil {
		return fmt.Errorf("S3 bucket %q is not usable (%w); create it, fix DARKROOM_S3_* and the AWS credentials, or start with --create-bucket", a.cfg.S3.Bucket, err)
	}
	_, _ = s3.Sweep(ctx, time.Hour) // staging objects and unfinished uploads
	a.blobs = s3
	return nil
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

func (a *app) maxInFlight(owner string) int {
	if o, ok := a.keys[owner]; ok && o.MaxInFlight != nil {
		return *o.MaxInFlight
	}
	return a.cfg.MaxInFlight
}

// background runs the runner, the task sweeper and limiter eviction until
// ctx ends.
func (a *app) background(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Go(func() { _ = a.runner.Run(ctx) })
		wg.Go(func() {
			a.tasks.Store().RunSweeper(ctx, time.Minute, func(err error) { a.log.Error("task sweeper", "err", err) })
		})
		wg.Go(func() { a.limits.Run(ctx) })
		wg.Go(func() {
			a.svc.RunRetention(ctx, 10*time.Minute, func(err error) { a.log.Error("output retention", "err", err) })
		})
		wg.Wait()
	}()
	return done
}

func (a *app) serverConfig() server.Config {
	return server.Config{
		Version:        buildVersion(),
		Tools:          a.tools,
		Files:          a.files,
		Routes:         a.routes,
		AllowedOrigins: a.cfg.AllowedOrigins,
		MaxBodyBytes:   a.cfg.MaxBodyBytes,
		Logger:         a.log,
		Auth:           a.auth,
		ResourceURL:    a.cfg.PublicURL + "/mcp",
		AuthServers:    authServers(),
		Limits:         a.limits,
		Tasks:          a.tasks,
		Capabilities:   capabilities(),
		Configure:      func(s *mcp.Server) { s.AddReceivingMiddleware(tasks.SDKMiddleware()) },
	}
}

func capabilities() *mcp.ServerCapabilities {
	c := &mcp.ServerCapabilities{}
	c.AddExtension(tasks.ExtensionID, nil)
	return c
}

func authServers() []string {
	var out []string
	for _, s := range strings.Split(os.Getenv("DARKROOM_OAUTH_AUTHORIZATION_SERVERS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		if iss := os.Getenv("DARKROOM_OAUTH_ISSUER"); iss != "" {
			out = []string{iss}
		}
	}
	return out
}

func (a *app) handler() http.Handler { return server.Handler(a.serverConfig(), a.mcp) }

// close releases the database and the authenticator.
func (a *app) close() error {
	a.auth.Close()
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
	if cfg.Auth, err = auth.ConfigFromEnv(os.Getenv, cfg.PublicURL+"/mcp"); err != nil {
		_ = ln.Close()
		return err
	}
	if err := auth.CheckBind(cfg.Addr, cfg.Auth.Configured()); err != nil {
		_ = ln.Close()
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
