package metrics_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/metrics"
	"github.com/darkroom-mcp/darkroom/provider/local"
)

// series gathers s's darkroom series as "name{label="value",...}" →
// value; a histogram gives its _count and _sum. Empty label values are
// left out, as Prometheus treats them as absent.
func series(t *testing.T, s *metrics.Set) map[string]float64 {
	t.Helper()
	fams, err := s.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "darkroom_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				if l.GetValue() != "" {
					ls = append(ls, l.GetName()+"="+`"`+l.GetValue()+`"`)
				}
			}
			lbl := ""
			if len(ls) > 0 {
				slices.Sort(ls)
				lbl = "{" + strings.Join(ls, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				got[f.GetName()+lbl] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				got[f.GetName()+lbl] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				got[f.GetName()+"_count"+lbl] = float64(m.GetHistogram().GetSampleCount())
				got[f.GetName()+"_sum"+lbl] = m.GetHistogram().GetSampleSum()
			default:
				t.Fatalf("%s: unexpected type %v", f.GetName(), f.GetType())
			}
		}
	}
	return got
}

// baseline is what a fresh Set holds: the metrics without labels.
var baseline = map[string]float64{
	"darkroom_accept_errors_total":           0,
	"darkroom_runner_lease_takeovers_total":  0,
	"darkroom_runner_in_flight_holds_total":  0,
	"darkroom_store_commit_batch_size_count": 0,
	"darkroom_store_commit_batch_size_sum":   0,
}

// withBaseline is want over the baseline.
func withBaseline(want map[string]float64) map[string]float64 {
	all := maps.Clone(baseline)
	maps.Copy(all, want)
	return all
}

func checkSeries(t *testing.T, s *metrics.Set, want map[string]float64) {
	t.Helper()
	got := series(t, s)
	want = withBaseline(want)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("missing %s (want %v)", k, want[k])
		} else if g != want[k] {
			t.Errorf("%s = %v, want %v", k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %v", k, got[k])
		}
	}
}

func TestRecord(t *testing.T) {
	diskFull := errors.New("disk full")
	tests := []struct {
		name string
		do   func(s *metrics.Set)
		want map[string]float64
	}{
		{"nothing", func(*metrics.Set) {}, nil},
		{"accept error", func(s *metrics.Set) { s.AcceptFailed(); s.AcceptFailed() }, map[string]float64{
			"darkroom_accept_errors_total": 2,
		}},
		{"request", func(s *metrics.Set) {
			s.Request("http", "tools/call", "generate", "ok", 250*time.Millisecond)
			s.Request("http", "tools/call", "generate", "ok", 500*time.Millisecond)
			s.Request("stdio", "tasks/get", "", "rpc_invalid_params", time.Second)
		}, map[string]float64{
			`darkroom_requests_total{method="tools/call",outcome="ok",tool="generate",transport="http"}`:                 2,
			`darkroom_request_duration_seconds_count{method="tools/call",outcome="ok",tool="generate",transport="http"}`: 2,
			`darkroom_request_duration_seconds_sum{method="tools/call",outcome="ok",tool="generate",transport="http"}`:   0.75,
			`darkroom_requests_total{method="tasks/get",outcome="rpc_invalid_params",transport="stdio"}`:                 1,
			`darkroom_request_duration_seconds_count{method="tasks/get",outcome="rpc_invalid_params",transport="stdio"}`: 1,
			`darkroom_request_duration_seconds_sum{method="tasks/get",outcome="rpc_invalid_params",transport="stdio"}`:   1,
		}},
		// Each label alone makes its own series (the cached children are
		// keyed by all four).
		{"request labels", func(s *metrics.Set) {
			s.Request("http", "tools/call", "a", "ok", time.Second)
			s.Request("stdio", "tools/call", "a", "ok", time.Second)
			s.Request("http", "tools/list", "a", "ok", time.Second)
			s.Request("http", "tools/call", "b", "ok", time.Second)
			s.Request("http", "tools/call", "a", "tool_error", time.Second)
		}, map[string]float64{
			`darkroom_requests_total{method="tools/call",outcome="ok",tool="a",transport="http"}`:                         1,
			`darkroom_requests_total{method="tools/call",outcome="ok",tool="a",transport="stdio"}`:                        1,
			`darkroom_requests_total{method="tools/list",outcome="ok",tool="a",transport="http"}`:                         1,
			`darkroom_requests_total{method="tools/call",outcome="ok",tool="b",transport="http"}`:                         1,
			`darkroom_requests_total{method="tools/call",outcome="tool_error",tool="a",transport="http"}`:                 1,
			`darkroom_request_duration_seconds_count{method="tools/call",outcome="ok",tool="a",transport="http"}`:         1,
			`darkroom_request_duration_seconds_count{method="tools/call",outcome="ok",tool="a",transport="stdio"}`:        1,
			`darkroom_request_duration_seconds_count{method="tools/list",outcome="ok",tool="a",transport="http"}`:         1,
			`darkroom_request_duration_seconds_count{method="tools/call",outcome="ok",tool="b",transport="http"}`:         1,
			`darkroom_request_duration_seconds_count{method="tools/call",outcome="tool_error",tool="a",transport="http"}`: 1,
			`darkroom_request_duration_seconds_sum{method="tools/call",outcome="ok",tool="a",transport="http"}`:           1,
			`darkroom_request_duration_seconds_sum{method="tools/call",outcome="ok",tool="a",transport="stdio"}`:          1,
			`darkroom_request_duration_seconds_sum{method="tools/list",outcome="ok",tool="a",transport="http"}`:           1,
			`darkroom_request_duration_seconds_sum{method="tools/call",outcome="ok",tool="b",transport="http"}`:           1,
			`darkroom_request_duration_seconds_sum{method="tools/call",outcome="tool_error",tool="a",transport="http"}`:   1,
		}},
		{"rate limited", func(s *metrics.Set) {
			s.RateLimited("poll")
			s.RateLimited("poll")
			s.RateLimited("preauth")
		}, map[string]float64{
			`darkroom_rate_limited_total{class="poll"}`:    2,
			`darkroom_rate_limited_total{class="preauth"}`: 1,
		}},
		{"listen", func(s *metrics.Set) {
			s.ListenOpened("http")
			closeHTTP := s.ListenOpened("http")
			s.ListenOpened("stdio")
			closeHTTP()
			s.ListenOpened("stdio")()
		}, map[string]float64{
			`darkroom_listen_streams{transport="http"}`:  1,
			`darkroom_listen_streams{transport="stdio"}`: 1,
		}},
		{"created", func(s *metrics.Set) {
			s.Created("local-photo", "local", "task", 4)
			s.Created("local-photo", "local", "task", 4)
			s.Created("local-photo", "local", "generationId", 4)
			s.Created("flux", "fal", "task", 0)
		}, map[string]float64{
			`darkroom_generations_created_total{model="local-photo",path="task",provider="local"}`:         2,
			`darkroom_generations_created_total{model="local-photo",path="generationId",provider="local"}`: 1,
			`darkroom_generations_created_total{model="flux",path="task",provider="fal"}`:                  1,
			`darkroom_credits_charged_total{model="local-photo"}`:                                          12,
			`darkroom_credits_charged_total{model="flux"}`:                                                 0,
		}},
		{"submitted", func(s *metrics.Set) {
			s.Submitted("fal", 2*time.Second)
			s.Submitted("fal", 500*time.Millisecond)
		}, map[string]float64{
			`darkroom_generation_time_to_submit_seconds_count{provider="fal"}`: 2,
			`darkroom_generation_time_to_submit_seconds_sum{provider="fal"}`:   2.5,
		}},
		// Only a refund is counted as one; a failure has its error kind.
		{"finished", func(s *metrics.Set) {
			s.Finished("local-photo", "local", "completed", "", 4*time.Second, 0)
			s.Finished("local-photo", "local", "cancelled", "", 2*time.Second, 4)
			s.Finished("flux", "fal", "failed", "provider", 8*time.Second, 0)
		}, map[string]float64{
			`darkroom_generations_finished_total{model="local-photo",provider="local",status="completed"}`:           1,
			`darkroom_generations_finished_total{model="local-photo",provider="local",status="cancelled"}`:           1,
			`darkroom_generations_finished_total{error_kind="provider",model="flux",provider="fal",status="failed"}`: 1,
			`darkroom_generation_time_to_finish_seconds_count{provider="local",status="completed"}`:                  1,
			`darkroom_generation_time_to_finish_seconds_sum{provider="local",status="completed"}`:                    4,
			`darkroom_generation_time_to_finish_seconds_count{provider="local",status="cancelled"}`:                  1,
			`darkroom_generation_time_to_finish_seconds_sum{provider="local",status="cancelled"}`:                    2,
			`darkroom_generation_time_to_finish_seconds_count{provider="fal",status="failed"}`:                       1,
			`darkroom_generation_time_to_finish_seconds_sum{provider="fal",status="failed"}`:                         8,
			`darkroom_credits_refunded_total{model="local-photo"}`:                                                   4,
		}},
		{"provider call", func(s *metrics.Set) {
			s.ProviderCall("fal", "submit", "retryable", 1500*time.Millisecond)
			s.ProviderCall("fal", "submit", "retryable", 500*time.Millisecond)
			s.ProviderCall("fal", "status", "ok", 250*time.Millisecond)
		}, map[string]float64{
			`darkroom_provider_calls_total{operation="submit",outcome="retryable",provider="fal"}`:                 2,
			`darkroom_provider_call_duration_seconds_count{operation="submit",outcome="retryable",provider="fal"}`: 2,
			`darkroom_provider_call_duration_seconds_sum{operation="submit",outcome="retryable",provider="fal"}`:   2,
			`darkroom_provider_calls_total{operation="status",outcome="ok",provider="fal"}`:                        1,
			`darkroom_provider_call_duration_seconds_count{operation="status",outcome="ok",provider="fal"}`:        1,
			`darkroom_provider_call_duration_seconds_sum{operation="status",outcome="ok",provider="fal"}`:          0.25,
		}},
		{"webhook", func(s *metrics.Set) {
			s.Webhook("fal", "accepted")
			s.Webhook("fal", "accepted")
			s.Webhook("replicate", "refused")
		}, map[string]float64{
			`darkroom_webhook_deliveries_total{provider="fal",verdict="accepted"}`:      2,
			`darkroom_webhook_deliveries_total{provider="replicate",verdict="refused"}`: 1,
		}},
		{"lease takeovers", func(s *metrics.Set) {
			s.LeaseTakeovers(3)
			s.LeaseTakeovers(0)
			s.LeaseTakeovers(-2)
			s.LeaseTakeovers(1)
		}, map[string]float64{"darkroom_runner_lease_takeovers_total": 4}},
		{"in-flight hold", func(s *metrics.Set) {
			s.InFlightHold()
			s.InFlightHold()
		}, map[string]float64{"darkroom_runner_in_flight_holds_total": 2}},
		{"commit", func(s *metrics.Set) {
			s.Commit(8, 250*time.Millisecond, nil)
			s.Commit(1, 500*time.Millisecond, diskFull)
			s.Commit(2, time.Second, nil)
		}, map[string]float64{
			`darkroom_store_commit_duration_seconds_count{outcome="ok"}`:          2,
			`darkroom_store_commit_duration_seconds_sum{outcome="ok"}`:            1.25,
			`darkroom_store_commit_duration_seconds_count{outcome="error"}`:       1,
			`darkroom_store_commit_duration_seconds_sum{outcome="error"}`:         0.5,
			"darkroom_store_commit_batch_size_count":                              3,
			"darkroom_store_commit_batch_size_sum":                                11,
			`darkroom_storage_errors_total{component="store",operation="commit"}`: 1,
		}},
		// Bytes are counted only when given; an error is a storage error.
		{"blob", func(s *metrics.Set) {
			s.Blob("put", 100, 250*time.Millisecond, nil)
			s.Blob("put", 0, 500*time.Millisecond, diskFull)
			s.Blob("open", 0, time.Second, nil)
		}, map[string]float64{
			`darkroom_blob_bytes_total{operation="put"}`:                                      100,
			`darkroom_blob_operation_duration_seconds_count{operation="put",outcome="ok"}`:    1,
			`darkroom_blob_operation_duration_seconds_sum{operation="put",outcome="ok"}`:      0.25,
			`darkroom_blob_operation_duration_seconds_count{operation="put",outcome="error"}`: 1,
			`darkroom_blob_operation_duration_seconds_sum{operation="put",outcome="error"}`:   0.5,
			`darkroom_blob_operation_duration_seconds_count{operation="open",outcome="ok"}`:   1,
			`darkroom_blob_operation_duration_seconds_sum{operation="open",outcome="ok"}`:     1,
			`darkroom_storage_errors_total{component="blob",operation="put"}`:                 1,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := metrics.New()
			tt.do(s)
			checkSeries(t, s, tt.want)
		})
	}
}

// TestNilSet calls every method of *Set on nil with zero arguments: a
// method added without its nil check fails here.
func TestNilSet(t *testing.T) {
	var s *metrics.Set
	typ := reflect.TypeFor[*metrics.Set]()
	if typ.NumMethod() == 0 {
		t.Fatal("no methods found")
	}
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		t.Run(m.Name, func(t *testing.T) {
			args := []reflect.Value{reflect.ValueOf(s)}
			for j := 1; j < m.Type.NumIn(); j++ {
				args = append(args, reflect.Zero(m.Type.In(j)))
			}
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("(*Set)(nil).%s panicked: %v", m.Name, r)
				}
			}()
			m.Func.Call(args)
		})
	}

	// What the nil Set hands back does nothing either.
	s.ListenOpened("http")()
	p, err := local.New(local.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Provider(p); got != p {
		t.Errorf("nil Set's Provider(p) = %T, want p itself", got)
	}
	b, err := blob.NewLocal(t.TempDir(), make([]byte, blob.MinSecretLen), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Blobs(b); got != b {
		t.Errorf("nil Set's Blobs(b) = %T, want b itself", got)
	}
	if r := s.Registry(); r != nil {
		t.Errorf("nil Set's Registry() = %v, want nil", r)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("nil Set's Handler() answered %d, want 404", rec.Code)
	}
}

// TestListenClosedOnce: the func ListenOpened returns takes its stream off
// the gauge once however often it is called, concurrently or not.
func TestListenClosedOnce(t *testing.T) {
	s := metrics.New()
	s.ListenOpened("http") // another stream, still open
	done := s.ListenOpened("http")
	done()
	done()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(done)
	}
	wg.Wait()
	checkSeries(t, s, map[string]float64{`darkroom_listen_streams{transport="http"}`: 1})
}

// TestRequestConcurrent counts every request when many goroutines meet the
// same new label set (the child cache's first store races).
func TestRequestConcurrent(t *testing.T) {
	s := metrics.New()
	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				s.Request("http", "tasks/get", "", "ok", time.Second)
				s.Request("http", "tools/call", []string{"a", "b"}[g%2], "ok", time.Second)
			}
		})
	}
	wg.Wait()
	const n, half = goroutines * each, goroutines * each / 2
	checkSeries(t, s, map[string]float64{
		`darkroom_requests_total{method="tasks/get",outcome="ok",transport="http"}`:                           n,
		`darkroom_request_duration_seconds_count{method="tasks/get",outcome="ok",transport="http"}`:           n,
		`darkroom_request_duration_seconds_sum{method="tasks/get",outcome="ok",transport="http"}`:             n,
		`darkroom_requests_total{method="tools/call",outcome="ok",tool="a",transport="http"}`:                 half,
		`darkroom_request_duration_seconds_count{method="tools/call",outcome="ok",tool="a",transport="http"}`: half,
		`darkroom_request_duration_seconds_sum{method="tools/call",outcome="ok",tool="a",transport="http"}`:   half,
		`darkroom_requests_total{method="tools/call",outcome="ok",tool="b",transport="http"}`:                 half,
		`darkroom_request_duration_seconds_count{method="tools/call",outcome="ok",tool="b",transport="http"}`: half,
		`darkroom_request_duration_seconds_sum{method="tools/call",outcome="ok",tool="b",transport="http"}`:   half,
	})
}

// storeGauges is what Observe's store collector reports for g read OK.
func storeGauges(active map[string]float64, due, age, leased float64) map[string]float64 {
	return map[string]float64{
		"darkroom_store_scrape_ok":                       1,
		`darkroom_generations_active{status="reserved"}`: active["reserved"],
		`darkroom_generations_active{status="queued"}`:   active["queued"],
		`darkroom_generations_active{status="running"}`:  active["running"],
		"darkroom_runner_queue_depth":                    due,
		"darkroom_runner_oldest_due_age_seconds":         age,
		"darkroom_runner_leased":                         leased,
	}
}

func TestObserveStore(t *testing.T) {
	tests := []struct {
		name string
		read func(now time.Time) (metrics.Gauges, error)
		want map[string]float64
	}{
		{"zero", func(time.Time) (metrics.Gauges, error) { return metrics.Gauges{}, nil },
			storeGauges(nil, 0, 0, 0)},
		// Only the live statuses are reported, each even when absent.
		{"values", func(now time.Time) (metrics.Gauges, error) {
			return metrics.Gauges{Active: map[string]int64{"reserved": 1, "running": 3, "completed": 9},
				Due: 4, OldestDue: now.Add(-90 * time.Second), Leased: 5}, nil
		}, storeGauges(map[string]float64{"reserved": 1, "running": 3}, 4, 90, 5)},
		{"due in the future", func(now time.Time) (metrics.Gauges, error) {
			return metrics.Gauges{Due: 1, OldestDue: now.Add(time.Minute)}, nil
		}, storeGauges(nil, 1, 0, 0)},
		{"read error", func(time.Time) (metrics.Gauges, error) {
			return metrics.Gauges{Due: 7, Leased: 7}, errors.New("database is locked")
		}, map[string]float64{"darkroom_store_scrape_ok": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := metrics.New()
			s.Observe(func(ctx context.Context, now time.Time) (metrics.Gauges, error) {
				// The read is bounded: at most 2 s from the scrape.
				if dl, ok := ctx.Deadline(); !ok || dl.Sub(now) > 2*time.Second || !dl.After(now) {
					t.Errorf("read's context deadline %v (set %v), want within 2 s after %v", dl, ok, now)
				}
				return tt.read(now)
			}, metrics.Counters{})
			checkSeries(t, s, tt.want)
		})
	}
}

// TestObserveAtScrape: every scrape reads anew, and a failed read leaves
// the next scrape whole.
func TestObserveAtScrape(t *testing.T) {
	type answer struct {
		g   metrics.Gauges
		err error
	}
	answers := []answer{
		{metrics.Gauges{Due: 1}, nil},
		{metrics.Gauges{}, errors.New("connection refused")},
		{metrics.Gauges{Due: 3, Leased: 2}, nil},
	}
	wants := []map[string]float64{
		storeGauges(nil, 1, 0, 0),
		{"darkroom_store_scrape_ok": 0},
		storeGauges(nil, 3, 0, 2),
	}
	s := metrics.New()
	reads := 0
	s.Observe(func(context.Context, time.Time) (metrics.Gauges, error) {
		a := answers[reads]
		reads++
		return a.g, a.err
	}, metrics.Counters{})
	for i, want := range wants {
		checkSeries(t, s, want)
		if reads != i+1 {
			t.Fatalf("after scrape %d: %d reads, want %d", i+1, reads, i+1)
		}
	}
}

func TestObserveCounters(t *testing.T) {
	var hits, misses atomic.Uint64
	var waiters, principals atomic.Int64
	all := metrics.Counters{
		CacheHits:   hits.Load,
		CacheMisses: misses.Load,
		Waiters:     func() int { return int(waiters.Load()) },
		Principals:  func() int { return int(principals.Load()) },
	}
	ok := func(context.Context, time.Time) (metrics.Gauges, error) { return metrics.Gauges{}, nil }
	store := storeGauges(nil, 0, 0, 0)

	t.Run("none", func(t *testing.T) {
		s := metrics.New()
		s.Observe(ok, metrics.Counters{})
		checkSeries(t, s, store)
	})
	t.Run("waiters only", func(t *testing.T) {
		s := metrics.New()
		waiters.Store(2)
		s.Observe(ok, metrics.Counters{Waiters: all.Waiters})
		checkSeries(t, s, withStore(store, map[string]float64{"darkroom_waiters": 2}))
	})
	t.Run("all, read at scrape", func(t *testing.T) {
		s := metrics.New()
		s.Observe(ok, all)
		for _, v := range []int64{3, 5} {
			hits.Store(uint64(v))
			misses.Store(uint64(v + 1))
			waiters.Store(v + 2)
			principals.Store(v + 3)
			checkSeries(t, s, withStore(store, map[string]float64{
				"darkroom_task_cache_hits_total":   float64(v),
				"darkroom_task_cache_misses_total": float64(v + 1),
				"darkroom_waiters":                 float64(v + 2),
				"darkroom_principals":              float64(v + 3),
			}))
		}
	})
}

func withStore(store, more map[string]float64) map[string]float64 {
	all := maps.Clone(store)
	maps.Copy(all, more)
	return all
}

// TestHandler scrapes over HTTP: the text format, darkroom's series and
// the runtime's, and a 200 even when the store read fails.
func TestHandler(t *testing.T) {
	s := metrics.New()
	s.RateLimited("poll")
	s.Observe(func(context.Context, time.Time) (metrics.Gauges, error) {
		return metrics.Gauges{}, errors.New("database is locked")
	}, metrics.Counters{})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200; body:\n%s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); expfmt.ResponseFormat(rec.Header()).FormatType() != expfmt.TypeTextPlain {
		t.Fatalf("Content-Type %q is not the Prometheus text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	value := func(name string) (float64, bool) {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) != 1 {
			return 0, false
		}
		m := f.GetMetric()[0]
		return m.GetCounter().GetValue() + m.GetGauge().GetValue(), true
	}
	for name, want := range map[string]float64{
		"darkroom_rate_limited_total": 1,
		"darkroom_store_scrape_ok":    0,
	} {
		if v, ok := value(name); !ok || v != want {
			t.Errorf("%s = %v (found %v), want %v", name, v, ok, want)
		}
	}
	for _, name := range []string{"go_goroutines", "process_open_fds", "darkroom_runner_leased"} {
		_, ok := fams[name]
		if want := name != "darkroom_runner_leased"; ok != want {
			t.Errorf("%s served: %v, want %v", name, ok, want)
		}
	}
}
