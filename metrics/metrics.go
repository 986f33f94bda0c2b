// Package metrics is darkroom's Prometheus instrumentation: one Set of
// collectors per process (tests make their own), with nil-safe methods so
// every instrumented package works without one. Labels stay bounded: never
// a generation id, task id, prompt or principal.
package metrics

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const ns = "darkroom"

// Buckets for request and provider latencies (seconds): a poll is well
// under a millisecond, a bounded wait up to minutes.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Buckets for generation times (seconds): images in seconds, video in
// minutes.
var generationBuckets = []float64{.1, .5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600}

// Set holds every darkroom metric, registered on its own registry.
type Set struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	// series holds each request label set's two children (requestKey →
	// *requestSeries): every answered request is counted, and looking a
	// child up by its labels costs more than the count itself.
	series        sync.Map
	rateLimited   *prometheus.CounterVec
	listenStreams *prometheus.GaugeVec
	// byPath holds requests_by_path_total's children ([transport, path] →
	// prometheus.Counter), looked up once per label pair.
	byPathVec *prometheus.CounterVec
	byPath    sync.Map

	created         *prometheus.CounterVec
	finished        *prometheus.CounterVec
	toSubmit        *prometheus.HistogramVec
	toFinish        *prometheus.HistogramVec
	creditsCharged  *prometheus.CounterVec
	creditsRefunded *prometheus.CounterVec

	providerCalls    *prometheus.CounterVec
	providerDuration *prometheus.HistogramVec
	webhooks         *prometheus.CounterVec
	modelAvailable   *prometheus.GaugeVec
	leaseTakeovers   prometheus.Counter
	acceptErrors     prometheus.Counter
	inFlightHolds    prometheus.Counter

	commitDuration *prometheus.HistogramVec
	commitBatch    prometheus.Histogram

	blobBytes     *prometheus.CounterVec
	blobDuration  *prometheus.HistogramVec
	storageErrors *prometheus.CounterVec
}

// New returns a Set with the Go runtime and process collectors.
func New() *Set {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	s := &Set{reg: reg}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
		Help: "MCP requests answered, by transport (http, stdio), JSON-RPC method, tool (tools/call only) and outcome (ok, tool_error, rpc_<class>, http_<status>)."},
		[]string{"transport", "method", "tool", "outcome"})
	s.requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "request_duration_seconds",
		Help: "Time to answer an MCP request (a listen stream: how long it stayed open).", Buckets: latencyBuckets},
		[]string{"transport", "method", "tool", "outcome"})
	s.byPathVec = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_by_path_total",
		Help: "MCP requests by the engine that answered them: lean (a tool or resources/read darkroom runs below go-sdk), tasks (tasks/* and subscriptions/listen), go-sdk, or edge (refused before a body was routed)."},
		[]string{"transport", "path"})
	s.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rate_limited_total",
		Help: "Requests refused with 429, by limit class (poll, create, preauth: an address guessing tokens)."}, []string{"class"})
	s.listenStreams = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "listen_streams",
		Help: "Open subscriptions/listen streams."}, []string{"transport"})
	s.created = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "generations_created_total",
		Help: "Generations created, by model, provider and path (task or generationId)."}, []string{"model", "provider", "path"})
	s.finished = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "generations_finished_total",
		Help: "Generations that reached a terminal status, by model, provider, status and error kind (provider, internal or empty)."},
		[]string{"model", "provider", "status", "error_kind"})
	s.toSubmit = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "generation_time_to_submit_seconds",
		Help: "From creation to the provider accepting the job.", Buckets: generationBuckets}, []string{"provider"})
	s.toFinish = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "generation_time_to_finish_seconds",
		Help: "From creation to a terminal status.", Buckets: generationBuckets}, []string{"provider", "status"})
	s.creditsCharged = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "credits_charged_total",
		Help: "Budget credits charged at creation, by model."}, []string{"model"})
	s.creditsRefunded = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "credits_refunded_total",
		Help: "Budget credits refunded (cancelled generations), by model; spent = charged - refunded."}, []string{"model"})
	s.providerCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "provider_calls_total",
		Help: "Calls to providers, by provider, operation (submit, status, cancel, find, open_output) and outcome (ok, retryable, permanent, not_created, unsupported, canceled, error)."},
		[]string{"provider", "operation", "outcome"})
	s.providerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "provider_call_duration_seconds",
		Help: "Latency of provider calls.", Buckets: latencyBuckets}, []string{"provider", "operation", "outcome"})
	s.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "webhook_deliveries_total",
		Help: "Webhook deliveries, by provider and verdict (accepted, duplicate, ignored: for no live generation of ours, refused: bad signature or body, error: not stored)."},
		[]string{"provider", "verdict"})
	s.modelAvailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "model_available",
		Help: "1 while a curated model's vendor lists it for this server's credentials, 0 once it does not (the last look at each provider's listing)."}, []string{"model"})
	s.leaseTakeovers = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "runner_lease_takeovers_total",
		Help: "Leases of another (ended) runner taken over at start."})
	s.acceptErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "accept_errors_total",
		Help: "Connections the HTTP listener failed to accept (mostly out of file descriptors: raise the open-files limit); net/http retries with backoff."})
	s.inFlightHolds = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "runner_in_flight_holds_total",
		Help: "Times a generation was held queued because its owner had the in-flight maximum at the provider."})
	s.commitDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "store_commit_duration_seconds",
		Help: "Time of one group commit of the store's writer (all its runs, fsync included), by outcome.", Buckets: latencyBuckets},
		[]string{"outcome"})
	s.commitBatch = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "store_commit_batch_size",
		Help: "Writes committed together in one transaction.", Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128}})
	s.blobBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "blob_bytes_total",
		Help: "Bytes written into blob storage, by operation (put)."}, []string{"operation"})
	s.blobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "blob_operation_duration_seconds",
		Help: "Latency of blob storage operations, by operation and outcome (ok, error).", Buckets: latencyBuckets},
		[]string{"operation", "outcome"})
	s.storageErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "storage_errors_total",
		Help: "Storage failures, by component (store, blob) and operation."}, []string{"component", "operation"})
	for _, c := range []prometheus.Collector{s.requests, s.requestDuration, s.byPathVec, s.rateLimited, s.listenStreams, s.created, s.finished,
		s.toSubmit, s.toFinish, s.creditsCharged, s.creditsRefunded, s.providerCalls, s.providerDuration, s.webhooks,
		s.modelAvailable, s.leaseTakeovers, s.acceptErrors, s.inFlightHolds, s.commitDuration, s.commitBatch, s.blobBytes, s.blobDuration, s.storageErrors} {
		f(c)
	}
	return s
}

// Handler serves the registry in the Prometheus text format; a nil Set
// has no metrics (404).
func (s *Set) Handler() http.Handler {
	if s == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is the Set's registry (tests gather it); nil for a nil Set.
func (s *Set) Registry() *prometheus.Registry {
	if s == nil {
		return nil
	}
	return s.reg
}

// Request counts one answered MCP request.
func (s *Set) Request(transport, method, tool, outcome string, d time.Duration) {
	if s == nil {
		return
	}
	k := requestKey{transport, method, tool, outcome}
	v, ok := s.series.Load(k)
	if !ok {
		v, _ = s.series.LoadOrStore(k, &requestSeries{
			count:    s.requests.WithLabelValues(transport, method, tool, outcome),
			duration: s.requestDuration.WithLabelValues(transport, method, tool, outcome),
		})
	}
	rs := v.(*requestSeries)
	rs.count.Inc()
	rs.duration.Observe(d.Seconds())
}

// requestKey is a request's labels (bounded by the callers: known
// methods and tools, outcome classes).
type requestKey struct{ transport, method, tool, outcome string }

type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// ServedBy counts a request answered by path (lean, tasks, go-sdk or
// edge) on transport (http or stdio).
func (s *Set) ServedBy(transport, path string) {
	if s == nil {
		return
	}
	k := [2]string{transport, path}
	c, ok := s.byPath.Load(k)
	if !ok {
		c, _ = s.byPath.LoadOrStore(k, s.byPathVec.WithLabelValues(transport, path))
	}
	c.(prometheus.Counter).Inc()
}

// RateLimited counts a 429 of class.
func (s *Set) RateLimited(class string) {
	if s != nil {
		s.rateLimited.WithLabelValues(class).Inc()
	}
}

// AcceptFailed counts a connection the listener failed to accept.
func (s *Set) AcceptFailed() {
	if s != nil {
		s.acceptErrors.Inc()
	}
}

// ListenOpened counts an open listen stream; call the result when it ends
// (a second call does nothing, so a stream leaves the gauge once).
func (s *Set) ListenOpened(transport string) func() {
	if s == nil {
		return func() {}
	}
	g := s.listenStreams.WithLabelValues(transport)
	g.Inc()
	return sync.OnceFunc(g.Dec)
}

// Created counts a new generation and the credits it was charged.
func (s *Set) Created(model, provider, path string, credits int64) {
	if s == nil {
		return
	}
	s.created.WithLabelValues(model, provider, path).Inc()
	s.creditsCharged.WithLabelValues(model).Add(float64(credits))
}

// Submitted observes the time from creation to the provider's job.
func (s *Set) Submitted(provider string, sinceCreated time.Duration) {
	if s != nil {
		s.toSubmit.WithLabelValues(provider).Observe(sinceCreated.Seconds())
	}
}

// Finished counts a generation's terminal status; refunded credits are
// those of a cancelled one.
func (s *Set) Finished(model, provider, status, errorKind string, sinceCreated time.Duration, refunded int64) {
	if s == nil {
		return
	}
	s.finished.WithLabelValues(model, provider, status, errorKind).Inc()
	s.toFinish.WithLabelValues(provider, status).Observe(sinceCreated.Seconds())
	if refunded > 0 {
		s.creditsRefunded.WithLabelValues(model).Add(float64(refunded))
	}
}

// ProviderCall counts one call to a provider.
func (s *Set) ProviderCall(provider, op, outcome string, d time.Duration) {
	if s == nil {
		return
	}
	s.providerCalls.WithLabelValues(provider, op, outcome).Inc()
	s.providerDuration.WithLabelValues(provider, op, outcome).Observe(d.Seconds())
}

// Webhook counts a delivery's verdict.
func (s *Set) Webhook(provider, verdict string) {
	if s != nil {
		s.webhooks.WithLabelValues(provider, verdict).Inc()
	}
}

// ModelAvailable records whether a curated model's vendor lists it.
func (s *Set) ModelAvailable(model string, ok bool) {
	if s != nil {
		v := 0.0
		if ok {
			v = 1
		}
		s.modelAvailable.WithLabelValues(model).Set(v)
	}
}

// LeaseTakeovers counts leases taken over from an ended runner.
func (s *Set) LeaseTakeovers(n int64) {
	if s != nil && n > 0 {
		s.leaseTakeovers.Add(float64(n))
	}
}

// InFlightHold counts a generation held back by the in-flight cap.
func (s *Set) InFlightHold() {
	if s != nil {
		s.inFlightHolds.Inc()
	}
}

// Commit observes one group commit of the store's writer.
func (s *Set) Commit(batch int, d time.Duration, err error) {
	if s == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
		s.storageErrors.WithLabelValues("store", "commit").Inc()
	}
	s.commitDuration.WithLabelValues(outcome).Observe(d.Seconds())
	s.commitBatch.Observe(float64(batch))
}

// Blob observes one blob storage operation; bytes counts what a put wrote.
func (s *Set) Blob(op string, bytes int64, d time.Duration, err error) {
	if s == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
		s.storageErrors.WithLabelValues("blob", op).Inc()
	}
	if bytes > 0 {
		s.blobBytes.WithLabelValues(op).Add(float64(bytes))
	}
	s.blobDuration.WithLabelValues(op, outcome).Observe(d.Seconds())
}

// Gauges are read at scrape time.
type Gauges struct {
	// Active counts live generations by status (reserved, queued, running).
	Active map[string]int64
	// Due counts generations due for the runner and not leased; OldestDue
	// is the earliest due time among them (zero: none).
	Due       int64
	OldestDue time.Time
	// Leased counts generations a runner is stepping.
	Leased int64
}

// Counters read at scrape time from their owners.
type Counters struct {
	CacheHits, CacheMisses func() uint64 // the task read cache
	Waiters                func() int    // callers in a bounded wait
	Principals             func() int    // configured principals (API keys)
}

// Observe registers the scrape-time metrics: gauges read from the store
// (bounded by timeout per scrape) and counters read from their owners.
func (s *Set) Observe(read func(ctx context.Context, now time.Time) (Gauges, error), c Counters) {
	if s == nil {
		return
	}
	s.reg.MustRegister(&storeCollector{read: read})
	if c.CacheHits != nil {
		s.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "task_cache_hits_total",
			Help: "Task reads answered from the read cache."}, func() float64 { return float64(c.CacheHits()) }))
	}
	if c.CacheMisses != nil {
		s.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "task_cache_misses_total",
			Help: "Task reads that went to the store."}, func() float64 { return float64(c.CacheMisses()) }))
	}
	if c.Waiters != nil {
		s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "waiters",
			Help: "Callers blocked in a bounded wait for a generation (wait_generation, generate with wait)."}, func() float64 { return float64(c.Waiters()) }))
	}
	if c.Principals != nil {
		s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "principals",
			Help: "Configured principals (API keys)."}, func() float64 { return float64(c.Principals()) }))
	}
}

var (
	activeDesc = prometheus.NewDesc(ns+"_generations_active", "Live generations by status.", []string{"status"}, nil)
	dueDesc    = prometheus.NewDesc(ns+"_runner_queue_depth", "Generations due for the runner and not leased.", nil, nil)
	ageDesc    = prometheus.NewDesc(ns+"_runner_oldest_due_age_seconds", "How long the oldest due generation has waited for the runner (0: none).", nil, nil)
	leasedDesc = prometheus.NewDesc(ns+"_runner_leased", "Generations a runner is stepping (leased).", nil, nil)
	upDesc     = prometheus.NewDesc(ns+"_store_scrape_ok", "1 when the scrape-time store read succeeded.", nil, nil)
)

type storeCollector struct {
	read func(ctx context.Context, now time.Time) (Gauges, error)
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{activeDesc, dueDesc, ageDesc, leasedDesc, upDesc} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := time.Now()
	g, err := c.read(ctx, now)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 1)
	for _, st := range []string{"reserved", "queued", "running"} {
		ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.GaugeValue, float64(g.Active[st]), st)
	}
	ch <- prometheus.MustNewConstMetric(dueDesc, prometheus.GaugeValue, float64(g.Due))
	age := 0.0
	if !g.OldestDue.IsZero() {
		age = max(now.Sub(g.OldestDue).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(leasedDesc, prometheus.GaugeValue, float64(g.Leased))
}
