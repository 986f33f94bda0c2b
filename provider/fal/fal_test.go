package fal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/provider/fetch"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

var testFetch = fetch.Options{Hosts: []string{"127.0.0.1"}, AllowHTTP: true, AllowPrivate: true}

func newProvider(t testing.TB, em *emulator.Emulator, mod func(*fal.Config)) *fal.Provider {
	t.Helper()
	cfg := fal.Config{Key: "fal_test", QueueURL: em.Fal.URL, RequestsPerMinute: -1, MaxConcurrent: 100, Fetch: testFetch, Now: em.Now,
		WebhookJWKSURL: em.FalJWKSURL()}
	if mod != nil {
		mod(&cfg)
	}
	p, err := fal.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func setup(t testing.TB, o emulator.Options, mod func(*fal.Config)) (*emulator.Emulator, *fal.Provider) {
	em := emulator.New(o)
	t.Cleanup(em.Close)
	return em, newProvider(t, em, mod)
}

func model(t testing.TB, p provider.Provider, id string) provider.Model {
	for _, m := range p.Models() {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("no model %s", id)
	return provider.Model{}
}

func req(t testing.TB, p provider.Provider, modelID, key, prompt string) provider.Request {
	return provider.Request{IdempotencyKey: key, Model: model(t, p, modelID), Prompt: prompt, AspectRatio: "16:9", DurationSeconds: 0}
}

func isPermanent(err error) bool {
	var pe *provider.PermanentError
	return errors.As(err, &pe)
}

func retryable(err error) (*provider.RetryableError, bool) {
	var re *provider.RetryableError
	ok := errors.As(err, &re)
	return re, ok
}

func TestGolden(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("../../testdata/fal/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		status, result string
		resultCode     int
		state          provider.State
		msg, err       string
		outputs        int
	}{
		{"status_in_queue.json", "", 0, provider.StateQueued, "position 3", "", 0},
		{"status_in_progress.json", "", 0, provider.StateRunning, "40%", "", 0},
		{"status_completed.json", "result_kling.json", 200, provider.StateCompleted, "", "", 1},
		{"status_completed.json", "result_flux.json", 200, provider.StateCompleted, "", "", 1},
		{"status_completed.json", "result_flux_nsfw.json", 200, provider.StateFailed, "", "safety checker", 0},
		{"status_completed.json", "error_422.json", 422, provider.StateFailed, "", "body.prompt: The content could not be processed", 0},
	}
	for _, tc := range tests {
		t.Run(tc.status+"+"+tc.result, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Key k" {
					w.WriteHeader(401)
					return
				}
				switch r.URL.Path {
				case "/fal-ai/kling-video/requests/rid/status":
					w.WriteHeader(202)
					w.Write(read(tc.status))
				case "/fal-ai/kling-video/requests/rid":
					w.WriteHeader(tc.resultCode)
					w.Write(read(tc.result))
				default:
					w.WriteHeader(404)
				}
			}))
			defer srv.Close()
			p, _ := fal.New(fal.Config{Key: "k", QueueURL: srv.URL, RequestsPerMinute: -1})
			model := "fal-kling-1.6"
			if strings.Contains(tc.result, "flux") {
				model = "fal-flux-dev"
			}
			job, err := p.JobFor(model, "rid")
			if err != nil {
				t.Fatal(err)
			}
			// Flux lives under fal-ai/flux: point the job at the fixture paths.
			var d map[string]string
			json.Unmarshal(job.Data, &d)
			d["statusUrl"] = srv.URL + "/fal-ai/kling-video/requests/rid/status"
			d["responseUrl"] = srv.URL + "/fal-ai/kling-video/requests/rid"
			job.Data, _ = json.Marshal(d)
			st, err := p.Status(context.Background(), job)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != tc.state || !strings.Contains(st.Message, tc.msg) || !strings.Contains(st.Error, tc.err) || len(st.Outputs) != tc.outputs {
				t.Fatalf("%+v", st)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ model, mime string }{{"fal-flux-schnell", "image/png"}, {"fal-kling-1.6", "video/mp4"}} {
		t.Run(tc.model, func(t *testing.T) {
			em, p := setup(t, emulator.Options{}, nil)
			// Another request queued first: we are second in line.
			other, _ := p.Submit(ctx, req(t, p, tc.model, "other", "first"))
			r := req(t, p, tc.model, "gen-1", "a lighthouse")
			if tc.model == "fal-kling-1.6" {
				r.DurationSeconds = 5
			}
			job, err := p.Submit(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			var d map[string]string
			json.Unmarshal(job.Data, &d)
			if strings.Contains(d["statusUrl"], "/schnell/") || strings.Contains(d["statusUrl"], "/v1.6/") || !strings.HasPrefix(d["statusUrl"], em.Fal.URL) {
				t.Fatalf("status URL keeps the subpath or leaves the queue: %s", d["statusUrl"])
			}
			st, err := p.Status(ctx, job)
			if err != nil || st.State != provider.StateQueued || !strings.Contains(st.Message, "position 1") {
				t.Fatalf("queued: %+v %v", st, err)
			}
			m := model(t, p, tc.model)
			em.Advance(m.ExpectedDuration / 2)
			st, _ = p.Status(ctx, job)
			if st.State != provider.StateRunning || st.Progress <= 0 {
				t.Fatalf("running: %+v", st)
			}
			em.Advance(m.ExpectedDuration)
			st, err = p.Status(ctx, job)
			if err != nil || st.State != provider.StateCompleted || len(st.Outputs) != 1 || st.Outputs[0].MimeType != tc.mime {
				t.Fatalf("completed: %+v %v", st, err)
			}
			rc, err := p.OpenOutput(ctx, job, st.Outputs[0])
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if len(b) == 0 || (tc.mime == "image/png" && !bytes.Equal(b, emulator.PNG())) {
				t.Fatal("bad bytes")
			}
			_ = other
		})
	}
}

func TestFailures(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{}, nil)
	job, _ := p.Submit(ctx, req(t, p, "fal-flux-schnell", "f1", "x [fail]"))
	em.Advance(time.Minute)
	st, err := p.Status(ctx, job)
	if err != nil || st.State != provider.StateFailed || !strings.Contains(st.Error, "content checker") {
		t.Fatalf("%+v %v", st, err)
	}
	job, _ = p.Submit(ctx, req(t, p, "fal-flux-schnell", "f2", "x [nsfw]"))
	em.Advance(time.Minute)
	if st, _ := p.Status(ctx, job); st.State != provider.StateFailed || !strings.Contains(st.Error, "safety") {
		t.Fatalf("%+v", st)
	}
	if _, err := p.Submit(ctx, req(t, p, "fal-flux-schnell", "f3", "x [invalid]")); !isPermanent(err) || !strings.Contains(err.Error(), "content checker") {
		t.Fatalf("422: %v", err)
	}
	bad := newProvider(t, em, func(c *fal.Config) { c.Key = "nope" })
	if _, err := bad.Submit(ctx, req(t, p, "fal-flux-schnell", "f4", "x")); !isPermanent(err) {
		t.Fatalf("401: %v", err)
	}
	em.Inject(emulator.Rule{Op: emulator.OpCreate, Fault: emulator.Fault429, Times: 1, RetryAfter: 3 * time.Second})
	_, err = p.Submit(ctx, req(t, p, "fal-flux-schnell", "f5", "x"))
	if re, ok := retryable(err); !ok || re.After != 3*time.Second || !errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("429: %v", err)
	}
	em.Inject(emulator.Rule{Op: emulator.OpStatus, Fault: emulator.Fault500, Times: 1})
	if _, err := p.Status(ctx, job); err == nil {
		t.Fatal("500 hidden")
	} else if _, ok := retryable(err); !ok {
		t.Fatalf("500: %v", err)
	}
	em.Inject(emulator.Rule{Op: emulator.OpResult, Fault: emulator.Fault500, Times: 1})
	if _, err := p.Status(ctx, job); err == nil {
		t.Fatal("result 500 hidden")
	}
	if _, _, err := p.Find(ctx, "f1"); !errors.Is(err, provider.ErrUnsupported) {
		t.Fatalf("Find: %v", err)
	}
	if !p.ResubmitMayDuplicate() {
		t.Fatal("fal must declare DuplicateRisk")
	}
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		at     time.Duration
		ignore bool
		want   provider.State
		final  provider.State
	}{
		{"queued", 0, false, provider.StateCancelled, provider.StateCancelled},
		{"running", 60 * time.Second, false, provider.StateCancelled, provider.StateCancelled},
		{"running, app ignores it", 60 * time.Second, true, provider.StateRunning, provider.StateCompleted},
		{"already completed", 10 * time.Minute, false, provider.StateCompleted, provider.StateCompleted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			em, p := setup(t, emulator.Options{FalIgnoreCancelInProgress: tc.ignore}, func(c *fal.Config) { c.MaxConcurrent = 1 })
			job, err := p.Submit(ctx, req(t, p, "fal-kling-1.6", "c", "waves"))
			if err != nil {
				t.Fatal(err)
			}
			em.Advance(tc.at)
			st, err := p.Cancel(ctx, job)
			if err != nil || st.State != tc.want {
				t.Fatalf("cancel: %+v %v", st, err)
			}
			em.Advance(time.Hour)
			st, _ = p.Status(ctx, job)
			if st.State != tc.final {
				t.Fatalf("final %+v", st)
			}
			if p.Active() != 0 {
				t.Fatalf("slot still held: %d", p.Active())
			}
		})
	}
	em, p := setup(t, emulator.Options{}, nil)
	j, _ := p.JobFor("fal-kling-1.6", "unknown-request")
	if st, err := p.Cancel(ctx, j); err != nil || st.State != provider.StateCancelled {
		t.Fatalf("NOT_FOUND: %+v %v", st, err)
	}
	_ = em
}

func TestConcurrencyCap(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{}, func(c *fal.Config) { c.MaxConcurrent = 2; c.ConcurrencyRetry = 4 * time.Second })
	a, err := p.Submit(ctx, req(t, p, "fal-flux-dev", "a", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Submit(ctx, req(t, p, "fal-flux-dev", "b", "b")); err != nil {
		t.Fatal(err)
	}
	_, err = p.Submit(ctx, req(t, p, "fal-flux-dev", "c", "c"))
	if re, ok := retryable(err); !ok || re.After != 4*time.Second || !errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("full: %v", err)
	}
	if em.Count("fal", emulator.OpCreate) != 2 {
		t.Fatal("the third submit reached fal")
	}
	// A refused submit frees its slot at once.
	em.Inject(emulator.Rule{Op: emulator.OpCreate, Fault: emulator.Fault429, Times: 1})
	em.Advance(time.Minute)
	if st, _ := p.Status(ctx, a); st.State != provider.StateCompleted {
		t.Fatalf("%+v", st)
	}
	if _, err := p.Submit(ctx, req(t, p, "fal-flux-dev", "c", "c")); err == nil {
		t.Fatal("429 expected")
	}
	if _, err := p.Submit(ctx, req(t, p, "fal-flux-dev", "c", "c")); err != nil {
		t.Fatalf("after a slot freed: %v", err)
	}
}

// TestConcurrencyCapFreedElsewhere: in a fleet another replica may see a
// job end (it stepped the generation after a webhook, or took it over),
// and this process never does. A full cap asks fal about the slots held
// longer than the recheck and frees those that ended; younger slots are
// not asked about.
func TestConcurrencyCapFreedElsewhere(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{}, func(c *fal.Config) { c.MaxConcurrent = 1 })
	other := newProvider(t, em, nil) // another replica, on the same account
	a, err := p.Submit(ctx, req(t, p, "fal-flux-dev", "a", "a"))
	if err != nil {
		t.Fatal(err)
	}
	statuses := em.Count("fal", emulator.OpStatus)
	if _, err := p.Submit(ctx, req(t, p, "fal-flux-dev", "b", "b")); !errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("a second submit with the one slot just taken: %v", err)
	}
	if n := em.Count("fal", emulator.OpStatus); n != statuses {
		t.Fatalf("a slot younger than the recheck was asked about (%d status calls)", n-statuses)
	}
	em.Advance(time.Minute)
	if st, _ := other.Status(ctx, a); st.State != provider.StateCompleted { // seen there, not here
		t.Fatalf("%+v", st)
	}
	if p.Active() != 1 {
		t.Fatalf("active %d before the recheck", p.Active())
	}
	if _, err := p.Submit(ctx, req(t, p, "fal-flux-dev", "b", "b")); err != nil {
		t.Fatalf("after the job ended elsewhere: %v", err)
	}
	if p.Active() != 1 {
		t.Fatalf("active %d: the ended job's slot should be b's now", p.Active())
	}
}

// TestLostSubmitBoundByWebhook: the submit reply is lost, Find cannot
// tell, and the webhook carrying the key binds the job: no second job.
func TestLostSubmitBoundByWebhook(t *testing.T) {
	em, p := setup(t, emulator.Options{}, nil)
	rc := emulator.NewReceiver(p)
	defer rc.Close()
	em.Inject(emulator.Rule{Op: emulator.OpCreate, Fault: emulator.FaultLoseReply, Times: 1})
	d := &emulator.Driver{Em: em, P: p, Receiver: rc}
	res, err := d.Run(context.Background(), req(t, p, "fal-kling-1.6", "lost", "a lost reply"))
	if err != nil || res.Final.State != provider.StateCompleted || res.Submits != 1 || res.Finds != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if em.Jobs("fal") != 1 {
		t.Fatalf("jobs %d", em.Jobs("fal"))
	}
	// Without webhooks the driver (like the runner) must give up rather
	// than resubmit.
	em.Inject(emulator.Rule{Op: emulator.OpCreate, Fault: emulator.FaultLoseReply, Times: 1})
	d = &emulator.Driver{Em: em, P: p}
	if _, err := d.Run(context.Background(), req(t, p, "fal-kling-1.6", "lost2", "another")); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("no webhooks: %v", err)
	}
	if em.Jobs("fal") != 2 {
		t.Fatalf("jobs %d", em.Jobs("fal"))
	}
}

// TestChaos: 30% faults; every generation completes, none is created
// twice. Submits only see faults whose outcome is knowable (429) or that a
// webhook reconciles (lost reply); see the package comment of fal.
func TestChaos(t *testing.T) {
	em, p := setup(t, emulator.Options{}, func(c *fal.Config) { c.MaxConcurrent = 2 })
	rc := emulator.NewReceiver(p)
	defer rc.Close()
	all := []emulator.Fault{emulator.Fault429, emulator.Fault500, emulator.FaultDrop, emulator.FaultLoseReply}
	em.Chaos(0.3, 11, map[emulator.Op][]emulator.Fault{
		emulator.OpCreate: {emulator.Fault429, emulator.FaultLoseReply},
		emulator.OpStatus: all, emulator.OpResult: all, emulator.OpFile: all,
	})
	d := &emulator.Driver{Em: em, P: p, Receiver: rc}
	models := []string{"fal-flux-schnell", "fal-flux-dev", "fal-kling-1.6"}
	const n = 24
	for i := range n {
		res, err := d.Run(context.Background(), req(t, p, models[i%3], fmt.Sprintf("chaos-%d", i), fmt.Sprintf("prompt %d", i)))
		if err != nil || res.Final.State != provider.StateCompleted || len(res.Outputs) != 1 {
			t.Fatalf("job %d: %+v %v", i, res.Final, err)
		}
	}
	for prompt, c := range em.JobsByPrompt("fal") {
		if c != 1 {
			t.Errorf("%q created %d times", prompt, c)
		}
	}
	if em.Jobs("fal") != n {
		t.Fatalf("jobs %d", em.Jobs("fal"))
	}
	t.Logf("creates tried %d, status %d, results %d, files %d", em.Count("fal", emulator.OpCreate),
		em.Count("fal", emulator.OpStatus), em.Count("fal", emulator.OpResult), em.Count("files", emulator.OpFile))
}

func statusCalls(t testing.TB, webhooks bool, jitter func(time.Duration) time.Duration) (status, results int) {
	em := emulator.New(emulator.Options{})
	defer em.Close()
	p := newProvider(t, em, nil)
	d := &emulator.Driver{Em: em, P: p, Jitter: jitter}
	if webhooks {
		d.Receiver = emulator.NewReceiver(p)
		defer d.Receiver.Close()
	}
	res, err := d.Run(context.Background(), req(t, p, "fal-kling-1.6", "bench", "a 3 minute render"))
	if err != nil || res.Final.State != provider.StateCompleted {
		t.Fatalf("%+v %v", res, err)
	}
	return em.Count("fal", emulator.OpStatus), em.Count("fal", emulator.OpResult)
}

func TestStatusCallsPerGeneration(t *testing.T) {
	for range 20 {
		if n, _ := statusCalls(t, false, provider.Jitter(0.1)); n > 8 {
			t.Fatalf("polling: %d status calls (max 8)", n)
		}
		if n, _ := statusCalls(t, true, provider.Jitter(0.1)); n > 2 {
			t.Fatalf("webhooks: %d status calls (max 2)", n)
		}
	}
	s1, r1 := statusCalls(t, false, nil)
	s2, r2 := statusCalls(t, true, nil)
	t.Logf("3-minute video on fal: polling %d status + %d result calls; webhooks %d status + %d result calls (naive 1 s polling: 180)", s1, r1, s2, r2)
}

func BenchmarkStatusCallsPerGeneration(b *testing.B) {
	for _, webhooks := range []bool{false, true} {
		b.Run(fmt.Sprint("webhooks=", webhooks), func(b *testing.B) {
			total := 0
			for b.Loop() {
				n, _ := statusCalls(b, webhooks, provider.Jitter(0.1))
				total += n
			}
			b.ReportMetric(float64(total)/float64(b.N), "status-calls/gen")
		})
	}
}
