package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/testdata/emulator"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// checkArgs are the flags that point every provider at rig, each with
// its key; Vertex AI with the emulator's service account.
func checkArgs(t *testing.T, rig *emuRig) []string {
	t.Helper()
	creds := filepath.Join(t.TempDir(), "service-account.json")
	if err := os.WriteFile(creds, rig.ServiceAccountJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{
		"--replicate-api-token", "r8_test", "--replicate-base-url", rig.Replicate.URL,
		"--fal-key", "fal_test", "--fal-queue-url", rig.Fal.URL, "--fal-api-url", rig.Fal.URL, "--fal-openapi-url", rig.Fal.URL,
		"--gemini-api-key", "gemini_test", "--gemini-base-url", rig.Google.URL,
		"--openai-api-key", "sk-test", "--openai-base-url", rig.OpenAI.URL,
		"--google-project", emulator.DefaultVertexProject, "--google-location", emulator.DefaultVertexLocation,
		"--google-credentials", creds, "--vertex-base-url", rig.Vertex.URL,
	}
}

// TestModelsCheck runs `darkroom models check` against the emulator: all
// listed exits 0; a model each vendor withdrew (Unlist) is named and
// exits 1, and listed again, exits 0; a refused key is said as such; a
// provider not configured names the setting it needs and fails nothing.
func TestModelsCheck(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	args := checkArgs(t, rig)
	check := func(extra ...string) (int, string, checkReport) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(append([]string{"models", "check", "--json"}, args...), extra...), &out, &errOut)
		var r checkReport
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("exit %d, not a report: %v\n%s\n%s", code, err, out.String(), errOut.String())
		}
		return code, errOut.String(), r
	}
	states := func(r checkReport) map[string]string {
		out := map[string]string{}
		for _, p := range r.Providers {
			out[p.Name] = p.State
			for _, m := range p.Models {
				out[m.ID] = m.State
			}
		}
		return out
	}

	code, stderr, r := check()
	s := states(r)
	if code != 0 || !r.OK {
		t.Fatalf("all listed: exit %d, %s %+v", code, stderr, r)
	}
	for id, want := range map[string]string{
		"replicate": "ok", "fal": "ok", "google": "ok", "openai": "ok",
		"replicate-flux-schnell": "listed", "fal-flux-schnell": "listed", "google-omni-1.2-flash": "listed",
		"google-gemini-3.1-flash-image": "listed", "google-veo-3.1": "not checked", "openai-gpt-image-2": "listed",
	} {
		if s[id] != want {
			t.Errorf("%s: %q, want %q", id, s[id], want)
		}
	}

	// Each vendor withdraws one model: each is named, and the check fails.
	withdrawn := map[string][2]string{
		"replicate-flux-schnell":        {"replicate", "black-forest-labs/flux-schnell"},
		"fal-flux-schnell":              {"fal", "fal-ai/flux/schnell"},
		"google-gemini-3.1-flash-image": {"google", "gemini-3.1-flash-image"},
		"openai-gpt-image-2":            {"openai", "gpt-image-2"},
	}
	for _, w := range withdrawn {
		rig.Unlist(w[0], w[1])
	}
	rig.Unlist("openai", "gpt-image-2-2026-04-21") // the OpenAI ids' next target too
	code, stderr, r = check()
	s = states(r)
	if code != 1 || r.OK || !strings.Contains(stderr, "not served") {
		t.Fatalf("withdrawn: exit %d, %s", code, stderr)
	}
	for id := range withdrawn {
		if s[id] != "not listed" {
			t.Errorf("%s: %q, want not listed", id, s[id])
		}
	}
	if s["google-gemini-2.5-flash-image"] != "not listed" || s["google-omni-1.2-flash"] != "listed" {
		t.Errorf("the former id that calls the withdrawn model, or a model still listed: %v", s)
	}
	for _, w := range withdrawn {
		rig.Relist(w[0], w[1])
	}
	rig.Relist("openai", "gpt-image-2-2026-04-21")
	if code, stderr, _ := check(); code != 0 {
		t.Fatalf("listed again: exit %d, %s", code, stderr)
	}

	// A key OpenAI refuses; Vertex not set up.
	code, _, r = check("--openai-api-key", "sk-wrong", "--google-project", "")
	s = states(r)
	if code != 1 || s["openai"] != "credentials refused" || s["google-veo-3.1"] != "not configured" || s["google"] != "ok" {
		t.Fatalf("refused key, no Vertex: exit %d, %v", code, s)
	}
}

// TestModelsCheckText: the text report names each model, its vendor model
// and its state, one a line.
func TestModelsCheckText(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), append([]string{"models", "check"}, checkArgs(t, rig)...), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"google: ok", "google-omni-1.2-flash", "gemini-omni-1.2-flash", "listed", "google-veo-3.1", "not checked", "every curated model"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("darkroom models check against the emulator:\n%s", out.String())
}

// TestModelsCheckAllow: each allow pattern is reported with how many of
// its provider's models it allows (a typo matches nothing); the patterns
// do not change the exit status.
func TestModelsCheckAllow(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	var out, errOut bytes.Buffer
	args := append([]string{"models", "check", "--json", "--models-allow", "replicate:black-forest-labs/*,replicate:black-forest-labz/*,fal:fal-ai/flux/*"}, checkArgs(t, rig)...)
	if code := run(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	var r checkReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	got := map[string]allowCheck{}
	for _, a := range r.Allow {
		got[a.Pattern] = a
	}
	for pattern, want := range map[string]allowCheck{
		"replicate:black-forest-labs/*": {Matches: 5, State: "ok"},
		"replicate:black-forest-labz/*": {Matches: 0, State: "matches nothing"},
		"fal:fal-ai/flux/*":             {Matches: 2, State: "ok"},
	} {
		if g := got[pattern]; g.Matches != want.Matches || g.State != want.State {
			t.Errorf("%s: %+v; want %d models, %s", pattern, g, want.Matches, want.State)
		}
	}
}

// offeredModels are the ids list_models offers.
func offeredModels(t *testing.T, cs *mcp.ClientSession) map[string]bool {
	t.Helper()
	var l struct {
		Models []struct {
			ID string `json:"modelId"`
		} `json:"models"`
	}
	call(t, cs, "list_models", map[string]any{}, &l)
	out := map[string]bool{}
	for _, m := range l.Models {
		out[m.ID] = true
	}
	return out
}

// TestModelWithdrawn: a model its vendor stops listing leaves list_models
// and search_models at the next refresh, and generate and describe_model
// refuse it for free, saying why; an outage withdraws nothing; listed
// again, it comes back.
func TestModelWithdrawn(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := vendorServer(t, rig, "google")
	cs := connect(t, s.url, "2026-07-28")
	ctx := context.Background()
	listed := func() map[string]bool { return offeredModels(t, cs) }
	// The former ids that call the same vendor model go with it.
	calling := []string{"google-gemini-3.1-flash-image", "google-gemini-2.5-flash-image", "google-imagen-4"}

	s.app.refreshModels(ctx)
	if l := listed(); !l[calling[0]] || !l["google-omni-1.2-flash"] {
		t.Fatalf("all listed: %v", l)
	}
	rig.Unlist("google", "gemini-3.1-flash-image")
	s.app.refreshModels(ctx)
	l := listed()
	for _, id := range calling {
		if l[id] {
			t.Errorf("%s still offered", id)
		}
	}
	if !l["google-gemini-3-pro-image"] || !l["google-omni-1.2-flash"] {
		t.Fatalf("other models withdrawn too: %v", l)
	}
	if code, checks := readyz(t, s.url); code != 200 || checks["models"] != "withdrawn" {
		t.Fatalf("readyz with models withdrawn: %d %v (advisory: still 200)", code, checks)
	}
	res := call(t, cs, "generate", map[string]any{"modelId": calling[0], "prompt": "a fox"}, nil)
	if !res.IsError || !strings.Contains(text(res), "Google no longer lists gemini-3.1-flash-image") {
		t.Fatalf("generate of a withdrawn model: %s", text(res))
	}
	var d struct {
		Available bool   `json:"available"`
		Reason    string `json:"unavailableReason"`
		Successor string `json:"successor"`
	}
	if res := call(t, cs, "describe_model", map[string]any{"modelId": calling[1]}, &d); res.IsError || d.Available || !strings.Contains(d.Reason, "Google no longer lists gemini-3.1-flash-image") {
		t.Fatalf("describe_model of a withdrawn model: %s", text(res))
	}
	// A withdrawn model with a successor names it, in describe_model and
	// in generate's refusal.
	rig.Unlist("google", "gemini-3.1-flash-lite-image")
	s.app.refreshModels(ctx)
	if res := call(t, cs, "describe_model", map[string]any{"modelId": "google-imagen-4-fast"}, &d); res.IsError || d.Available || d.Successor != "google-gemini-3.1-flash-image" || !strings.Contains(text(res), "use google-gemini-3.1-flash-image instead") {
		t.Fatalf("describe_model of a withdrawn model with a successor: %s", text(res))
	}
	if res := call(t, cs, "generate", map[string]any{"modelId": "google-imagen-4-fast", "prompt": "a fox"}, nil); !res.IsError || !strings.Contains(text(res), "use google-gemini-3.1-flash-image instead") {
		t.Fatalf("generate of a withdrawn model with a successor: %s", text(res))
	}
	rig.Relist("google", "gemini-3.1-flash-lite-image")
	d.Reason, d.Successor = "", ""
	if res := call(t, cs, "describe_model", map[string]any{"modelId": "google-gemini-3-pro-image"}, &d); res.IsError || !d.Available || d.Reason != "" {
		t.Fatalf("describe_model of a listed model: %s", text(res))
	}
	var found struct {
		Models []struct {
			ID string `json:"modelId"`
		} `json:"models"`
	}
	call(t, cs, "search_models", map[string]any{"query": "gemini"}, &found)
	offered := map[string]bool{}
	for _, m := range found.Models {
		offered[m.ID] = true
	}
	if offered[calling[0]] || !offered["google-gemini-3-pro-image"] {
		t.Errorf("search_models offers a withdrawn model, or not the others: %v", found)
	}
	var credits map[string]any
	call(t, cs, "get_credits", map[string]any{}, &credits)
	if credits["spent"] != float64(0) || rig.Jobs("google") != 0 {
		t.Fatalf("a refused model cost %v credits and made %d jobs", credits["spent"], rig.Jobs("google"))
	}

	// Listed again: back.
	rig.Relist("google", "gemini-3.1-flash-image")
	s.app.refreshModels(ctx)
	if l := listed(); !l[calling[0]] || !l[calling[2]] {
		t.Fatalf("listed again: %v", l)
	}
	// An outage withdraws nothing: the last listing stands.
	rig.Unlist("google", "gemini-3.1-flash-image")
	rig.Inject(emulator.Rule{Provider: "google", Op: emulator.OpStatus, Fault: emulator.Fault500})
	s.app.refreshModels(ctx)
	rig.ClearFaults()
	if l := listed(); !l[calling[0]] {
		t.Fatalf("an outage withdrew %s", calling[0])
	}
	var w genView
	if res := call(t, cs, "generate", map[string]any{"modelId": "google-gemini-3-pro-image", "prompt": "a fox", "wait": true, "waitSeconds": 30}, &w); res.IsError || w.Status != "completed" {
		t.Fatalf("a listed model: %s", text(res))
	}
}

// TestModelAliasRunsItsNextTarget: when OpenAI no longer lists
// gpt-image-2, the curated ids that name it stay offered and run their
// next target, the dated snapshot; models check says which it runs; when
// gpt-image-2 is listed again, they run it again.
func TestModelAliasRunsItsNextTarget(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := vendorServer(t, rig, "openai")
	cs := connect(t, s.url, "2026-07-28")
	ctx := context.Background()
	generate := func(prompt string) string {
		t.Helper()
		var w genView
		if res := call(t, cs, "generate", map[string]any{"modelId": "openai-gpt-image-2", "prompt": prompt, "wait": true, "waitSeconds": 30}, &w); res.IsError || w.Status != "completed" {
			t.Fatalf("generate: %s", text(res))
		}
		in := rig.Inputs("openai")
		m, _ := in[len(in)-1]["model"].(string)
		return m
	}
	rig.Unlist("openai", "gpt-image-2")
	s.app.refreshModels(ctx)
	if got := generate("a kite"); got != "gpt-image-2-2026-04-21" {
		t.Fatalf("with gpt-image-2 unlisted the alias ran %q", got)
	}
	var out, errOut bytes.Buffer
	args := []string{"models", "check", "--openai-api-key", "sk-test", "--openai-base-url", rig.OpenAI.URL,
		"--replicate-api-token", "", "--fal-key", "", "--gemini-api-key", "", "--google-project", ""}
	if code := run(ctx, args, &out, &errOut); code != 0 || !strings.Contains(out.String(), "gpt-image-2-2026-04-21  listed (its next target: gpt-image-2 is not)") {
		t.Fatalf("check: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	rig.Relist("openai", "gpt-image-2")
	s.app.refreshModels(ctx)
	if got := generate("a boat"); got != "gpt-image-2" {
		t.Fatalf("listed again, the alias ran %q", got)
	}
}

// TestModelListingOncePerFleet: three replicas on one PostgreSQL database
// refreshing together ask OpenAI for its model list once between them,
// and not again while the stored listing is fresh; a model the vendor
// stops listing is hidden by all three within one refresh (the one whose
// claim wins asks, the others read what it stored); an outage hides
// nothing, on a replica that restarts during it too; listed again, it
// comes back.
func TestModelListingOncePerFleet(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	db := sharedDatabase(t)
	const refresh = time.Hour
	clock := time.Now()
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); clock = clock.Add(d) }
	replica := func() *testServer {
		return vendorServer(t, rig, "openai", db, func(c *config) { c.ModelsRefresh, c.modelsNow = refresh, now })
	}
	fleet := []*testServer{replica(), replica(), replica()}
	refreshAll := func() {
		var wg sync.WaitGroup
		for _, s := range fleet {
			wg.Go(func() { s.app.refreshModels(context.Background()) })
		}
		wg.Wait()
	}
	// Each replica's watch looked at start: the first asked, the others
	// read what it stored (or asked too, when their claim came first:
	// that is the first refresh). Count from here.
	eventually(t, 10*time.Second, func() bool { return rig.Listings("openai") >= 1 }, "the first listing")
	asked := rig.Listings("openai")
	refreshAll()
	advance(refresh / 2)
	refreshAll()
	if n := rig.Listings("openai") - asked; n > 1 {
		t.Fatalf("three replicas asked OpenAI %d times within one refresh; want at most once", n)
	}
	offered := func(s *testServer, id string) bool { return s.app.svc.Available(id) }
	rig.Unlist("openai", "gpt-image-2")
	rig.Unlist("openai", "gpt-image-2-2026-04-21")
	asked = rig.Listings("openai")
	advance(refresh) // one refresh later: stale for all
	// Replica 0 claims the ask and OpenAI holds it; meanwhile the others
	// look and must not ask (a replica that did would wait on OpenAI
	// until its context ends, and be counted).
	rig.Inject(emulator.Rule{Provider: "openai", Op: emulator.OpStatus, Fault: emulator.FaultSlow})
	before := rig.Count("openai", emulator.OpStatus)
	done := make(chan struct{})
	go func() { fleet[0].app.refreshModels(context.Background()); close(done) }()
	<-rig.SlowHits()
	for _, s := range fleet[1:] {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.app.refreshModels(ctx)
		cancel()
	}
	if n := rig.Count("openai", emulator.OpStatus) - before; n != 1 {
		t.Fatalf("while one replica asked OpenAI, the fleet asked %d times; want once", n)
	}
	rig.ClearFaults()
	rig.Release()
	<-done
	if n := rig.Listings("openai") - asked; n != 1 {
		t.Fatalf("a stale listing: the fleet asked %d times; want once", n)
	}
	// The replicas whose claim lost read the stored listing at their next
	// look, a tenth of a refresh later.
	advance(refresh / 10)
	refreshAll()
	for i, s := range fleet {
		if offered(s, "openai-gpt-image-2") {
			t.Fatalf("replica %d still offers openai-gpt-image-2 within one refresh of its withdrawal", i)
		}
	}
	if n := rig.Listings("openai") - asked; n != 1 {
		t.Fatalf("the fleet asked %d times for one stale listing", n)
	}
	// An outage hides nothing new, and a replica restarted during it goes
	// by the stored listing.
	rig.Relist("openai", "gpt-image-2")
	rig.Inject(emulator.Rule{Provider: "openai", Op: emulator.OpStatus, Fault: emulator.Fault500})
	advance(refresh)
	refreshAll()
	fleet[2] = replica()
	fleet[2].app.refreshModels(context.Background())
	rig.ClearFaults()
	for i, s := range fleet {
		if offered(s, "openai-gpt-image-2") {
			t.Fatalf("replica %d: an outage changed what is offered", i)
		}
		if offered(s, "openai-gpt-image-2-2k") {
			t.Fatalf("replica %d: the restarted replica forgot the stored listing", i)
		}
	}
	// Listed again: back on all three within one refresh.
	advance(listingClaim) // the claim of the failed ask runs out
	refreshAll()
	advance(refresh / 10)
	refreshAll()
	for i, s := range fleet {
		if !offered(s, "openai-gpt-image-2") {
			t.Fatalf("replica %d: listed again, openai-gpt-image-2 is not back", i)
		}
	}
}

// TestModelShutdownDate: a vendor's shutdown date within 30 days is
// flagged in describe_model (with the successor) and by models check; a
// later one is not.
func TestModelShutdownDate(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	s := vendorServer(t, rig, "openai")
	cs := connect(t, s.url, "2026-07-28")
	soon := time.Now().Add(10 * 24 * time.Hour).UTC().Truncate(24 * time.Hour)
	rig.AnnounceShutdown("gpt-image-2", soon)
	rig.AnnounceShutdown("gpt-image-2-2026-04-21", time.Now().Add(90*24*time.Hour))
	s.app.refreshModels(context.Background())
	var d struct {
		Available    bool   `json:"available"`
		ShutdownDate string `json:"shutdownDate"`
		Successor    string `json:"successor"`
	}
	res := call(t, cs, "describe_model", map[string]any{"modelId": "openai-gpt-image-1-mini"}, &d)
	if res.IsError || !d.Available || d.ShutdownDate != soon.Format(time.DateOnly) || d.Successor != "openai-gpt-image-2" {
		t.Fatalf("describe_model of a model shutting down in 10 days: %s", text(res))
	}
	var out, errOut bytes.Buffer
	args := []string{"models", "check", "--openai-api-key", "sk-test", "--openai-base-url", rig.OpenAI.URL,
		"--replicate-api-token", "", "--fal-key", "", "--gemini-api-key", "", "--google-project", ""}
	if code := run(context.Background(), args, &out, &errOut); code != 0 || !strings.Contains(out.String(), "shuts down "+soon.Format(time.DateOnly)) {
		t.Fatalf("check: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	rig.AnnounceShutdown("gpt-image-2", time.Now().Add(60*24*time.Hour))
	s.app.refreshModels(context.Background())
	d.ShutdownDate = ""
	if res := call(t, cs, "describe_model", map[string]any{"modelId": "openai-gpt-image-2"}, &d); res.IsError || d.ShutdownDate != "" {
		t.Fatalf("a shutdown 60 days away flagged: %s", text(res))
	}
}

// TestModelsCheckSpend: --spend-cents runs each configured provider's
// cheapest image model once, end to end, while the budget lasts (one job
// at each vendor, its outputs read), and skips what the budget does not
// cover; without it no job is made.
func TestModelsCheckSpend(t *testing.T) {
	rig := startEmulator(t, defaultTiming)
	args := []string{"models", "check", "--json", "--replicate-api-token", "r8_test", "--replicate-base-url", rig.Replicate.URL,
		"--fal-key", "fal_test", "--fal-queue-url", rig.Fal.URL, "--fal-api-url", rig.Fal.URL, "--fal-openapi-url", rig.Fal.URL,
		"--gemini-api-key", "", "--google-project", "", "--openai-api-key", "",
		"--unsafe-output-fetch", "--output-hosts", rig.filesHost()}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), args, &out, &errOut); code != 0 || rig.Jobs("replicate")+rig.Jobs("fal") != 0 {
		t.Fatalf("without --spend-cents: exit %d, %d jobs\n%s", code, rig.Jobs("replicate")+rig.Jobs("fal"), errOut.String())
	}
	out.Reset()
	// 3 cents: Replicate's FLUX schnell (3 credits at 100 a dollar), then
	// nothing left for fal's.
	if code := run(context.Background(), append(args, "--spend-cents", "3"), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	var r checkReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	byProvider := map[string]spendCheck{}
	for _, s := range r.Spend {
		byProvider[s.Provider] = s
	}
	if s := byProvider["replicate"]; s.State != "completed" || s.ModelID != "replicate-flux-schnell" || s.Bytes == 0 || s.Cents != 3 {
		t.Fatalf("replicate: %+v", s)
	}
	if s := byProvider["fal"]; !strings.HasPrefix(s.State, "skipped") {
		t.Fatalf("fal ran past the budget: %+v", s)
	}
	if rig.Jobs("replicate") != 1 || rig.Jobs("fal") != 0 {
		t.Fatalf("jobs: replicate %d, fal %d; want 1 and 0", rig.Jobs("replicate"), rig.Jobs("fal"))
	}
}
