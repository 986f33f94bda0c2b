package replicate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/fetch"
	"github.com/darkroom-mcp/darkroom/provider/replicate"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

var testFetch = fetch.Options{Hosts: []string{"127.0.0.1"}, AllowHTTP: true, AllowPrivate: true}

func newProvider(t testing.TB, em *emulator.Emulator, mod func(*replicate.Config)) *replicate.Provider {
	t.Helper()
	cfg := replicate.Config{
		Token: "r8_test", BaseURL: em.Replicate.URL, WebhookSecret: emulator.DefaultWebhookSecret,
		CreatesPerMinute: -1, RequestsPerMinute: -1, Fetch: testFetch, Now: em.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := replicate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func setup(t testing.TB, o emulator.Options, mod func(*replicate.Config)) (*emulator.Emulator, *replicate.Provider) {
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
	return provider.Request{IdempotencyKey: key, Model: model(t, p, modelID), Prompt: prompt, AspectRatio: "16:9"}
}

func TestModels(t *testing.T) {
	_, p := setup(t, emulator.Options{}, nil)
	ms := p.Models()
	if len(ms) != 8 {
		t.Fatalf("models: %+v", ms)
	}
	for _, m := range ms {
		if m.Provider != "replicate" || m.ExpectedDuration <= 0 || m.Title == "" {
			t.Errorf("bad model %+v", m)
		}
	}
}

// TestGolden maps each documented prediction fixture onto a Status.
func TestGolden(t *testing.T) {
	tests := []struct {
		fixture  string
		state    provider.State
		progress float64
		err      string
		outputs  []string
		started  string // StartedAt, from started_at while it runs
	}{
		{"prediction_starting.json", provider.StateQueued, 0, "", nil, ""},
		{"prediction_processing.json", provider.StateRunning, 0.45, "", nil, "2025-01-15T16:19:39.10122Z"},
		{"prediction_succeeded.json", provider.StateCompleted, 1, "", []string{"https://replicate.delivery/xezq/abc123/out-0.png"}, ""},
		{"prediction_succeeded_video.json", provider.StateCompleted, 1, "", []string{"https://replicate.delivery/xezq/def456/tmpvideo.mp4"}, ""},
		{"prediction_failed.json", provider.StateFailed, 0, "NSFW content detected", nil, ""},
		{"prediction_canceled.json", provider.StateCancelled, 0, "", nil, ""},
		{"prediction_aborted.json", provider.StateFailed, 0, "deadline passed before it started", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			body, err := os.ReadFile("../../testdata/replicate/" + tc.fixture)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Path != "/v1/predictions/abc" {
					http.Error(w, "bad", 400)
					return
				}
				w.Write(body)
			}))
			defer srv.Close()
			p, err := replicate.New(replicate.Config{Token: "tok", BaseURL: srv.URL, CreatesPerMinute: -1, RequestsPerMinute: -1})
			if err != nil {
				t.Fatal(err)
			}
			st, err := p.Status(context.Background(), provider.Job{ID: "abc"})
			if err != nil {
				t.Fatal(err)
			}
			if st.State != tc.state || st.Progress != tc.progress || !strings.Contains(st.Error, tc.err) {
				t.Fatalf("got %+v", st)
			}
			if started := st.StartedAt.Format(time.RFC3339Nano); (tc.started == "") != st.StartedAt.IsZero() || tc.started != "" && started != tc.started {
				t.Fatalf("started at %s, want %q", started, tc.started)
			}
			var urls []string
			for _, o := range st.Outputs {
				urls = append(urls, o.URL)
			}
			if fmt.Sprint(urls) != fmt.Sprint(tc.outputs) {
				t.Fatalf("outputs %v, want %v", urls, tc.outputs)
			}
		})
	}
}

func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		model, ext string
		mime       string
	}{
		{"replicate-flux-schnell", "png", "image/png"},
		{"replicate-kling-1.6", "mp4", "video/mp4"},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			em, p := setup(t, emulator.Options{}, nil)
			r := req(t, p, tc.model, "gen-1", "a lighthouse")
			job, err := p.Submit(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			st, err := p.Status(ctx, job)
			if err != nil || st.State != provider.StateQueued || !strings.Contains(st.Message, "starting") {
				t.Fatalf("first status %+v %v", st, err)
			}
			m := model(t, p, tc.model)
			em.Advance(m.ExpectedDuration / 2)
			st, _ = p.Status(ctx, job)
			if st.State != provider.StateRunning || st.Progress <= 0 || !strings.Contains(st.Message, "%") {
				t.Fatalf("mid status %+v", st)
			}
			em.Advance(m.ExpectedDuration)
			st, _ = p.Status(ctx, job)
			if st.State != provider.StateCompleted || len(st.Outputs) != 1 || st.Outputs[0].MimeType != tc.mime || !strings.HasSuffix(st.Outputs[0].URL, tc.ext) {
				t.Fatalf("final status %+v", st)
			}
			rc, err := p.OpenOutput(ctx, job, st.Outputs[0])
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			want := emulator.PNG()
			if tc.ext == "mp4" {
				want = emulator.MP4()
			}
			if !bytes.Equal(b, want) {
				t.Fatal("output bytes differ")
			}
			// Outputs expire after an hour: Replicate removes the data.
			em.Advance(2 * time.Hour)
			if _, err := p.OpenOutput(ctx, job, st.Outputs[0]); !isPermanent(err) {
				t.Fatalf("expired output: %v", err)
			}
			st, _ = p.Status(ctx, job)
			if st.State != provider.StateFailed || !strings.Contains(st.Error, "deleted") {
				t.Fatalf("after expiry %+v", st)
			}
		})
	}
}

func isPermanent(err error) bool {
	var pe *provider.PermanentError
	return errors.As(err, &pe)
}

func isRetryable(err error) (*provider.RetryableError, bool) {
	var re *provider.RetryableError
	ok := errors.As(err, &re)
	return re, ok
}

func TestFailures(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{}, nil)
	// A failed prediction: failed state with Replicate's message.
	job, err := p.Submit(ctx, req(t, p, "replicate-flux-schnell", "g-fail", "a cat [fail]"))
	if err != nil {
		t.Fatal(err)
	}
	em.Advance(time.Minute)
	st, err := p.Status(ctx, job)
	if err != nil || st.State != provider.StateFailed || !strings.Contains(st.Error, "[fail]") {
		t.Fatalf("%+v %v", st, err)
	}
	// Safety filter.
	job, _ = p.Submit(ctx, req(t, p, "replicate-flux-schnell", "g-nsfw", "a cat [nsfw]"))
	em.Advance(time.Minute)
	st, _ = p.Status(ctx, job)
	if st.State != provider.StateFailed || !strings.Contains(st.Error, "NSFW") {
		t.Fatalf("%+v", st)
	}
	// 422: permanent with the provider's detail.
	_, err = p.Submit(ctx, req(t, p, "replicate-flux-schnell", "g-inv", "a cat [invalid]"))
	if !isPermanent(err) || !strings.Contains(err.Error(), "aspect_ratio must be") {
		t.Fatalf("422: %v", err)
	}
	// Input darkroom can tell is wrong never reaches Replicate.
	r := req(t, p, "replicate-kling-1.6", "g-ratio", "x")
	r.AspectRatio = "4:3"
	if _, err := p.Submit(ctx, r); !isPermanent(err) {
		t.Fatalf("ratio: %v", err)
	}
	// Bad token: 401 → permanent.
	bad := newProvider(t, em, func(c *replicate.Config) { c.Token = "wrong" })
	if _, err := bad.Submit(ctx, req(t, p, "replicate-flux-schnell", "g-401", "x")); !isPermanent(err) || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("401: %v", err)
	}
	// Unknown job.
	if _, err := p.Status(ctx, provider.Job{ID: "nope"}); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("404: %v", err)
	}
	if n := em.Jobs("replicate"); n != 2 {
		t.Fatalf("jobs %d", n)
	}
}

// TestDeadline: the deadline goes to Replicate as Cancel-After, never
// under its 5 s minimum: with less left the submit ends unsent, as
// darkroom's own "deadline passed".
func TestDeadline(t *testing.T) {
	ctx := context.Background()
	queue := func(string) (time.Duration, time.Duration) { return 10 * time.Second, 10 * time.Second }
	for _, tt := range []struct {
		left time.Duration
		sent bool // else refused before any request
	}{
		{7 * time.Second, true},
		{5 * time.Second, true},
		{4900 * time.Millisecond, false},
		{time.Second, false},
		{-time.Second, false},
	} {
		t.Run(tt.left.String(), func(t *testing.T) {
			em, p := setup(t, emulator.Options{Timing: queue}, nil)
			r := req(t, p, "replicate-kling-1.6", "g-dl", "slow boat")
			r.Deadline = em.Now().Add(tt.left)
			job, err := p.Submit(ctx, r)
			if !tt.sent {
				if !isPermanent(err) || !strings.Contains(err.Error(), "deadline passed") || em.Count("replicate", emulator.OpCreate) != 0 {
					t.Fatalf("%v left: %v after %d creates; want darkroom's refusal, unsent", tt.left, err, em.Count("replicate", emulator.OpCreate))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Queued 10 s, so the deadline aborts it before it starts.
			em.Advance(tt.left - time.Millisecond)
			if st, _ := p.Status(ctx, job); st.State != provider.StateQueued {
				t.Fatalf("before its deadline: %+v", st)
			}
			em.Advance(time.Millisecond)
			if st, _ := p.Status(ctx, job); st.State != provider.StateFailed || !strings.Contains(st.Error, "aborted") {
				t.Fatalf("at its deadline: %+v", st)
			}
		})
	}
	for d, want := range map[time.Duration]string{6 * time.Hour: "6h", 90 * time.Minute: "90m", 45 * time.Second: "45s", 5500 * time.Millisecond: "6s"} {
		if got := replicate.FormatCancelAfter(d); got != want {
			t.Errorf("FormatCancelAfter(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestCancel(t *testing.T) {
	ctx := context.Background()
	for _, at := range []time.Duration{0, 30 * time.Second} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			em, p := setup(t, emulator.Options{}, nil)
			job, err := p.Submit(ctx, req(t, p, "replicate-kling-1.6", "g-c", "waves"))
			if err != nil {
				t.Fatal(err)
			}
			em.Advance(at)
			st, err := p.Cancel(ctx, job)
			if err != nil || st.State != provider.StateCancelled {
				t.Fatalf("%+v %v", st, err)
			}
			em.Advance(time.Hour)
			st, _ = p.Status(ctx, job)
			if st.State != provider.StateCancelled {
				t.Fatalf("later %+v", st)
			}
		})
	}
}

func TestHTTPFaults(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{}, nil)
	r := req(t, p, "replicate-flux-schnell", "g-f", "x")

	em.Inject(emulator.Rule{Op: emulator.OpCreate, Fault: emulator.Fault429, Times: 1, RetryAfter: 7 * time.Second})
	_, err := p.Submit(ctx, r)
	if re, ok := isRetryable(err); !ok || re.After != 7*time.Second || !errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("429: %v", err)
	}
	em.Inject(emulator.Rule{Op: emulator.OpCreate, Fault: emulator.Fault500, Times: 1})
	_, err = p.Submit(ctx, r)
	if _, ok := isRetryable(err); !ok || errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("500: %v", err)
	}
	em.Inject(emulator.Rule{Op: emulator.OpCreate, Fault: emulator.FaultDrop, Times: 1})
	_, err = p.Submit(ctx, r)
	if _, ok := isRetryable(err); !ok || errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("drop: %v", err)
	}
	job, err := p.Submit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	// (A dropped GET is retried by net/http itself, so it is not listed.)
	for _, f := range []emulator.Fault{emulator.Fault429, emulator.Fault500} {
		em.Inject(emulator.Rule{Op: emulator.OpStatus, Fault: f, Times: 1})
		if _, err := p.Status(ctx, job); err == nil {
			t.Fatalf("%s: no error", f)
		} else if _, ok := isRetryable(err); !ok {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := p.Status(ctx, job); err != nil {
		t.Fatal(err)
	}
	if n := em.Jobs("replicate"); n != 1 {
		t.Fatalf("jobs %d", n)
	}
}

func TestSlowResponse(t *testing.T) {
	em, p := setup(t, emulator.Options{}, func(c *replicate.Config) { c.RequestTimeout = 50 * time.Millisecond })
	job, err := p.Submit(context.Background(), req(t, p, "replicate-flux-schnell", "g-s", "x"))
	if err != nil {
		t.Fatal(err)
	}
	em.Inject(emulator.Rule{Op: emulator.OpStatus, Fault: emulator.FaultSlow, Times: 1})
	_, err = p.Status(context.Background(), job)
	if _, ok := isRetryable(err); !ok {
		t.Fatalf("slow: %v", err)
	}
}

func TestRateLimit(t *testing.T) {
	// Limiters are shared per token for the process: a fresh token per run.
	tok := fmt.Sprintf("r8_ratelimited_%d", time.Now().UnixNano())
	em, p := setup(t, emulator.Options{ReplicateToken: tok}, func(c *replicate.Config) {
		c.Token = tok
		c.CreatesPerMinute = 1 // burst 1
		c.MaxRateWait = -1
	})
	ctx := context.Background()
	if _, err := p.Submit(ctx, req(t, p, "replicate-flux-schnell", "a", "x")); err != nil {
		t.Fatal(err)
	}
	_, err := p.Submit(ctx, req(t, p, "replicate-flux-schnell", "b", "x"))
	re, ok := isRetryable(err)
	if !ok || re.After < 50*time.Second || !errors.Is(err, provider.ErrNotCreated) {
		t.Fatalf("limited: %v", err)
	}
	if n := em.Count("replicate", emulator.OpCreate); n != 1 {
		t.Fatalf("creates reached Replicate: %d", n)
	}
	em.Advance(time.Minute)
	if _, err := p.Submit(ctx, req(t, p, "replicate-flux-schnell", "b", "x")); err != nil {
		t.Fatalf("after a minute: %v", err)
	}
}

// TestFindLostReply: the create succeeds but its reply is lost; Find
// reconciles without a second job, in-process and after a restart.
func TestFindLostReply(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		restart  bool
		seed     int64
		webhooks bool
		echo     bool
		found    bool
	}{
		{"same process", false, 0, false, false, true},
		{"same process, own seed", false, 99, false, false, true},
		{"restart, derived seed", true, 0, false, false, true},
		{"restart, own seed, no webhook", true, 99, false, false, false},
		{"restart, own seed, echoed webhook", true, 99, true, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			em, p := setup(t, emulator.Options{EchoWebhook: tc.echo}, nil)
			// Unrelated predictions around ours.
			for i := range 3 {
				if _, err := p.Submit(ctx, req(t, p, "replicate-flux-schnell", fmt.Sprint("other-", i), "a lighthouse")); err != nil {
					t.Fatal(err)
				}
			}
			r := req(t, p, "replicate-flux-schnell", "gen-lost", "a lighthouse")
			r.Seed = tc.seed
			if tc.webhooks {
				r.WebhookURL = "https://darkroom.example/webhooks/replicate"
			}
			em.Inject(emulator.Rule{Op: emulator.OpCreate, Fault: emulator.FaultLoseReply, Times: 1})
			if _, err := p.Submit(ctx, r); err == nil || errors.Is(err, provider.ErrNotCreated) {
				t.Fatalf("lost reply: %v", err)
			}
			if _, err := p.Submit(ctx, req(t, p, "replicate-flux-schnell", "other-after", "a lighthouse")); err != nil {
				t.Fatal(err)
			}
			em.Advance(10 * time.Second)
			finder := p
			if tc.restart {
				finder = newProvider(t, em, nil)
			}
			job, ok, err := finder.Find(ctx, "gen-lost")
			if err != nil || ok != tc.found {
				t.Fatalf("find: ok=%v err=%v", ok, err)
			}
			if ok {
				// The job found is the lost one (4th created).
				st, err := finder.Status(ctx, job)
				if err != nil || st.State != provider.StateCompleted {
					t.Fatalf("%+v %v", st, err)
				}
				if !strings.HasPrefix(job.ID, "emu") || job.ID != fmt.Sprintf("emu%023d", 4) {
					t.Fatalf("found %s", job.ID)
				}
			}
			if n := em.Jobs("replicate"); n != 5 {
				t.Fatalf("jobs %d", n)
			}
			if _, ok, _ := finder.Find(ctx, "never-submitted"); ok {
				t.Fatal("found a job never submitted")
			}
		})
	}
}

func TestFindPagesAndWindow(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{PageSize: 2}, func(c *replicate.Config) { c.FindPages = 5 })
	if _, err := p.Submit(ctx, req(t, p, "replicate-flux-schnell", "early", "x")); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		p.Submit(ctx, req(t, p, "replicate-flux-schnell", fmt.Sprint("n", i), "x"))
	}
	// Page 3 holds it.
	if _, ok, err := newProvider(t, em, func(c *replicate.Config) { c.FindPages = 5 }).Find(ctx, "early"); !ok || err != nil {
		t.Fatalf("paged find: %v %v", ok, err)
	}
	if _, ok, _ := newProvider(t, em, func(c *replicate.Config) { c.FindPages = 2 }).Find(ctx, "early"); ok {
		t.Fatal("found beyond FindPages")
	}
	em.Advance(3 * time.Hour)
	if _, ok, _ := p.Find(ctx, "early"); ok {
		t.Fatal("found beyond FindWindow")
	}
	// A failing list is an error, not "not found".
	em.Inject(emulator.Rule{Op: emulator.OpList, Fault: emulator.Fault500, Times: 1})
	if _, _, err := p.Find(ctx, "x"); err == nil {
		t.Fatal("list 500 hidden")
	}
}

func TestWebhooks(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{}, nil)
	rc := emulator.NewReceiver(p)
	defer rc.Close()
	r := req(t, p, "replicate-flux-schnell", "gen-wh", "a fox")
	r.WebhookURL = rc.URL()
	job, err := p.Submit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	em.Advance(time.Minute)
	ds := em.Deliveries()
	if len(ds) != 2 { // start, completed
		t.Fatalf("deliveries %d", len(ds))
	}
	var evs []provider.WebhookEvent
	for range 2 {
		evs = append(evs, <-rc.Events)
	}
	if evs[0].Status.State != provider.StateRunning && evs[0].Status.State != provider.StateQueued {
		t.Fatalf("start event %+v", evs[0].Status)
	}
	last := evs[1]
	// The key in the URL is not signed: it never reaches the event.
	if !last.Trusted || last.JobID != job.ID || last.Key != "" || last.Status.State != provider.StateCompleted || len(last.Status.Outputs) != 1 {
		t.Fatalf("completed event %+v", last)
	}
	u, _ := url.Parse(ds[0].URL)
	if u.Query().Get(provider.WebhookKeyParam) != "gen-wh" {
		t.Fatalf("webhook url %s", ds[0].URL)
	}
	// A retry or replay of the same webhook-id is a duplicate.
	if code := em.Redeliver(1); code != 200 {
		t.Fatalf("redeliver %d", code)
	}
	if ev := <-rc.Events; !ev.Duplicate {
		t.Fatalf("replay not flagged: %+v", ev)
	}

	d := ds[1]
	hdr := func(mut func(h http.Header)) http.Header {
		h := d.Header.Clone()
		mut(h)
		return h
	}
	now := strconv.FormatInt(em.Now().Unix(), 10)
	stale := strconv.FormatInt(em.Now().Add(-6*time.Minute).Unix(), 10)
	otherSecret := "whsec_" + "c2VjcmV0LXRoYXQtaXMtbm90LW91cnM="
	tests := []struct {
		name string
		h    http.Header
		body []byte
		ok   bool
	}{
		{"fresh id, good signature", hdr(func(h http.Header) {
			h.Set("Webhook-Id", "msg_new1")
			h.Set("Webhook-Timestamp", now)
			h.Set("Webhook-Signature", emulator.SignStandard(emulator.DefaultWebhookSecret, "msg_new1", now, d.Body))
		}), d.Body, true},
		{"several signatures, one good", hdr(func(h http.Header) {
			h.Set("Webhook-Id", "msg_new2")
			h.Set("Webhook-Timestamp", now)
			h.Set("Webhook-Signature", emulator.SignStandard(otherSecret, "msg_new2", now, d.Body)+" v1a,xyz "+emulator.SignStandard(emulator.DefaultWebhookSecret, "msg_new2", now, d.Body))
		}), d.Body, true},
		{"bad signature", hdr(func(h http.Header) {
			h.Set("Webhook-Id", "msg_new3")
			h.Set("Webhook-Signature", emulator.SignStandard(otherSecret, "msg_new3", h.Get("Webhook-Timestamp"), d.Body))
		}), d.Body, false},
		{"tampered body", d.Header, bytes.Replace(d.Body, []byte("succeeded"), []byte("failed\u0020"), 1), false},
		{"stale timestamp", hdr(func(h http.Header) {
			h.Set("Webhook-Id", "msg_new4")
			h.Set("Webhook-Timestamp", stale)
			h.Set("Webhook-Signature", emulator.SignStandard(emulator.DefaultWebhookSecret, "msg_new4", stale, d.Body))
		}), d.Body, false},
		{"missing signature", hdr(func(h http.Header) { h.Del("Webhook-Signature") }), d.Body, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := p.ParseWebhook(ctx, tc.h, url.Values{provider.WebhookKeyParam: {"someone-else"}}, tc.body)
			if tc.ok {
				if err != nil || ev.Duplicate || !ev.Trusted || ev.Key != "" {
					t.Fatalf("%+v %v", ev, err)
				}
			} else if !errors.Is(err, provider.ErrWebhookUnauthenticated) {
				t.Fatalf("accepted: %+v %v", ev, err)
			}
		})
	}
	// No secret configured: nothing verifies; the claim is passed on only
	// as the job to re-read.
	ns := newProvider(t, em, func(c *replicate.Config) { c.WebhookSecret = "" })
	if ev, err := ns.ParseWebhook(ctx, d.Header, nil, d.Body); !errors.Is(err, provider.ErrWebhookUnverifiable) || ev.Trusted || ev.JobID != job.ID || ev.Status != nil {
		t.Fatal(ev, err)
	}
	if err := ns.LoadWebhookSecret(ctx); err != nil {
		t.Fatal(err)
	}
	h := hdr(func(h http.Header) {
		h.Set("Webhook-Id", "msg_new5")
		h.Set("Webhook-Timestamp", now)
		h.Set("Webhook-Signature", emulator.SignStandard(emulator.DefaultWebhookSecret, "msg_new5", now, d.Body))
	})
	if _, err := ns.ParseWebhook(ctx, h, nil, d.Body); err != nil {
		t.Fatalf("after LoadWebhookSecret: %v", err)
	}
}

func TestOutputPolicy(t *testing.T) {
	ctx := context.Background()
	em, p := setup(t, emulator.Options{}, func(c *replicate.Config) { c.Fetch = fetch.Options{AllowHTTP: true, AllowPrivate: true} }) // default hosts
	job, _ := p.Submit(ctx, req(t, p, "replicate-flux-schnell", "g", "x"))
	em.Advance(time.Minute)
	st, _ := p.Status(ctx, job)
	if _, err := p.OpenOutput(ctx, job, st.Outputs[0]); !isPermanent(err) || !strings.Contains(err.Error(), "allowlist") {
		t.Fatalf("emulator host is not replicate.delivery: %v", err)
	}
	if _, err := p.OpenOutput(ctx, job, provider.Output{URL: "https://169.254.169.254/latest/meta-data"}); !isPermanent(err) {
		t.Fatalf("metadata: %v", err)
	}
}

// TestChaos: 30% of every kind of call fails in every way; each generation
// still completes, and none is created twice.
func TestChaos(t *testing.T) {
	for _, webhooks := range []bool{false, true} {
		t.Run(fmt.Sprint("webhooks=", webhooks), func(t *testing.T) {
			em, p := setup(t, emulator.Options{}, nil)
			all := []emulator.Fault{emulator.Fault429, emulator.Fault500, emulator.FaultDrop, emulator.FaultLoseReply}
			em.Chaos(0.3, 7, map[emulator.Op][]emulator.Fault{
				emulator.OpCreate: all, emulator.OpStatus: all, emulator.OpList: all, emulator.OpFile: all,
			})
			d := &emulator.Driver{Em: em, P: p}
			if webhooks {
				d.Receiver = emulator.NewReceiver(p)
				defer d.Receiver.Close()
			}
			models := []string{"replicate-flux-schnell", "replicate-flux-dev", "replicate-kling-1.6"}
			const n = 24
			for i := range n {
				r := req(t, p, models[i%3], fmt.Sprintf("chaos-%d", i), fmt.Sprintf("prompt %d", i))
				if i%2 == 1 {
					r.Seed = int64(1000 + i)
				}
				res, err := d.Run(context.Background(), r)
				if err != nil || res.Final.State != provider.StateCompleted || len(res.Outputs) != 1 {
					t.Fatalf("job %d: %+v %v", i, res.Final, err)
				}
			}
			for prompt, c := range em.JobsByPrompt("replicate") {
				if c != 1 {
					t.Errorf("%q created %d times", prompt, c)
				}
			}
			if got := em.Jobs("replicate"); got != n {
				t.Fatalf("jobs %d, want %d", got, n)
			}
			t.Logf("creates tried %d, status calls %d, list calls %d, file calls %d",
				em.Count("replicate", emulator.OpCreate), em.Count("replicate", emulator.OpStatus),
				em.Count("replicate", emulator.OpList), em.Count("files", emulator.OpFile))
		})
	}
}

// statusCalls drives one 3-minute video and returns the status requests
// that reached Replicate.
func statusCalls(t testing.TB, webhooks bool, jitter func(time.Duration) time.Duration) int {
	em := emulator.New(emulator.Options{})
	defer em.Close()
	p := newProvider(t, em, nil)
	d := &emulator.Driver{Em: em, P: p, Jitter: jitter}
	if webhooks {
		d.Receiver = emulator.NewReceiver(p)
		defer d.Receiver.Close()
	}
	r := req(t, p, "replicate-kling-1.6", "bench", "a 3 minute render")
	res, err := d.Run(context.Background(), r)
	if err != nil || res.Final.State != provider.StateCompleted {
		t.Fatalf("%+v %v", res, err)
	}
	if res.Elapsed < 3*time.Minute || res.Elapsed > 4*time.Minute {
		t.Fatalf("elapsed %v", res.Elapsed)
	}
	return em.Count("replicate", emulator.OpStatus)
}

func TestStatusCallsPerGeneration(t *testing.T) {
	for range 20 {
		if n := statusCalls(t, false, provider.Jitter(0.1)); n > 8 {
			t.Fatalf("polling: %d status calls for a 3-minute video (max 8)", n)
		}
		if n := statusCalls(t, true, provider.Jitter(0.1)); n > 2 {
			t.Fatalf("webhooks: %d status calls for a 3-minute video (max 2)", n)
		}
	}
	t.Logf("3-minute video on Replicate: %d status calls polling, %d with webhooks (naive 1 s polling: 180)",
		statusCalls(t, false, nil), statusCalls(t, true, nil))
}

func BenchmarkStatusCallsPerGeneration(b *testing.B) {
	for _, webhooks := range []bool{false, true} {
		b.Run(fmt.Sprint("webhooks=", webhooks), func(b *testing.B) {
			total := 0
			for b.Loop() {
				total += statusCalls(b, webhooks, provider.Jitter(0.1))
			}
			b.ReportMetric(float64(total)/float64(b.N), "status-calls/gen")
		})
	}
}
