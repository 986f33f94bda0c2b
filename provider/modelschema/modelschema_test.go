package modelschema_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/provider/replicate"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// known are the providers whose ids these tests read, as cmd/darkroom
// configures them.
var known = modelschema.Dialects{replicate.Name: replicate.Dialect{}, fal.Name: fal.Dialect{}}

func TestParseID(t *testing.T) {
	for _, tt := range []struct {
		id, want, err string
	}{
		{id: "replicate:black-forest-labs/flux-schnell", want: "replicate:black-forest-labs/flux-schnell"},
		{id: "replicate:acme/clip-maker:0123abcd", want: "replicate:acme/clip-maker:0123abcd"},
		{id: "fal:fal-ai/flux/dev", want: "fal:fal-ai/flux/dev"},
		{id: "fal:fal-ai/kling-video/v1.6/standard/text-to-video", want: "fal:fal-ai/kling-video/v1.6/standard/text-to-video"},
		{id: "replicate:only-owner", err: "owner/name"},
		{id: "replicate:a/b/c", err: "owner/name"},
		{id: "replicate:a/b:NOTHEX", err: "version"},
		{id: "fal:fal-ai", err: "owner/app"},
		{id: "fal:fal-ai/../x", err: "segment"},
		{id: "fal:fal-ai/x?y=1", err: "segment"},
		{id: "fal:evil.com@host/x", err: "segment"},
		{id: "google:veo", err: "not provider-qualified"},
	} {
		r, err := known.ParseID(tt.id)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseID(%q) = %v, %v; want error with %q", tt.id, r, err, tt.err)
			}
			continue
		}
		if err != nil || r.ID() != tt.want {
			t.Errorf("ParseID(%q) = %q, %v; want %q", tt.id, r.ID(), err, tt.want)
		}
	}
}

func TestAllow(t *testing.T) {
	a, err := modelschema.ParseAllow("replicate:black-forest-labs/*, fal:fal-ai/flux*, fal:acme/app", known.Names())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{"replicate:black-forest-labs/flux-schnell", true},
		{"replicate:black-forest-labs/flux-schnell:abcdef01", true}, // versions of an allowed model
		{"replicate:stability-ai/sdxl", false},
		{"fal:fal-ai/flux-pro", true},
		{"fal:fal-ai/flux/dev", false}, // "*" stays within its segment
		{"fal:fal-ai/kling-video/v2", false},
		{"fal:acme/app", true},
		{"fal:acme/app/sub", false},
	} {
		r, err := known.ParseID(tt.id)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Allows(r); got != tt.want {
			t.Errorf("Allows(%s) = %v, want %v", tt.id, got, tt.want)
		}
	}
	all, _ := modelschema.ParseAllow("fal:*", known.Names())
	if r, _ := known.ParseID("fal:x/y/z"); !all.Allows(r) {
		t.Error(`"fal:*" does not allow fal:x/y/z`)
	}
	if _, err := modelschema.ParseAllow("replicate", known.Names()); err == nil {
		t.Error("a pattern without provider: accepted")
	}
	if none, _ := modelschema.ParseAllow("", known.Names()); !none.Empty() || none.Provider("fal") {
		t.Error("the empty list allows something")
	}
}

// memStore is a Store in memory; the engines' own are tested by
// storage/storetest.
type memStore struct {
	mu sync.Mutex
	m  map[string]modelschema.Stored
}

func (s *memStore) ModelSchema(_ context.Context, id string) (modelschema.Stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[id]
	if !ok {
		return st, provider.ErrNotFound
	}
	return st, nil
}

func (s *memStore) PutModelSchema(_ context.Context, st modelschema.Stored) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[st.ModelID] = st
	return nil
}

type fixture struct {
	em    *emulator.Emulator
	rep   *replicate.Provider
	fal   *fal.Provider
	store *memStore
	now   time.Time
}

func newFixture(t testing.TB) *fixture {
	em := emulator.New(emulator.Options{})
	t.Cleanup(em.Close)
	rep, err := replicate.New(replicate.Config{Token: "r8_test", BaseURL: em.Replicate.URL, RequestsPerMinute: -1, CreatesPerMinute: -1, WebhookSecret: "whsec_dGVzdHNlY3JldA=="})
	if err != nil {
		t.Fatal(err)
	}
	fp, err := fal.New(fal.Config{Key: "fal_test", QueueURL: em.Fal.URL, APIURL: em.Fal.URL, OpenAPIURL: em.Fal.URL, RequestsPerMinute: -1})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{em: em, rep: rep, fal: fp, store: &memStore{m: map[string]modelschema.Stored{}}, now: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
}

func (f *fixture) registry(t testing.TB, allow string, sources ...string) *modelschema.Registry {
	a, err := modelschema.ParseAllow(allow, known.Names())
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string]modelschema.Source{}
	for _, s := range sources {
		srcs[s] = map[string]modelschema.Source{"replicate": f.rep, "fal": f.fal}[s]
	}
	return modelschema.New(modelschema.Config{Allow: a, Dialects: known, Sources: srcs, Store: f.store, Now: func() time.Time { return f.now },
		Go: func(fn func()) { fn() }, Refresh: time.Hour})
}

func TestResolveDerivesTheEntry(t *testing.T) {
	f := newFixture(t)
	r := f.registry(t, "replicate:*,fal:fal-ai/*", "replicate", "fal")
	ctx := context.Background()
	for _, tt := range []struct {
		id      string
		check   func(catalog.Entry) bool
		credits int64
		unit    string
	}{
		{id: "replicate:black-forest-labs/flux-schnell", credits: 10, unit: "run", check: func(e catalog.Entry) bool {
			return e.Kind == provider.KindImage && e.Input.Prompt == "prompt" && e.Input.AspectRatio == "aspect_ratio" && len(e.AspectRatios) == 11 &&
				e.Input.Seed == "seed" && e.Input.Count == "num_outputs" && e.MaxCount == 4 &&
				e.Version == "" && e.Endpoint == "black-forest-labs/flux-schnell" // official: its model endpoint, no version
		}},
		{id: "replicate:acme/clip-maker", credits: 300, unit: "run", check: func(e catalog.Entry) bool { // a community model: by version
			return e.Kind == provider.KindVideo && e.Version == "acme/clip-maker:"+emulator.ReplicateVersion("acme/clip-maker")
		}},
		{id: "replicate:black-forest-labs/flux-dev", credits: 10, unit: "run", check: func(e catalog.Entry) bool {
			return e.Input.InputImage == "image" && !e.NeedsInputImage
		}},
		{id: "replicate:kwaivgi/kling-v1.6-standard", credits: 300, unit: "run", check: func(e catalog.Entry) bool {
			return e.Kind == provider.KindVideo && e.Input.Duration == "duration" && e.Input.DurationFormat == "int" && len(e.Durations) == 2 &&
				e.Durations[0] == 5 && e.Input.InputImage == "start_image" && e.Roles[provider.RoleReference].Field == "reference_images" && e.Input.NegativePrompt == "negative_prompt"
		}},
		{id: "fal:fal-ai/flux/schnell", credits: 1, unit: "megapixel", check: func(e catalog.Entry) bool {
			return e.Kind == provider.KindImage && e.Input.AspectRatio == "image_size" && e.Input.AspectRatioValues["16:9"] == "landscape_16_9" &&
				e.Input.Count == "num_images" && e.Output.Path == "images[*]"
		}},
		{id: "fal:fal-ai/kling-video/v1.6/standard/text-to-video", credits: 23, unit: "second", check: func(e catalog.Entry) bool { // 0.045 USD/s × 5 s × 100
			return e.Kind == provider.KindVideo && e.Input.DurationFormat == "string" && e.Output.Path == "video" && len(e.Durations) == 2
		}},
	} {
		m, err := r.Resolve(ctx, tt.id)
		if err != nil {
			t.Fatalf("%s: %v", tt.id, err)
		}
		if !tt.check(m.Entry) {
			t.Errorf("%s: entry %+v", tt.id, m.Entry)
		}
		if pm := m.Model(); pm.Credits != tt.credits || pm.PriceUnit != tt.unit || pm.ID != tt.id {
			t.Errorf("%s: priced %d per %s", tt.id, pm.Credits, pm.PriceUnit)
		}
	}
}

func TestResolveRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := f.registry(t, "replicate:black-forest-labs/*,fal:fal-ai/*", "replicate")
	for _, tt := range []struct {
		id   string
		kind string // "enabled", "unknown"
		msg  string
	}{
		{"replicate:stability-ai/sdxl", "enabled", `"replicate:stability-ai/*" to DARKROOM_MODELS_ALLOW`},
		{"fal:fal-ai/flux/dev", "enabled", "fal provider is not configured"},
		{"replicate:black-forest-labs/no-such-model", "unknown", "does not exist"},
		{"replicate:black-forest-labs/flux-schnell:00000000", "unknown", "does not exist"},
		{"replicate:nonsense", "unknown", "owner/name"},
	} {
		before := f.em.Jobs("replicate")
		_, err := r.Resolve(ctx, tt.id)
		var ne *modelschema.NotEnabledError
		var ue *modelschema.UnknownError
		ok := (tt.kind == "enabled" && errors.As(err, &ne)) || (tt.kind == "unknown" && errors.As(err, &ue))
		if !ok || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v; want a %s error with %q", tt.id, err, tt.kind, tt.msg)
		}
		if f.em.Jobs("replicate") != before || len(f.store.m) != 0 {
			t.Errorf("%s: a refusal made a job or stored a schema", tt.id)
		}
	}
}

func TestStoredSchemaOutlivesTheProvider(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const id = "fal:fal-ai/flux/dev"

	f.em.SetModelsDown(true)
	_, err := f.registry(t, "fal:*", "fal").Resolve(ctx, id)
	var re *provider.RetryableError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "try again") {
		t.Fatalf("first fetch with the provider down: %v; want a retryable error", err)
	}
	f.em.SetModelsDown(false)
	if _, err := f.registry(t, "fal:*", "fal").Resolve(ctx, id); err != nil {
		t.Fatal(err)
	}
	fetched := f.store.m[id].FetchedAt
	if fetched != f.now || f.em.ModelFetches() != 2 {
		t.Fatalf("stored at %v after %d fetches", fetched, f.em.ModelFetches())
	}

	// A new process (a fresh registry) serves the stored copy, even with
	// the provider down, and fetches nothing while it is fresh.
	f.em.SetModelsDown(true)
	r := f.registry(t, "fal:*", "fal")
	if _, err := r.Resolve(ctx, id); err != nil || f.em.ModelFetches() != 2 {
		t.Fatalf("stored copy: %v after %d fetches", err, f.em.ModelFetches())
	}
	// Older than the refresh age: refreshed in the background; a failed
	// refresh keeps serving the stored copy.
	f.now = f.now.Add(2 * time.Hour)
	if _, err := r.Resolve(ctx, id); err != nil || f.em.ModelFetches() != 3 || f.store.m[id].FetchedAt != fetched {
		t.Fatalf("refresh with the provider down: %v, %d fetches, stored at %v", err, f.em.ModelFetches(), f.store.m[id].FetchedAt)
	}
	f.em.SetModelsDown(false)
	if _, err := r.Resolve(ctx, id); err != nil || f.store.m[id].FetchedAt != f.now {
		t.Fatalf("refresh: %v, stored at %v", err, f.store.m[id].FetchedAt)
	}
}

func TestCheckInput(t *testing.T) {
	f := newFixture(t)
	m, err := f.registry(t, "replicate:*", "replicate").Resolve(context.Background(), "replicate:black-forest-labs/flux-schnell")
	if err != nil {
		t.Fatal(err)
	}
	owned := modelschema.Owned(m.Entry)
	for _, tt := range []struct {
		name, input, want string
	}{
		{"valid", `{"output_quality": 90, "output_format": "png", "go_fast": false}`, ""},
		{"range", `{"output_quality": 150}`, "input.output_quality: sent 150; replicate:black-forest-labs/flux-schnell allows integer from 0 to 100, default 80"},
		{"enum", `{"output_format": "gif"}`, `allows one of "webp", "jpg" or "png"`},
		{"type", `{"go_fast": "yes"}`, "input.go_fast: sent \"yes\"; replicate:black-forest-labs/flux-schnell allows boolean"},
		{"unknown field", `{"steps": 4}`, "input.steps: replicate:black-forest-labs/flux-schnell has no such field; its fields are"},
		{"owned: prompt", `{"prompt": "x"}`, "input.prompt is set by darkroom's prompt argument"},
		{"owned: count", `{"num_outputs": 2}`, "darkroom's count argument"},
		{"owned: seed", `{"seed": 2}`, "darkroom's seed argument"},
		{"not an object", `[1]`, "must be a JSON object"},
		{"too deep", `{"a":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`, "nests deeper than 16"},
		{"too large", `{"a":"` + strings.Repeat("x", 70<<10) + `"}`, "the limit is 65536"},
	} {
		in, err := modelschema.DecodeInput([]byte(tt.input))
		if err == nil {
			err = m.Schema.CheckInput(context.Background(), m.Entry.ID, in, owned)
		}
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want %q", tt.name, err, tt.want)
		}
	}
}

func TestHostileSchemas(t *testing.T) {
	deep := `{"components":{"schemas":{"Input":{"type":"object","properties":{"prompt":{"type":"string"}},"x":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}}}}`
	big := `{"components":{"schemas":{"Input":{"type":"object","description":"` + strings.Repeat("x", 300<<10) + `"}}}}`
	external := `{"components":{"schemas":{"Input":{"type":"object","properties":{"prompt":{"type":"string"},"image":{"$ref":"https://evil.example/schema.json"}}}}}}`
	for _, tt := range []struct{ name, doc, want string }{
		{"deep", deep, "nests deeper"},
		{"big", big, "the limit is 262144"},
		{"no input", `{"components":{"schemas":{}}}`, "no input object"},
		{"not json", `{"components":`, "not JSON"},
	} {
		if _, err := modelschema.Compile(modelschema.LayoutComponents, []byte(tt.doc), ""); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want %q", tt.name, err, tt.want)
		}
	}
	// A remote $ref is never followed: the field is left unconstrained.
	s, err := modelschema.Compile(modelschema.LayoutComponents, []byte(external), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInput(context.Background(), "m", map[string]any{"image": 1}, nil); err != nil {
		t.Errorf("remote ref: %v", err)
	}
}

// TestCuratedFieldsExistInTheirSchemas holds every curated Replicate and
// fal entry to the model's published schema (testdata/models, served by
// the emulator): each field darkroom maps exists with a compatible type,
// so a wrong field map fails here, not at the provider.
func TestCuratedFieldsExistInTheirSchemas(t *testing.T) {
	f := newFixture(t)
	r := f.registry(t, "", "replicate", "fal")
	ctx := context.Background()
	n := 0
	for _, e := range catalog.Default() {
		if e.Provider != "replicate" && e.Provider != "fal" {
			continue
		}
		n++
		m, ok, err := r.ForEntry(ctx, e)
		if err != nil || !ok {
			t.Errorf("%s: no schema in testdata/models (%v)", e.ID, err)
			continue
		}
		fields := map[string]string{
			e.Input.Prompt: "string", e.Input.NegativePrompt: "string", e.Input.Seed: "integer", e.Input.InputImage: "string",
			e.Input.Count: "integer", e.Input.AspectRatio: "", e.Input.Duration: "",
		}
		for k := range e.Defaults {
			fields[k] = ""
		}
		for _, role := range e.Roles {
			fields[role.Field] = ""
			if role.List {
				fields[role.Field] = "array"
			}
		}
		for name, typ := range fields {
			if name == "" {
				continue
			}
			fd, ok := m.Schema.Field(name)
			if !ok {
				t.Errorf("%s maps %q, which its schema does not have", e.ID, name)
				continue
			}
			if typ != "" && fd.Type != "" && fd.Type != typ {
				t.Errorf("%s maps %q as %s; its schema says %s", e.ID, name, typ, fd.Type)
			}
		}
		// Every value darkroom may send for the field is one the schema takes
		// (the image fields, which come from inputs, aside).
		images := map[string]string{}
		if e.Input.InputImage != "" {
			images[e.Input.InputImage] = "inputImage"
		}
		for _, r := range e.Roles {
			images[r.Field] = "inputs"
		}
		in := map[string]any{e.Input.Prompt: "a prompt"}
		for k, v := range e.Defaults {
			in[k] = v
		}
		for _, ar := range e.AspectRatios {
			var v any = ar
			if e.Input.AspectRatioValues != nil {
				v = e.Input.AspectRatioValues[ar]
			}
			in[e.Input.AspectRatio] = v
			if err := m.Schema.CheckInput(context.Background(), e.ID, in, images); err != nil {
				t.Errorf("%s: aspect ratio %s: %v", e.ID, ar, err)
			}
		}
		for _, d := range e.Durations {
			var v any = d
			switch e.Input.DurationFormat {
			case "string":
				v = strconv.Itoa(d)
			case "seconds":
				v = strconv.Itoa(d) + "s"
			}
			if err := m.Schema.CheckInput(context.Background(), e.ID, map[string]any{e.Input.Prompt: "a prompt", e.Input.Duration: v}, images); err != nil {
				t.Errorf("%s: duration %d: %v", e.ID, d, err)
			}
		}
	}
	if n < 16 {
		t.Fatalf("checked %d curated entries", n)
	}
}

// BenchmarkDescribeCached is describe_model's work for a model whose
// schema is in memory (the reply cache then spares even the encoding).
func BenchmarkDescribeCached(b *testing.B) {
	f := newFixture(b)
	a, _ := modelschema.ParseAllow("fal:*", known.Names())
	reg := modelschema.New(modelschema.Config{Allow: a, Sources: map[string]modelschema.Source{"fal": f.fal}, Store: f.store, Now: func() time.Time { return f.now }})
	c := modelschema.NewCatalog(reg, nil, nil)
	ctx := context.Background()
	if _, _, err := c.Describe(ctx, "fal:fal-ai/flux/dev"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.Describe(ctx, "fal:fal-ai/flux/dev"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckInput is what validating a caller's input adds to a
// create (a valid input; a refusal validates once per field more).
func BenchmarkCheckInput(b *testing.B) {
	f := newFixture(b)
	a, _ := modelschema.ParseAllow("replicate:*", known.Names())
	reg := modelschema.New(modelschema.Config{Allow: a, Sources: map[string]modelschema.Source{"replicate": f.rep}, Store: f.store})
	m, err := reg.Resolve(context.Background(), "replicate:black-forest-labs/flux-dev")
	if err != nil {
		b.Fatal(err)
	}
	owned := modelschema.Owned(m.Entry)
	raw := []byte(`{"output_quality": 90, "output_format": "png", "go_fast": false, "guidance": 3.5, "num_inference_steps": 30, "megapixels": "1"}`)
	b.ReportAllocs()
	for b.Loop() {
		in, err := modelschema.DecodeInput(raw)
		if err == nil {
			err = m.Schema.CheckInput(context.Background(), m.Entry.ID, in, owned)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// TestCuratedAndQualifiedApart: a curated entry and the qualified id of
// the same model share the stored document, not the entry.
func TestCuratedAndQualifiedApart(t *testing.T) {
	f := newFixture(t)
	r := f.registry(t, "replicate:*", "replicate")
	ctx := context.Background()
	var curated catalog.Entry
	for _, e := range catalog.Default() {
		if e.ID == "replicate-flux-schnell" {
			curated = e
		}
	}
	c, ok, err := r.ForEntry(ctx, curated)
	if err != nil || !ok || c.Entry.ID != "replicate-flux-schnell" {
		t.Fatalf("ForEntry: %v %v %+v", ok, err, c)
	}
	q, err := r.Resolve(ctx, "replicate:black-forest-labs/flux-schnell")
	if err != nil || q.Entry.ID != "replicate:black-forest-labs/flux-schnell" {
		t.Fatalf("Resolve after ForEntry: %v, entry %s", err, q.Entry.ID)
	}
	if f.em.ModelFetches() != 1 {
		t.Errorf("%d fetches; the stored document serves both", f.em.ModelFetches())
	}
}
