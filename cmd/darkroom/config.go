package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/provider/local"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/storage/blob"
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
