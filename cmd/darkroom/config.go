package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/outbytes"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/limit"
)

// config is every setting of serve and stdio, typed and validated.
// parseConfig fills it from serverSettings: each is a flag whose default
// comes from its environment variable. docs/configuration.md's tables are
// generated from these settings (TestREADMESettings).
type config struct {
	Addr            string
	DataDir         string
	DatabaseURL     string // postgres://...: PostgreSQL instead of SQLite in DataDir
	PublicURL       string
	LocalLatency    float64
	LocalDir        string // the local provider's folder; empty: DataDir
	MaxBodyBytes    int64
	MaxInputBytes   int64
	Timeouts        server.Timeouts // connection bounds
	LinkTTL         time.Duration
	AllowedOrigins  []string
	TrustedProxies  limit.TrustedProxies
	LogLevel        slog.Level
	LogFormat       string // json or text (logformat.go)
	TaskTTL         time.Duration
	tasksNow        func() time.Time // tests only: the tasks store's clock (nil: time.Now)
	modelsNow       func() time.Time // tests only: the models refresh's clock (nil: time.Now)
	MaxWait         time.Duration    // the longest wait_generation / generate wait:true
	StreamKeepAlive time.Duration    // SSE comment interval on listen streams and held waits
	PollRate        float64
	PollBurst       int
	CreateRate      float64
	CreateBurst     int
	ByteRate        int64 // request body bytes per second per caller
	ByteBurst       int64
	MaxListens      int    // open subscriptions/listen streams per caller
	ApprovalAbove   *int64 // credits above which a spend needs approval
	DailyBudget     *int64
	MaxInFlight     int
	S3              blob.S3Config // Bucket set: outputs go to S3
	CreateBucket    bool
	Retention       time.Duration
	History         time.Duration // how long an ended generation's record is kept
	ReservationTTL  time.Duration // how long a reserved generation waits for its uploads or approval
	StorageGiveUp   time.Duration
	RunnerLease     time.Duration
	// pollOnly runs the scheduler before issue 39 (no streams or waiting
	// creates, fixed poll caps): BenchmarkCompletionLag's comparison; not
	// a setting.
	pollOnly bool
	// replicateWaitBelow is replicate.Config.WaitBelow (0: its default),
	// scaled with the benchmark's durations; not a setting.
	replicateWaitBelow time.Duration
	// falStreamStall and runnerHeld are fal.Config.StreamStall and
	// generation.RunnerConfig.Held (0: their defaults), for tests; not
	// settings.
	falStreamStall time.Duration
	runnerHeld     int
	// listenResync is postgres.Listener.ResyncEvery (0: its default), for
	// a test that must see a change arrive by NOTIFY alone; not a setting.
	listenResync time.Duration
	// MaxLifetime per kind: a generation live longer is abandoned.
	MaxLifetimeImage, MaxLifetimeVideo time.Duration
	// Providers beyond the local one; each is on only with its credential.
	ReplicateToken   string
	ReplicateBaseURL string
	ReplicateSecret  string // webhook signing secret; fetched from Replicate when empty
	FalKey           string
	FalQueueURL      string
	FalConcurrency   int
	FalJWKSURL       string // fal's webhook signing keys
	FalUserID        string // our fal account, as its webhooks name it
	GeminiKey        string
	GeminiBaseURL    string
	GoogleProject    string // Vertex AI: on when set
	GoogleLocation   string
	GoogleCreds      string // a service account key file; empty: application default credentials
	VertexBaseURL    string
	ModelsRefresh    time.Duration // how often each provider's listing is read; 0: never
	OpenAIKey        string
	OpenAIBaseURL    string
	OpenAIOrg        string
	OpenAIProject    string
	// ComfyUI (provider/comfyui): on when ComfyURLs is set.
	ComfyURLs      []string
	ComfyHeader    string // "Name: value", for a ComfyUI behind an authenticating proxy
	ComfyWorkflows string // the folder of API-format workflow files, each a model
	ComfyGiveUp    time.Duration
	ModelsFile     string
	// Models beyond the catalog (cmd/darkroom/models.go).
	ModelsAllow    modelschema.Allow
	SchemaRefresh  time.Duration
	CreditsPerUSD  float64
	DefaultCredits map[provider.Kind]int64
	FalAPIURL      string
	FalOpenAPIURL  string
	OutputHosts    []string // extra hosts outputs may be fetched from
	// UnsafeOutputFetch allows plain-http and private-address output
	// hosts: for tests against a local provider emulator only.
	UnsafeOutputFetch bool
	// MetricsAddr is the metrics listener ("" or off: none); MetricsToken,
	// when set, is required there and also serves /metrics on Addr.
	MetricsAddr   string
	MetricsToken  string
	ShutdownGrace time.Duration
	// Authentication settings as given, read by auth.ConfigFromEnv through
	// authEnv (serve only; stdio is always the local principal).
	APIKeys, APIKeysFile                         string
	OAuthJWKSURL, OAuthJWKSFile                  string
	OAuthIssuer, OAuthAudience                   string
	OAuthScopes, OAuthClockSkew, OAuthAlgorithms string
	AuthServers                                  []string // named in the protected resource metadata
	// Derived, not settings.
	Auth auth.Config // from the settings above (serve), or set by tests
	// Webhooks is set when DARKROOM_PUBLIC_URL is configured: providers
	// then call back instead of being polled.
	Webhooks bool
	// Drain is how long the runner's steps may take to finish at shutdown
	// (serve and stdio set it from ShutdownGrace; tests leave it 0).
	Drain time.Duration

	// Outputs as resources and their inline previews.
	MaxResourceBytes int64 // largest output resources/read returns inline
	OutputBytes      int64 // process-wide budget of output bytes in flight (outbytes)
	InlinePreview    bool  // make a preview per output and show it next to its resource_link
}

// setting is one setting of T: a flag, its environment variables and its
// default.
type setting[T any] struct {
	flag   string   // name, without dashes
	env    []string // DARKROOM_* first; the first one set (non-empty) wins
	def    string   // default, as text
	doc    string   // the default as the docs and -h show it, when not def
	help   string
	isBool bool                       // a boolean flag: "--flag" alone means true
	set    func(c *T, v string) error // parses and validates v into c
}

// fromEnv is the flag's default: the first environment variable that is
// set and not empty, else def.
func (s setting[T]) fromEnv() (value, from string) {
	for _, e := range s.env {
		if v, ok := os.LookupEnv(e); ok && v != "" {
			return v, e
		}
	}
	return s.def, ""
}

// shownDefault is the default for documentation.
func (s setting[T]) shownDefault() string {
	if s.doc != "" {
		return s.doc
	}
	if s.def != "" {
		return "`" + s.def + "`"
	}
	return ""
}

// usageError is a command line that does not parse: main exits 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// textValue is a setting's flag.Value: the text, parsed after all flags.
type textValue struct {
	v           string
	isBool, set bool
}

func (t *textValue) String() string     { return t.v }
func (t *textValue) Set(v string) error { t.v, t.set = v, true; return nil }
func (t *textValue) IsBoolFlag() bool   { return t.isBool }

// parseSettings parses args as the flags of list into c: a flag overrides
// its environment variable, which overrides the default. It returns the
// arguments after the flags, which are a usage error unless positional;
// -h and --help return flag.ErrHelp.
func parseSettings[T any](cmd string, list []setting[T], args []string, positional bool, c *T) ([]string, error) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // main prints errors and usage
	vals := make([]textValue, len(list))
	from := make([]string, len(list))
	for i, s := range list {
		v, e := s.fromEnv()
		vals[i], from[i] = textValue{v: v, isBool: s.isBool}, e
		fs.Var(&vals[i], s.flag, s.help)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if !positional && fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	var errs []error
	for i, s := range list {
		if err := s.set(c, vals[i].v); err != nil {
			name := "--" + s.flag
			if !vals[i].set && from[i] != "" {
				name = from[i]
			}
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return fs.Args(), errors.Join(errs...)
}

// writeSettings prints list for -h.
func writeSettings[T any](w io.Writer, list []setting[T]) {
	fmt.Fprintln(w, "Flags; each defaults to the environment variable beside it:")
	for _, s := range list {
		line := "  --" + s.flag + "  " + strings.Join(s.env, " or ")
		if d := strings.ReplaceAll(s.shownDefault(), "`", ""); d != "" {
			line += "  (default " + d + ")"
		}
		fmt.Fprintf(w, "%s\n      %s\n", line, s.help)
	}
}

// parseConfig reads the flags of serve or stdio (cmd), each defaulting to
// its environment variable, and validates them.
func parseConfig(cmd string, args []string) (*config, error) {
	c := &config{}
	if _, err := parseSettings(cmd, serverSettings(cmd), args, false, c); err != nil {
		return nil, err
	}
	if c.History < c.Retention || c.History < c.TaskTTL {
		// A record may go only once its outputs and its task have.
		return nil, fmt.Errorf("DARKROOM_HISTORY (%v) must be at least DARKROOM_RETENTION (%v) and DARKROOM_TASK_TTL (%v)", c.History, c.Retention, c.TaskTTL)
	}
	c.Webhooks = c.PublicURL != ""
	if len(c.AuthServers) == 0 && c.OAuthIssuer != "" {
		c.AuthServers = []string{c.OAuthIssuer}
	}
	return c, nil
}

// authEnv is the getenv through which auth.ConfigFromEnv reads the
// authentication settings.
func (c *config) authEnv(name string) string {
	switch name {
	case auth.EnvAPIKeysFile:
		return c.APIKeysFile
	case auth.EnvAPIKeys:
		return c.APIKeys
	case auth.EnvOAuthJWKSURL:
		return c.OAuthJWKSURL
	case auth.EnvOAuthJWKSFile:
		return c.OAuthJWKSFile
	case auth.EnvOAuthIssuer:
		return c.OAuthIssuer
	case auth.EnvOAuthAudience:
		return c.OAuthAudience
	case auth.EnvOAuthScopes:
		return c.OAuthScopes
	case auth.EnvOAuthClockSkew:
		return c.OAuthClockSkew
	case auth.EnvOAuthAlgorithms:
		return c.OAuthAlgorithms
	}
	return ""
}

// serverSettings are the settings of serve and stdio (cmd): stdio listens
// on a free port unless told otherwise.
func serverSettings(cmd string) []setting[config] {
	addr, metricsAddr, dataDir := "127.0.0.1:8080", defaultMetricsAddr, "./darkroom-data"
	if cmd == "stdio" {
		addr, metricsAddr, dataDir = stdioFilesAddr, "off", userDataDir()
	}
	text := func(p func(*config) *string) func(*config, string) error {
		return func(c *config, v string) error { *p(c) = v; return nil }
	}
	return []setting[config]{
		{flag: "addr", env: envs("DARKROOM_ADDR"), def: addr, doc: "`127.0.0.1:8080`; stdio: `" + stdioFilesAddr + "`",
			help: "HTTP listen address (stdio serves only /files on it, and takes a free port when this one is taken)",
			set:  text(func(c *config) *string { return &c.Addr })},
		{flag: "data", env: envs("DARKROOM_DATA_DIR"), def: dataDir, doc: "`./darkroom-data`; stdio: the user data folder",
			help: "data directory: database and local files (stdio's default is the user data folder: ~/.local/share/darkroom, ~/Library/Application Support/darkroom, %LOCALAPPDATA%\\darkroom)",
			set:  text(func(c *config) *string { return &c.DataDir })},
		{flag: "database-url", env: envs("DARKROOM_DATABASE_URL"),
			help: "postgres://… selects PostgreSQL (several replicas may share it); empty: SQLite in the data directory",
			set: func(c *config, v string) error {
				if v != "" && !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") {
					return errors.New("must be a postgres:// URL (or empty for SQLite in the data directory)")
				}
				c.DatabaseURL = v
				return nil
			}},
		{flag: "public-url", env: envs("DARKROOM_PUBLIC_URL"), doc: "`http://ADDR`",
			help: "public base URL for links and webhooks",
			set:  func(c *config, v string) error { c.PublicURL = strings.TrimSuffix(v, "/"); return nil }},
		{flag: "local-latency", env: envs("DARKROOM_LOCAL_LATENCY"), def: "1",
			help: "local provider latency scale, 0 = instant",
			set:  func(c *config, v string) (err error) { c.LocalLatency, err = local.ParseLatencyScale(v); return err }},
		{flag: "local-dir", env: envs("DARKROOM_LOCAL_DIR"), doc: "the data folder",
			help: "the local provider's folder (its jobs and outputs); replicas share one, as they would a real provider",
			set:  text(func(c *config) *string { return &c.LocalDir })},
		{flag: "max-body-bytes", env: envs("DARKROOM_MAX_BODY_BYTES"), def: strconv.Itoa(16 << 20),
			help: "request body cap",
			set:  func(c *config, v string) (err error) { c.MaxBodyBytes, err = byteCount(v, 1024); return err }},
		{flag: "max-input-bytes", env: envs("DARKROOM_MAX_INPUT_BYTES"), def: strconv.Itoa(10 << 20),
			help: "input image cap",
			set:  func(c *config, v string) (err error) { c.MaxInputBytes, err = byteCount(v, 1); return err }},
		{flag: "max-resource-bytes", env: envs("DARKROOM_MAX_RESOURCE_BYTES"), def: strconv.Itoa(gentools.DefaultMaxResourceBytes),
			help: "largest output resources/read returns inline (larger: use the signed link)",
			set:  func(c *config, v string) (err error) { c.MaxResourceBytes, err = byteCount(v, 1); return err }},
		{flag: "output-bytes", env: envs("DARKROOM_OUTPUT_BYTES"), def: strconv.Itoa(outbytes.DefaultTotal),
			help: "memory for output bytes in flight (resources/read, the viewer), all callers together; one caller holds at most half; past it a read is refused with a retryable 429 / -31429",
			set:  func(c *config, v string) (err error) { c.OutputBytes, err = byteCount(v, 1<<20); return err }},
		{flag: "inline-preview", env: envs("DARKROOM_INLINE_PREVIEW"), def: "on",
			help: "on: a small JPEG preview of each output, made once when stored, follows its resource_link; off: none",
			set: func(c *config, v string) error {
				switch strings.ToLower(v) {
				case "on", "true", "1":
					c.InlinePreview = true
				case "off", "false", "0":
					c.InlinePreview = false
				default:
					return fmt.Errorf("want on or off, not %q", v)
				}
				return nil
			}},
		{flag: "read-header-timeout", env: envs("DARKROOM_READ_HEADER_TIMEOUT"), def: server.DefaultReadHeaderTimeout.String(),
			help: "time allowed for a request's line and headers",
			set: func(c *config, v string) (err error) {
				c.Timeouts.ReadHeader, err = duration(v, time.Millisecond, time.Hour)
				return err
			}},
		{flag: "read-timeout", env: envs("DARKROOM_READ_TIMEOUT"), def: server.DefaultReadTimeout.String(),
			help: "time allowed for a request body after the headers",
			set: func(c *config, v string) (err error) {
				c.Timeouts.Read, err = duration(v, time.Millisecond, time.Hour)
				return err
			}},
		{flag: "write-timeout", env: envs("DARKROOM_WRITE_TIMEOUT"), def: server.DefaultWriteTimeout.String(),
			help: "time allowed for each write of a response (streams live while writes progress)",
			set: func(c *config, v string) (err error) {
				c.Timeouts.Write, err = duration(v, time.Millisecond, time.Hour)
				return err
			}},
		{flag: "idle-timeout", env: envs("DARKROOM_IDLE_TIMEOUT"), def: server.DefaultIdleTimeout.String(),
			help: "time a keep-alive connection may sit idle between requests",
			set: func(c *config, v string) (err error) {
				c.Timeouts.Idle, err = duration(v, time.Millisecond, time.Hour)
				return err
			}},
		{flag: "link-ttl", env: envs("DARKROOM_LINK_TTL"), def: "15m",
			help: "signed link lifetime",
			set: func(c *config, v string) (err error) {
				c.LinkTTL, err = duration(v, time.Second, 7*24*time.Hour)
				return err
			}},
		{flag: "allowed-origins", env: envs("DARKROOM_ALLOWED_ORIGINS"), doc: "loopback only",
			help: "comma-separated extra browser origins allowed on /mcp",
			set: func(c *config, v string) error {
				c.AllowedOrigins = nil
				for _, o := range list(v) {
					c.AllowedOrigins = append(c.AllowedOrigins, strings.TrimSuffix(o, "/"))
				}
				return nil
			}},
		{flag: "trusted-proxies", env: envs("DARKROOM_TRUSTED_PROXIES"), doc: "none",
			help: "comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For / Forwarded name the client; from anyone else they are ignored",
			set: func(c *config, v string) (err error) {
				c.TrustedProxies, err = limit.ParseTrustedProxies(v)
				return err
			}},
		{flag: "log-level", env: envs("DARKROOM_LOG_LEVEL"), def: "info",
			help: "debug, info, warn or error",
			set:  func(c *config, v string) error { return c.LogLevel.UnmarshalText([]byte(v)) }},
		{flag: "log-format", env: envs("DARKROOM_LOG_FORMAT"), def: "auto",
			help: "auto (text on a terminal, else json), json (one object a line, for log collectors) or text (a start-up banner for a person, then key=value lines)",
			set: func(c *config, v string) (err error) {
				c.LogFormat, err = parseLogFormat(v, stderrIsTerminal)
				return err
			}},
		{flag: "metrics-addr", env: envs("DARKROOM_METRICS_ADDR"), def: metricsAddr, doc: "`127.0.0.1:9464`; stdio: `off`",
			help: "listen address of /metrics (Prometheus text format); off = none; a non-loopback address needs --metrics-token",
			set: func(c *config, v string) error {
				if v == "off" || v == "none" {
					v = ""
				}
				c.MetricsAddr = v
				return nil
			}},
		{flag: "metrics-token", env: envs("DARKROOM_METRICS_TOKEN"),
			help: "bearer token for /metrics: required on the metrics listener, and serves /metrics on --addr too",
			set:  text(func(c *config) *string { return &c.MetricsToken })},
		{flag: "shutdown-grace", env: envs("DARKROOM_SHUTDOWN_GRACE"), def: "20s",
			help: "on SIGTERM or SIGINT, how long in-flight requests and runner steps may take to finish",
			set: func(c *config, v string) (err error) {
				c.ShutdownGrace, err = duration(v, time.Second, time.Hour)
				return err
			}},
		{flag: "max-wait", env: envs("DARKROOM_MAX_WAIT"), def: gentools.DefaultMaxWait.String(),
			help: "the longest a wait_generation or generate with wait:true waits before answering timedOut:true, progress or not (clients that cut a request at 60 s need it below 60s)",
			set: func(c *config, v string) (err error) {
				c.MaxWait, err = duration(v, time.Second, gentools.MaxWaitSeconds*time.Second)
				return err
			}},
		{flag: "stream-keepalive", env: envs("DARKROOM_STREAM_KEEPALIVE"), def: "15s",
			help: "the interval of SSE keep-alive comments on listen streams and held waits (wait_generation, generate with wait:true), so a proxy that cuts idle connections (HAProxy's timeout server) does not cut them; keep it well below the proxy's idle timeout",
			set: func(c *config, v string) (err error) {
				c.StreamKeepAlive, err = duration(v, 100*time.Millisecond, time.Hour)
				return err
			}},
		{flag: "task-ttl", env: envs("DARKROOM_TASK_TTL"), def: "24h",
			help: "lifetime of a task",
			set:  func(c *config, v string) (err error) { c.TaskTTL, err = duration(v, time.Minute, 0); return err }},
		{flag: "poll-rate", env: envs("DARKROOM_POLL_RATE"), def: "5",
			help: "polls per second per caller",
			set:  func(c *config, v string) (err error) { c.PollRate, err = rate(v); return err }},
		{flag: "poll-burst", env: envs("DARKROOM_POLL_BURST"), def: "20",
			help: "poll burst per caller",
			set:  func(c *config, v string) (err error) { c.PollBurst, err = count(v, 1); return err }},
		{flag: "create-rate", env: envs("DARKROOM_CREATE_RATE"), def: "1",
			help: "generations started per second per caller",
			set:  func(c *config, v string) (err error) { c.CreateRate, err = rate(v); return err }},
		{flag: "create-burst", env: envs("DARKROOM_CREATE_BURST"), def: "10",
			help: "creation burst per caller",
			set:  func(c *config, v string) (err error) { c.CreateBurst, err = count(v, 1); return err }},
		{flag: "byte-rate", env: envs("DARKROOM_BYTE_RATE"), def: strconv.Itoa(limit.DefaultByteRate),
			help: "request body bytes per second per caller (upload_input's images spend it)",
			set:  func(c *config, v string) (err error) { c.ByteRate, err = byteCount(v, 1); return err }},
		{flag: "byte-burst", env: envs("DARKROOM_BYTE_BURST"), def: strconv.Itoa(limit.DefaultByteBurst),
			help: "request body byte burst per caller",
			set:  func(c *config, v string) (err error) { c.ByteBurst, err = byteCount(v, 1); return err }},
		{flag: "max-listens", env: envs("DARKROOM_MAX_LISTENS"), def: strconv.Itoa(limit.DefaultMaxListens),
			help: "open subscriptions/listen streams per caller; one more is refused (429, -31429)",
			set:  func(c *config, v string) (err error) { c.MaxListens, err = count(v, 1); return err }},
		{flag: "daily-budget", env: envs("DARKROOM_DAILY_BUDGET"), doc: "unlimited",
			help: "credits per caller per UTC day; empty = unlimited",
			set:  func(c *config, v string) (err error) { c.DailyBudget, err = optionalCredits(v); return err }},
		{flag: "approval-above-credits", env: envs("DARKROOM_APPROVAL_ABOVE_CREDITS"), doc: "off",
			help: "ask before spending more credits than this on one generation; empty = never",
			set:  func(c *config, v string) (err error) { c.ApprovalAbove, err = optionalCredits(v); return err }},
		{flag: "max-in-flight", env: envs("DARKROOM_MAX_IN_FLIGHT"), def: "4",
			help: "generations per caller at the provider at once; more wait queued",
			set:  func(c *config, v string) (err error) { c.MaxInFlight, err = count(v, 0); return err }},
		{flag: "api-keys", env: envs(auth.EnvAPIKeys),
			help: "API keys: name=secret[;overrides],... (prefer the environment to a flag for secrets)",
			set:  text(func(c *config) *string { return &c.APIKeys })},
		{flag: "api-keys-file", env: envs(auth.EnvAPIKeysFile),
			help: "file of API keys, one name=secret[;overrides] per line",
			set:  text(func(c *config) *string { return &c.APIKeysFile })},
		{flag: "oauth-jwks-url", env: envs(auth.EnvOAuthJWKSURL),
			help: "JWKS URL for OAuth access tokens (turns OAuth on)",
			set:  text(func(c *config) *string { return &c.OAuthJWKSURL })},
		{flag: "oauth-jwks-file", env: envs(auth.EnvOAuthJWKSFile),
			help: "JWKS file for OAuth access tokens (turns OAuth on)",
			set:  text(func(c *config) *string { return &c.OAuthJWKSFile })},
		{flag: "oauth-issuer", env: envs(auth.EnvOAuthIssuer),
			help: "required token issuer",
			set:  text(func(c *config) *string { return &c.OAuthIssuer })},
		{flag: "oauth-audience", env: envs(auth.EnvOAuthAudience), doc: "`PUBLIC_URL/mcp`",
			help: "required token audience",
			set:  text(func(c *config) *string { return &c.OAuthAudience })},
		{flag: "oauth-scopes", env: envs(auth.EnvOAuthScopes),
			help: "required scopes, space or comma separated",
			set:  text(func(c *config) *string { return &c.OAuthScopes })},
		{flag: "oauth-clock-skew", env: envs(auth.EnvOAuthClockSkew), doc: "`30s`",
			help: "leeway for token times",
			set:  text(func(c *config) *string { return &c.OAuthClockSkew })},
		{flag: "oauth-algorithms", env: envs(auth.EnvOAuthAlgorithms), doc: "`RS256,ES256,EdDSA`",
			help: "accepted signing algorithms",
			set:  text(func(c *config) *string { return &c.OAuthAlgorithms })},
		{flag: "oauth-authorization-servers", env: envs("DARKROOM_OAUTH_AUTHORIZATION_SERVERS"), doc: "the issuer",
			help: "comma-separated authorization servers named in /.well-known/oauth-protected-resource",
			set:  func(c *config, v string) error { c.AuthServers = list(v); return nil }},
		{flag: "s3-bucket", env: envs("DARKROOM_S3_BUCKET"),
			help: "store outputs in this S3 bucket instead of the local folder",
			set:  text(func(c *config) *string { return &c.S3.Bucket })},
		{flag: "s3-endpoint", env: envs("DARKROOM_S3_ENDPOINT"), doc: "AWS",
			help: "S3 endpoint URL, for S3-compatible servers",
			set:  text(func(c *config) *string { return &c.S3.Endpoint })},
		{flag: "s3-region", env: envs("DARKROOM_S3_REGION"), def: "us-east-1",
			help: "S3 region",
			set:  text(func(c *config) *string { return &c.S3.Region })},
		{flag: "s3-prefix", env: envs("DARKROOM_S3_PREFIX"),
			help: "key prefix of outputs in the bucket",
			set:  text(func(c *config) *string { return &c.S3.Prefix })},
		{flag: "s3-path-style", env: envs("DARKROOM_S3_PATH_STYLE"), def: "false", isBool: true,
			help: "path-style bucket addressing",
			set:  func(c *config, v string) (err error) { c.S3.PathStyle, err = strconv.ParseBool(v); return err }},
		{flag: "s3-public-endpoint", env: envs("DARKROOM_S3_PUBLIC_ENDPOINT"), doc: "the endpoint",
			help: "endpoint that presigned links name",
			set:  text(func(c *config) *string { return &c.S3.PublicEndpoint })},
		{flag: "create-bucket", env: envs("DARKROOM_CREATE_BUCKET"), def: "false", isBool: true,
			help: "create the S3 bucket if it does not exist",
			set:  func(c *config, v string) (err error) { c.CreateBucket, err = strconv.ParseBool(v); return err }},
		{flag: "retention", env: envs("DARKROOM_RETENTION"), def: "168h",
			help: "how long outputs are kept",
			set:  func(c *config, v string) (err error) { c.Retention, err = duration(v, time.Minute, 0); return err }},
		{flag: "history", env: envs("DARKROOM_HISTORY"), def: "720h",
			help: "how long an ended generation's record is kept (at least the retention, the task TTL and 48h)",
			set:  func(c *config, v string) (err error) { c.History, err = duration(v, 48*time.Hour, 0); return err }},
		{flag: "reservation-ttl", env: envs("DARKROOM_RESERVATION_TTL"), def: "30m",
			help: "how long a generation waits for upload_input (or its spend approval); then it fails, refunded",
			set:  func(c *config, v string) (err error) { c.ReservationTTL, err = duration(v, time.Minute, 0); return err }},
		{flag: "storage-give-up", env: envs("DARKROOM_STORAGE_GIVE_UP"), def: "30m",
			help: "how long to retry an unreachable output store before failing",
			set:  func(c *config, v string) (err error) { c.StorageGiveUp, err = duration(v, time.Second, 0); return err }},
		{flag: "max-lifetime-image", env: envs("DARKROOM_MAX_LIFETIME_IMAGE"), def: "1h",
			help: "longest an image generation may stay live; then it fails, refunded, and the provider is asked to cancel",
			set: func(c *config, v string) (err error) {
				c.MaxLifetimeImage, err = duration(v, time.Minute, 0)
				return err
			}},
		{flag: "max-lifetime-video", env: envs("DARKROOM_MAX_LIFETIME_VIDEO"), def: "6h",
			help: "longest a video generation may stay live; then it fails, refunded, and the provider is asked to cancel",
			set: func(c *config, v string) (err error) {
				c.MaxLifetimeVideo, err = duration(v, time.Minute, 0)
				return err
			}},
		{flag: "runner-lease", env: envs("DARKROOM_RUNNER_LEASE"), def: "2m",
			help: "how long a claimed generation is one runner's; on PostgreSQL, how soon another replica takes over a killed one's work",
			set:  func(c *config, v string) (err error) { c.RunnerLease, err = duration(v, time.Second, 0); return err }},
		{flag: "replicate-api-token", env: envs("DARKROOM_REPLICATE_API_TOKEN", "REPLICATE_API_TOKEN"),
			help: "Replicate API token; turns Replicate on",
			set:  text(func(c *config) *string { return &c.ReplicateToken })},
		{flag: "replicate-base-url", env: envs("DARKROOM_REPLICATE_BASE_URL"), doc: "`https://api.replicate.com`",
			help: "Replicate API origin",
			set:  text(func(c *config) *string { return &c.ReplicateBaseURL })},
		{flag: "replicate-webhook-secret", env: envs("DARKROOM_REPLICATE_WEBHOOK_SECRET"), doc: "fetched from Replicate",
			help: "Replicate webhook signing secret (whsec_...)",
			set:  text(func(c *config) *string { return &c.ReplicateSecret })},
		{flag: "fal-key", env: envs("DARKROOM_FAL_KEY", "FAL_KEY"),
			help: "fal API key; turns fal on",
			set:  text(func(c *config) *string { return &c.FalKey })},
		{flag: "fal-queue-url", env: envs("DARKROOM_FAL_QUEUE_URL"), doc: "`https://queue.fal.run`",
			help: "fal queue origin",
			set:  text(func(c *config) *string { return &c.FalQueueURL })},
		{flag: "fal-webhook-jwks-url", env: envs("DARKROOM_FAL_WEBHOOK_JWKS_URL"), doc: "`https://rest.alpha.fal.ai/.well-known/jwks.json`",
			help: "where fal's webhook signing keys are fetched",
			set:  text(func(c *config) *string { return &c.FalJWKSURL })},
		{flag: "fal-user-id", env: envs("DARKROOM_FAL_USER_ID"), doc: "learnt from webhooks",
			help: "fal account user id; webhooks of other accounts never bind a request",
			set:  text(func(c *config) *string { return &c.FalUserID })},
		{flag: "fal-max-concurrent", env: envs("DARKROOM_FAL_MAX_CONCURRENT"), def: "2",
			help: "fal requests in flight at once; more wait queued",
			set:  func(c *config, v string) (err error) { c.FalConcurrency, err = count(v, 1); return err }},
		{flag: "gemini-api-key", env: envs("DARKROOM_GEMINI_API_KEY", "GEMINI_API_KEY"),
			help: "Google Gemini API key; turns the Gemini image models and Gemini Omni video on",
			set:  text(func(c *config) *string { return &c.GeminiKey })},
		{flag: "gemini-base-url", env: envs("DARKROOM_GEMINI_BASE_URL"), doc: "`https://generativelanguage.googleapis.com`",
			help: "Gemini API origin",
			set:  text(func(c *config) *string { return &c.GeminiBaseURL })},
		{flag: "google-project", env: envs("DARKROOM_GOOGLE_PROJECT"), doc: "none",
			help: "Google Cloud project; turns Veo 3.1 on through Vertex AI",
			set:  text(func(c *config) *string { return &c.GoogleProject })},
		{flag: "google-location", env: envs("DARKROOM_GOOGLE_LOCATION"), def: "us-central1",
			help: "Vertex AI location (region, or global)",
			set:  text(func(c *config) *string { return &c.GoogleLocation })},
		{flag: "google-credentials", env: envs("DARKROOM_GOOGLE_CREDENTIALS"), doc: "application default credentials",
			help: "service account key file for Vertex AI (else GOOGLE_APPLICATION_CREDENTIALS, gcloud's login or the metadata server)",
			set:  text(func(c *config) *string { return &c.GoogleCreds })},
		{flag: "vertex-base-url", env: envs("DARKROOM_VERTEX_BASE_URL"), doc: "`https://{location}-aiplatform.googleapis.com`",
			help: "Vertex AI origin",
			set:  text(func(c *config) *string { return &c.VertexBaseURL })},
		{flag: "models-refresh", env: envs("DARKROOM_MODELS_REFRESH"), def: "6h",
			help: "how often darkroom asks each provider which curated models its vendor lists (a model it no longer lists is withdrawn until it is again); 0: never",
			set: func(c *config, v string) (err error) {
				if v == "0" {
					c.ModelsRefresh = 0
					return nil
				}
				c.ModelsRefresh, err = duration(v, time.Minute, 7*24*time.Hour)
				return err
			}},
		{flag: "openai-api-key", env: envs("DARKROOM_OPENAI_API_KEY", "OPENAI_API_KEY"),
			help: "OpenAI API key; turns the OpenAI image models on",
			set:  text(func(c *config) *string { return &c.OpenAIKey })},
		{flag: "openai-base-url", env: envs("DARKROOM_OPENAI_BASE_URL"), doc: "`https://api.openai.com`",
			help: "OpenAI API origin (or an OpenAI-compatible gateway)",
			set:  text(func(c *config) *string { return &c.OpenAIBaseURL })},
		{flag: "openai-organization", env: envs("DARKROOM_OPENAI_ORGANIZATION"), doc: "none",
			help: "sent as OpenAI-Organization",
			set:  text(func(c *config) *string { return &c.OpenAIOrg })},
		{flag: "openai-project", env: envs("DARKROOM_OPENAI_PROJECT"), doc: "none",
			help: "sent as OpenAI-Project",
			set:  text(func(c *config) *string { return &c.OpenAIProject })},
		{flag: "comfyui-url", env: envs("DARKROOM_COMFYUI_URL"), doc: "none",
			help: "comma-separated ComfyUI origins (`http://host:8188`); turns ComfyUI on, each workflow a model",
			set:  func(c *config, v string) error { c.ComfyURLs = list(v); return nil }},
		{flag: "comfyui-header", env: envs("DARKROOM_COMFYUI_HEADER"), doc: "none",
			help: "a header (`Name: value`) sent to every ComfyUI, for one behind an authenticating proxy",
			set:  text(func(c *config) *string { return &c.ComfyHeader })},
		{flag: "comfyui-workflows", env: envs("DARKROOM_COMFYUI_WORKFLOWS"), doc: "the shipped examples",
			help: "folder of ComfyUI workflow files (API format), each the model `comfyui:NAME` of its file `NAME.json`, with an optional `NAME.mapping.json` beside it",
			set:  text(func(c *config) *string { return &c.ComfyWorkflows })},
		{flag: "comfyui-give-up", env: envs("DARKROOM_COMFYUI_GIVE_UP"), def: "5m",
			help: "how long a ComfyUI may not answer while it runs a prompt before that generation fails, refunded",
			set: func(c *config, v string) (err error) {
				c.ComfyGiveUp, err = duration(v, time.Second, 24*time.Hour)
				return err
			}},
		{flag: "models-file", env: envs("DARKROOM_MODELS_FILE"), doc: "embedded catalog",
			help: "JSON model catalog merged over the embedded one",
			set:  text(func(c *config) *string { return &c.ModelsFile })},
		{flag: "models-allow", env: envs("DARKROOM_MODELS_ALLOW"), doc: "none",
			help: "comma-separated provider-qualified model patterns callers may use beyond the catalog (replicate:owner/*, fal:fal-ai/*)",
			set:  setModelsAllow},
		{flag: "schema-refresh", env: envs("DARKROOM_SCHEMA_REFRESH"), def: "24h",
			help: "age after which a model's stored schema is fetched again, in the background",
			set:  func(c *config, v string) (err error) { c.SchemaRefresh, err = duration(v, time.Minute, 0); return err }},
		{flag: "credits-per-usd", env: envs("DARKROOM_CREDITS_PER_USD"), def: "100",
			help: "credits charged per US dollar of a provider's published price (fal's pricing API)",
			set: func(c *config, v string) (err error) {
				c.CreditsPerUSD, err = strconv.ParseFloat(v, 64)
				if err == nil && (c.CreditsPerUSD <= 0 || math.IsInf(c.CreditsPerUSD, 0) || math.IsNaN(c.CreditsPerUSD)) {
					err = fmt.Errorf("%q is not a positive number", v)
				}
				return err
			}},
		{flag: "default-credits", env: envs("DARKROOM_DEFAULT_CREDITS"), def: "image=10,video=300",
			help: "credits per run of an allowed model whose provider publishes no price, per kind",
			set:  func(c *config, v string) (err error) { c.DefaultCredits, err = kindCredits(v); return err }},
		{flag: "fal-api-url", env: envs("DARKROOM_FAL_API_URL"), doc: "`https://api.fal.ai`",
			help: "fal Platform API origin (model search, pricing)",
			set:  text(func(c *config) *string { return &c.FalAPIURL })},
		{flag: "fal-openapi-url", env: envs("DARKROOM_FAL_OPENAPI_URL"), doc: "`https://fal.ai`",
			help: "origin of fal's per-endpoint OpenAPI documents (model schemas)",
			set:  text(func(c *config) *string { return &c.FalOpenAPIURL })},
		{flag: "output-hosts", env: envs("DARKROOM_OUTPUT_HOSTS"), doc: "provider defaults",
			help: "comma-separated extra hosts outputs may be fetched from",
			set: func(c *config, v string) error {
				c.OutputHosts = nil
				for _, h := range list(v) {
					if host, _, err := net.SplitHostPort(h); err == nil {
						h = host // hosts are matched by name; a port would never match
					}
					c.OutputHosts = append(c.OutputHosts, h)
				}
				return nil
			}},
		{flag: "unsafe-output-fetch", env: envs("DARKROOM_UNSAFE_OUTPUT_FETCH"), def: "false", isBool: true,
			help: "allow plain-http and private-address output hosts: for tests against a local emulator only",
			set:  func(c *config, v string) (err error) { c.UnsafeOutputFetch, err = strconv.ParseBool(v); return err }},
	}
}

// defaultMetricsAddr is serve's metrics listener unless told otherwise.
const defaultMetricsAddr = "127.0.0.1:9464"

func envs(names ...string) []string { return names }

// list splits a comma-separated value, dropping empty items.
// kindCredits reads "image=10,video=300".
func kindCredits(v string) (map[provider.Kind]int64, error) {
	out := map[provider.Kind]int64{}
	for _, kv := range list(v) {
		k, n, ok := strings.Cut(kv, "=")
		c, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		kind := provider.Kind(strings.TrimSpace(k))
		if !ok || err != nil || c < 0 || (kind != provider.KindImage && kind != provider.KindVideo) {
			return nil, fmt.Errorf("%q is not image=N,video=N", v)
		}
		out[kind] = c
	}
	for _, k := range []provider.Kind{provider.KindImage, provider.KindVideo} {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("%q names no %s price", v, k)
		}
	}
	return out, nil
}

func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// duration parses a duration of at least lo and, when hi > 0, at most hi.
func duration(v string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	switch {
	case hi > 0 && (err != nil || d < lo || d > hi):
		return 0, fmt.Errorf("%q is not a duration between %v and %v", v, lo, hi)
	case err != nil || d < lo:
		return 0, fmt.Errorf("%q is not a duration of at least %v", v, lo)
	}
	return d, nil
}

// count parses an integer of at least lo (0 or 1).
func count(v string, lo int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo {
		if lo > 0 {
			return 0, fmt.Errorf("%q is not a positive integer", v)
		}
		return 0, fmt.Errorf("%q is not a non-negative integer", v)
	}
	return n, nil
}

func rate(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("%q is not a positive number", v)
	}
	return f, nil
}

func byteCount(v string, lo int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo {
		return 0, fmt.Errorf("%q is not a byte count of at least %d", v, lo)
	}
	return n, nil
}

// optionalCredits parses a credit count; empty is none.
func optionalCredits(v string) (*int64, error) {
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%q is not a credit count", v)
	}
	return &n, nil
}
