package modelschema_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/provider/replicate"
)

// fakeSource is a provider's model metadata in memory, written by the
// test as a hostile author would; it counts what reaches the provider.
type fakeSource struct {
	mu        sync.Mutex
	infos     map[string]modelschema.Info // by path
	failing   map[string]error            // Describe's error, by path
	describes map[string]int
	searches  int
	searchErr []error // the next searches' errors, in turn
	hits      []modelschema.Hit
}

func (s *fakeSource) Describe(_ context.Context, ref modelschema.Ref) (modelschema.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.describes == nil {
		s.describes = map[string]int{}
	}
	s.describes[ref.Path]++
	if err := s.failing[ref.Path]; err != nil {
		return modelschema.Info{}, err
	}
	info, ok := s.infos[ref.Path]
	if !ok {
		return modelschema.Info{}, fmt.Errorf("fake: %w: %s", provider.ErrNotFound, ref.Path)
	}
	return info, nil
}

func (s *fakeSource) Search(context.Context, string, int, string) (modelschema.Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.searches++
	if len(s.searchErr) > 0 {
		err := s.searchErr[0]
		s.searchErr = s.searchErr[1:]
		return modelschema.Page{}, err
	}
	return modelschema.Page{Hits: s.hits}, nil
}

func (s *fakeSource) Dialect() modelschema.Dialect { return replicate.Dialect{} }

func (s *fakeSource) calls(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.describes[path]
}

// cogInfo is a Replicate model whose Cog input has these properties.
func cogInfo(props string) modelschema.Info {
	return modelschema.Info{Format: replicate.SchemaFormat, Kind: provider.KindImage,
		Doc: []byte(`{"components":{"schemas":{"Input":{"type":"object","properties":{` + props + `}}}}}`)}
}

func fakeRegistry(t *testing.T, allow string, src *fakeSource, now *time.Time) *modelschema.Registry {
	t.Helper()
	a, err := modelschema.ParseAllow(allow, known.Names())
	if err != nil {
		t.Fatal(err)
	}
	return modelschema.New(modelschema.Config{Allow: a, Sources: map[string]modelschema.Source{"replicate": src},
		Now: func() time.Time { return *now }, Go: func(fn func()) { fn() }})
}

// hostileProps declares every count and image field a model's author
// might add beside the ones darkroom maps, and fields input may set.
const hostileProps = `"prompt":{"type":"string"},
	"num_outputs":{"type":"integer","maximum":8},
	"batch_size":{"type":"integer","maximum":64},
	"n":{"type":"integer"},
	"samples":{"type":"integer"},
	"numImages":{"type":"integer"},
	"image":{"type":"string","format":"uri"},
	"input_image":{"type":"string"},
	"image_url":{"type":"string"},
	"mask_url":{"type":"string"},
	"image_prompt":{"type":"string","format":"uri"},
	"image_urls":{"type":"array","items":{"type":"string"}},
	"control_image":{"type":"string","format":"uri"},
	"style_reference_url":{"type":"string"},
	"reference_images":{"type":"array","items":{"type":"string","format":"uri"}},
	"image_resolution":{"type":"string","enum":["1k","2k"]},
	"num_inference_steps":{"type":"integer"},
	"frames_per_second":{"type":"integer"},
	"lora_weights":{"type":"string"},
	"video_url":{"type":"string"},
	"output_format":{"type":"string","enum":["png","jpg"]}`

// TestInputRefusesCountAndImageFields: count is the only way to ask for
// several outputs, and inputImage/inputs the only way an image reaches a
// model, for a qualified model and a curated one alike; the other fields
// still pass, and count still maps onto the schema's count field.
func TestInputRefusesCountAndImageFields(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	src := &fakeSource{infos: map[string]modelschema.Info{"acme/hostile": cogInfo(hostileProps)}}
	reg := fakeRegistry(t, "replicate:acme/*", src, &now)
	curated := catalog.Entry{ID: "acme-curated", Provider: "replicate", Kind: provider.KindImage, Title: "curated",
		Endpoint: "acme/hostile", Input: catalog.InputMap{Prompt: "prompt"}, ExpectedSeconds: 5, Credits: 3}
	cat := modelschema.NewCatalog(reg, []catalog.Entry{curated}, []provider.Model{curated.Model()})
	ctx := context.Background()

	qualified, err := cat.Resolve(ctx, "replicate:acme/hostile")
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := cat.Describe(ctx, qualified.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Mapping.Count != "num_outputs" || d.MaxCount != 8 {
		t.Errorf("count maps onto %q, at most %d; want num_outputs, 8", d.Mapping.Count, d.MaxCount)
	}
	var listed []string
	for _, f := range d.Input {
		listed = append(listed, f.Name)
	}
	if want := []string{"frames_per_second", "image_resolution", "lora_weights", "num_inference_steps", "output_format", "video_url"}; !slices.Equal(listed, want) {
		t.Errorf("describe_model lists input fields %v; want %v", listed, want)
	}

	const (
		count  = "darkroom's count"
		images = "darkroom's inputImage or inputs"
	)
	for _, tt := range []struct {
		field string
		value any
		want  string // "" passes; else the refusal says this (qualified model)
		// curated is what the curated entry (prompt mapped, nothing else)
		// says, when it differs.
		curated string
	}{
		{"num_outputs", 8, "darkroom's count argument", count},
		{"batch_size", 8, count, ""},
		{"n", 8, count, ""},
		{"samples", 8, count, ""},
		{"numImages", 8, count, ""},
		{"image", "https://evil.example/a.png", "darkroom's inputImage (or inputs)", images},
		{"mask_url", "https://evil.example/m.png", "darkroom's inputs (role mask)", images},
		{"reference_images", []any{"https://evil.example/r.png"}, "darkroom's inputs (role reference)", images},
		{"input_image", "https://evil.example/a.png", images, ""},
		{"image_url", "data:image/png;base64,AAAA", images, ""},
		{"image_prompt", "https://evil.example/a.png", images, ""},
		{"image_urls", []any{"https://evil.example/a.png"}, images, ""},
		{"control_image", "https://evil.example/a.png", images, ""},
		{"style_reference_url", "https://evil.example/a.png", images, ""},
		{"image_resolution", "2k", "", ""},
		{"num_inference_steps", 4, "", ""},
		{"frames_per_second", 24, "", ""},
		{"lora_weights", "https://example.com/l.safetensors", "", ""},
		{"video_url", "https://example.com/v.mp4", "", ""},
		{"output_format", "png", "", ""},
	} {
		for _, m := range []struct {
			pm   provider.Model
			want string
		}{{qualified, tt.want}, {curated.Model(), cmp(tt.curated, tt.want)}} {
			err := cat.CheckInput(ctx, m.pm, map[string]any{tt.field: tt.value})
			var ie *modelschema.InputError
			switch {
			case m.want == "" && err != nil:
				t.Errorf("%s: input.%s refused: %v", m.pm.ID, tt.field, err)
			case m.want != "" && (!errors.As(err, &ie) || ie.Field != tt.field || !strings.Contains(err.Error(), m.want)):
				t.Errorf("%s: input.%s: %v; want a refusal naming %s", m.pm.ID, tt.field, err, m.want)
			}
		}
	}
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestPriceBounds: a published price darkroom cannot charge by refuses
// the model when it is read, and no quote can overflow an int64 for any
// count a model allows.
func TestPriceBounds(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		price   *modelschema.Price
		credits int64 // 0: refused
	}{
		// The price: 5e18 credits an image, ×2 wrapped to
		// -8446744073709551616.
		{"overflowing", &modelschema.Price{USD: 5e16, Unit: "image"}, 0},
		{"NaN", &modelschema.Price{USD: math.NaN(), Unit: "image"}, 0},
		{"infinite", &modelschema.Price{USD: math.Inf(1), Unit: "image"}, 0},
		{"negative", &modelschema.Price{USD: -0.05, Unit: "image"}, 0},
		{"above the ceiling", &modelschema.Price{USD: modelschema.MaxUnitUSD + 1, Unit: "image"}, 0},
		{"at the ceiling", &modelschema.Price{USD: modelschema.MaxUnitUSD, Unit: "image"}, modelschema.MaxUnitUSD * 100},
		{"real", &modelschema.Price{USD: 0.05, Unit: "image"}, 5},
		{"zero: the default", &modelschema.Price{USD: 0, Unit: "image"}, 10},
		{"none: the default", nil, 10},
	} {
		now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
		info := cogInfo(`"prompt":{"type":"string"},"num_outputs":{"type":"integer","maximum":16}`)
		info.Price = tt.price
		reg := fakeRegistry(t, "replicate:*", &fakeSource{infos: map[string]modelschema.Info{"acme/priced": info}}, &now)
		m, err := reg.Resolve(ctx, "replicate:acme/priced")
		if tt.credits == 0 {
			if err == nil {
				c := m.Model().Credits
				t.Errorf("%s: runnable at %d credits an image (×2 = %d); want it refused", tt.name, c, c*2)
			} else if !strings.Contains(err.Error(), "replicate:acme/priced is not run: its published price") {
				t.Errorf("%s: %v; want the price named", tt.name, err)
			}
			continue
		}
		if err != nil || m.Model().Credits != tt.credits {
			t.Errorf("%s: %v; want %d credits", tt.name, err, tt.credits)
		}
	}

	// Every quote Quote gives, however large the price, the exchange rate
	// or the duration, is at most MaxCredits and so times any count up to
	// 2^23 (a model makes at most 16) fits an int64.
	for _, usd := range []float64{1e-9, 0.05, 1, 999.99, modelschema.MaxUnitUSD} {
		for _, perUSD := range []float64{1, 100, 1e6, 1e12, math.MaxFloat64, math.Inf(1), math.NaN()} {
			for _, seconds := range []int{1, 5, 3600, 1 << 30, math.MaxInt} {
				for _, unit := range []string{"image", "video_second"} {
					p := modelschema.Pricing{CreditsPerUSD: perUSD, Default: modelschema.DefaultPricing.Default}
					c, _, err := p.Quote(provider.KindVideo, &modelschema.Price{USD: usd, Unit: unit}, seconds)
					if err != nil {
						continue
					}
					hi, lo := bits.Mul64(uint64(c), 1<<23)
					if c < 1 || c > modelschema.MaxCredits || hi != 0 || lo > math.MaxInt64 {
						t.Errorf("Quote(%g USD per %s, %g credits/USD, %d s) = %d credits", usd, unit, perUSD, seconds, c)
					}
				}
			}
		}
	}
}

// TestFalPriceRead: fal's published unit price, read as fal sends it; one
// too large for a float64 is refused like any other out of bounds.
func TestFalPriceRead(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct {
		raw     string
		credits int64 // 0: refused
	}{
		{"5e16", 0},
		{"1e400", 0},
		{"-0.05", 0},
		{"0.05", 5},
	} {
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"prices":[{"endpoint_id":%q,"unit_price":%s,"unit":"image","currency":"USD"}]}`, r.URL.Query().Get("endpoint_id"), tt.raw)
		}))
		fp, err := fal.New(fal.Config{Key: "fal_test", QueueURL: f.em.Fal.URL, APIURL: api.URL, OpenAPIURL: f.em.Fal.URL, RequestsPerMinute: -1})
		if err != nil {
			t.Fatal(err)
		}
		a, _ := modelschema.ParseAllow("fal:*", known.Names())
		reg := modelschema.New(modelschema.Config{Allow: a, Sources: map[string]modelschema.Source{"fal": fp}, Now: func() time.Time { return f.now }})
		m, err := reg.Resolve(context.Background(), "fal:fal-ai/flux/schnell")
		api.Close()
		switch {
		case tt.credits == 0 && err == nil:
			t.Errorf("unit_price %s: runnable at %d credits an image; want it refused", tt.raw, m.Model().Credits)
		case tt.credits == 0 && !strings.Contains(fmt.Sprint(err), "published price"):
			t.Errorf("unit_price %s: %v; want the price named", tt.raw, err)
		case tt.credits != 0 && (err != nil || m.Model().Credits != tt.credits):
			t.Errorf("unit_price %s: %v; want %d credits", tt.raw, err, tt.credits)
		}
	}
}

// TestMissesAreRemembered: an id the provider does not know, or whose
// schema darkroom cannot use, is asked once per MissTTL, not per call; a
// failure to ask is not remembered; the misses held are bounded.
func TestMissesAreRemembered(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	src := &fakeSource{
		infos:   map[string]modelschema.Info{"acme/no-prompt": cogInfo(`"text_in":{"type":"string"}`)},
		failing: map[string]error{"acme/flaky": &provider.RetryableError{Err: errors.New("503")}},
	}
	reg := fakeRegistry(t, "replicate:*", src, &now)
	ctx := context.Background()
	for _, tt := range []struct {
		path string
		want string
		// asked is the provider calls for 5 resolves, then for 5 more
		// once MissTTL has passed.
		asked, after int
	}{
		{"acme/unknown", "does not exist", 1, 2},
		{"acme/no-prompt", "no prompt field", 1, 2},
		{"acme/flaky", "try again", 5, 10},
	} {
		start := now
		for range 5 {
			if _, err := reg.Resolve(ctx, "replicate:"+tt.path); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: %v; want %q", tt.path, err, tt.want)
			}
		}
		if n := src.calls(tt.path); n != tt.asked {
			t.Errorf("%s: 5 resolves asked the provider %d times; want %d", tt.path, n, tt.asked)
		}
		now = now.Add(modelschema.MissTTL)
		for range 5 {
			_, _ = reg.Resolve(ctx, "replicate:"+tt.path)
		}
		if n := src.calls(tt.path); n != tt.after {
			t.Errorf("%s: after MissTTL the provider was asked %d times in all; want %d", tt.path, n, tt.after)
		}
		now = start
	}

	// A model published meanwhile is found once the miss has passed, and
	// is then held as any other.
	src.mu.Lock()
	src.infos["acme/unknown"] = cogInfo(`"prompt":{"type":"string"}`)
	src.mu.Unlock()
	now = now.Add(2 * modelschema.MissTTL)
	for range 3 {
		if _, err := reg.Resolve(ctx, "replicate:acme/unknown"); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.calls("acme/unknown"); n != 3 {
		t.Errorf("a published model: %d calls in all; want 3", n)
	}

	for i := range 1100 {
		_, _ = reg.Resolve(ctx, fmt.Sprintf("replicate:acme/made-up-%d", i))
	}
	if n, max := reg.HeldMisses(), caches.SchemaMisses.Spec().Entries; n > max {
		t.Errorf("%d misses held; the bound is %d", n, max)
	}
}

// TestFailedSearchNotCached: a search made while a provider's search
// failed is that caller's answer only; the next one asks the provider
// again, and a whole search is then reused.
func TestFailedSearchNotCached(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	src := &fakeSource{searchErr: []error{errors.New("replicate: 503")},
		hits: []modelschema.Hit{{ID: "replicate:acme/lighthouse", Title: "lighthouse"}}}
	cat := modelschema.NewCatalog(fakeRegistry(t, "replicate:*", src, &now), nil, nil)
	ctx := context.Background()
	for i, want := range []struct {
		searches int
		sources  []string
		models   int
	}{
		{1, []string{"curated"}, 0},              // replicate failed
		{2, []string{"curated", "replicate"}, 1}, // asked again
		{2, []string{"curated", "replicate"}, 1}, // the whole search, reused
	} {
		res, err := cat.Search(ctx, "lighthouse", "", 20, "")
		if err != nil {
			t.Fatal(err)
		}
		if src.searches != want.searches || !slices.Equal(res.Sources, want.sources) || len(res.Models) != want.models {
			t.Errorf("search %d: %d provider searches, sources %v, %d models; want %d, %v, %d",
				i+1, src.searches, res.Sources, len(res.Models), want.searches, want.sources, want.models)
		}
	}
}
