package catalog_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/provider/google"
	"github.com/darkroom-mcp/darkroom/provider/openai"
	"github.com/darkroom-mcp/darkroom/provider/replicate"
)

func entry(t *testing.T, id string) catalog.Entry {
	for _, e := range catalog.Default() {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("no %s", id)
	return catalog.Entry{}
}

func TestDefault(t *testing.T) {
	es := catalog.Default()
	kinds := map[string]int{}
	for _, e := range es {
		kinds[e.Provider+"/"+string(e.Kind)]++
		m := e.Model()
		// No ratios only where the model has no ratio field (its input image decides).
		if m.ID != e.ID || m.ExpectedDuration <= 0 || (len(m.AspectRatios) == 0) != (e.Input.AspectRatio == "") {
			t.Errorf("model %+v", m)
		}
	}
	if kinds["replicate/image"] != 5 || kinds["fal/image"] != 5 || kinds["replicate/video"] != 3 || kinds["fal/video"] != 3 {
		t.Fatalf("catalog %v", kinds)
	}
	if len(catalog.ForProvider(es, "fal")) != 8 {
		t.Fatal("ForProvider")
	}
}

func TestBuildInput(t *testing.T) {
	r := provider.Request{IdempotencyKey: "gen-1", Prompt: "a fox", NegativePrompt: "blur", AspectRatio: "16:9", DurationSeconds: 5}
	in, err := entry(t, "fal-flux-schnell").BuildInput(r)
	if err != nil {
		t.Fatal(err)
	}
	if in["prompt"] != "a fox" || in["image_size"] != "landscape_16_9" || in["seed"] != catalog.DerivedSeed("gen-1") || in["num_images"] != float64(1) {
		t.Fatalf("fal flux %v", in)
	}
	if _, ok := in["negative_prompt"]; ok {
		t.Fatal("flux has no negative prompt")
	}
	in, _ = entry(t, "fal-kling-1.6").BuildInput(r)
	if in["duration"] != "5" || in["negative_prompt"] != "blur" || in["aspect_ratio"] != "16:9" {
		t.Fatalf("fal kling %v", in)
	}
	in, _ = entry(t, "replicate-kling-1.6").BuildInput(r)
	if in["duration"] != 5 {
		t.Fatalf("replicate kling %v", in)
	}
	r.Seed = 7
	in, _ = entry(t, "replicate-flux-dev").BuildInput(r)
	if in["seed"] != int64(7) {
		t.Fatalf("own seed %v", in)
	}
	r.InputImage = &provider.Input{URL: "https://x/in.png"}
	if in, _ = entry(t, "replicate-flux-dev").BuildInput(r); in["image"] != "https://x/in.png" {
		t.Fatalf("image %v", in)
	}
	var pe *provider.PermanentError
	if _, err := entry(t, "fal-flux-dev").BuildInput(r); !errors.As(err, &pe) {
		t.Fatal("input image on a model without one")
	}
	bad := []struct {
		req  provider.Request
		want string // in the message; choices in words, never Go's [5 10]
	}{
		{provider.Request{Prompt: "x", AspectRatio: "7:5"}, `aspect ratio "7:5" (choose 16:9, 9:16 or 1:1)`},
		{provider.Request{Prompt: "x", DurationSeconds: 7}, "a 7 s duration (choose 5 or 10)"},
		{provider.Request{Prompt: " "}, ""},
	}
	for _, b := range bad {
		_, err := entry(t, "fal-kling-1.6").BuildInput(b.req)
		if !errors.As(err, &pe) {
			t.Errorf("%+v accepted", b.req)
		} else if !strings.Contains(pe.Message, b.want) || strings.ContainsAny(pe.Message, "[]") {
			t.Errorf("%+v: %q, want it to contain %q", b.req, pe.Message, b.want)
		}
	}
	if catalog.DerivedSeed("a") == catalog.DerivedSeed("b") || catalog.DerivedSeed("a") >= 1<<31 {
		t.Fatal("DerivedSeed")
	}
}

func fixture(t *testing.T, p string) any {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", p))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	json.Unmarshal(b, &v)
	return v
}

func TestOutputs(t *testing.T) {
	pred := fixture(t, "replicate/prediction_succeeded.json").(map[string]any)
	if o := entry(t, "replicate-flux-schnell").Outputs(pred["output"]); len(o) != 1 || o[0].MimeType != "image/png" {
		t.Fatalf("%+v", o)
	}
	vid := fixture(t, "replicate/prediction_succeeded_video.json").(map[string]any)
	if o := entry(t, "replicate-kling-1.6").Outputs(vid["output"]); len(o) != 1 || !strings.HasSuffix(o[0].URL, ".mp4") {
		t.Fatalf("%+v", o)
	}
	flux := fixture(t, "fal/result_flux.json")
	e := entry(t, "fal-flux-dev")
	if o := e.Outputs(flux); len(o) != 1 || o[0].MimeType != "image/jpeg" || e.Blocked(flux) {
		t.Fatalf("%+v", o)
	}
	if !e.Blocked(fixture(t, "fal/result_flux_nsfw.json")) {
		t.Fatal("nsfw not blocked")
	}
	if o := entry(t, "fal-kling-1.6").Outputs(fixture(t, "fal/result_kling.json")); len(o) != 1 || o[0].MimeType != "video/mp4" {
		t.Fatalf("%+v", o)
	}
	v := map[string]any{"a": []any{map[string]any{"b": []any{"https://x/1", "nope", "https://x/2"}}}}
	if o := catalog.ExtractOutputs(v, "a[0].b", ""); len(o) != 2 {
		t.Fatalf("%+v", o)
	}
}

func TestLoadMerge(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "models.json")
	os.WriteFile(p, []byte(`{"models":[
	  {"modelId":"fal-flux-dev","disabled":true},
	  {"modelId":"fal-veo3","provider":"fal","kind":"video","title":"Veo 3","expectedSeconds":120,
	   "aspectRatios":["16:9"],"durations":[8],"endpoint":"fal-ai/veo3",
	   "input":{"prompt":"prompt","duration":"duration","durationFormat":"seconds"},"output":{"path":"video"}}]}`), 0o600)
	over, err := catalog.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	all := catalog.Merge(catalog.Default(), over)
	ids := map[string]bool{}
	for _, e := range all {
		ids[e.ID] = true
	}
	if ids["fal-flux-dev"] || !ids["fal-veo3"] || len(all) != len(catalog.Default()) {
		t.Fatalf("%v", ids)
	}
	in, _ := all[len(all)-1].BuildInput(provider.Request{Prompt: "x", DurationSeconds: 8})
	if in["duration"] != "8s" {
		t.Fatalf("%v", in)
	}
	for _, bad := range []string{
		`{"models":[{"modelId":"x","provider":"fal","kind":"image","endpoint":"a/b","input":{},"expectedSeconds":1}]}`,
		`{"models":[{"modelId":"x","provider":"fal","kind":"image","endpoint":"a/b","input":{"prompt":"p"},"expectedSeconds":1,"output":{"path":"a[x]"}}]}`,
		`{"models":[],"extra":1}`,
	} {
		if _, err := catalog.Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if _, err := catalog.Load(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("missing file")
	}
}

// TestBuildInputRolesAndCount: further inputs go to their role's field
// (a list for a role that takes several), the count to the model's count
// field; a role or count the model does not take is refused.
func TestBuildInputRolesAndCount(t *testing.T) {
	e := catalog.Entry{
		ID: "edit", Provider: "fal", Kind: provider.KindImage, MaxCount: 4,
		Input: catalog.InputMap{Prompt: "prompt", InputImage: "image_url", Count: "num_images"},
		Roles: map[string]catalog.Role{
			provider.RoleMask:      {Field: "mask_url"},
			provider.RoleReference: {Field: "reference_image_urls", Max: 2, List: true},
		},
	}
	in := func(role, url string) provider.Input { return provider.Input{Role: role, URL: url} }
	cases := []struct {
		name    string
		req     provider.Request
		want    map[string]any
		wantErr string
	}{
		{name: "mask and references", req: provider.Request{Prompt: "p", Count: 3, InputImage: &provider.Input{URL: "https://x/i"},
			Extra: []provider.Input{in(provider.RoleMask, "https://x/m"), in(provider.RoleReference, "https://x/r1"), in(provider.RoleReference, "https://x/r2")}},
			want: map[string]any{"prompt": "p", "image_url": "https://x/i", "mask_url": "https://x/m", "reference_image_urls": []any{"https://x/r1", "https://x/r2"}, "num_images": 3}},
		{name: "one output sends no count", req: provider.Request{Prompt: "p", Count: 1}, want: map[string]any{"prompt": "p"}},
		{name: "a role it does not take", req: provider.Request{Prompt: "p", Extra: []provider.Input{in(provider.RoleLastFrame, "https://x/l")}}, wantErr: "takes no last_frame input"},
		{name: "too many outputs", req: provider.Request{Prompt: "p", Count: 5}, wantErr: "at most 4 outputs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := e.BuildInput(c.req)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("input %v, want %v", got, c.want)
			}
		})
	}
	if m := e.Model(); m.MaxCount != 4 || m.Roles[provider.RoleMask] != 1 || m.Roles[provider.RoleReference] != 2 {
		t.Errorf("model %+v: want maxCount 4, 1 mask, 2 references", m)
	}
}

// TestSuccessors: a successor in the embedded catalog is another of its
// models that takes the same request: the same kind, and no input image
// where the model needs none.
func TestSuccessors(t *testing.T) {
	byID := map[string]catalog.Entry{}
	for _, e := range catalog.Default() {
		byID[e.ID] = e
	}
	n := 0
	for _, e := range byID {
		if e.Successor == "" {
			continue
		}
		n++
		s, ok := byID[e.Successor]
		if !ok || s.Kind != e.Kind || s.NeedsInputImage && !e.NeedsInputImage {
			t.Errorf("%s: successor %q is not a model taking the same request (%+v)", e.ID, e.Successor, s)
		}
	}
	if n == 0 {
		t.Fatal("no successors: the test checks nothing")
	}
	if _, err := catalog.Parse([]byte(`{"models":[{"modelId":"a","successor":"a","provider":"openai","api":"images","kind":"image","endpoint":"x","expectedSeconds":1,"input":{"prompt":"prompt"},"output":{"path":""}}]}`)); err == nil {
		t.Fatal("a model its own successor was accepted")
	}
}

// TestAdapterRules: what a provider asks of its entries is its adapter's
// CheckEntry (catalog knows no provider by name); each adapter refuses
// an entry it cannot run and New refuses a catalog holding one, while
// the embedded catalog passes every adapter's rules.
func TestAdapterRules(t *testing.T) {
	rules := map[string]func(catalog.Entry) error{
		replicate.Name: replicate.CheckEntry, fal.Name: fal.CheckEntry, google.Name: google.CheckEntry, openai.Name: openai.CheckEntry,
	}
	for _, bad := range []string{
		`{"modelId":"x","provider":"openai","kind":"image","endpoint":"a/b","input":{"prompt":"p"},"expectedSeconds":1}`,
		`{"modelId":"x","provider":"replicate","kind":"image","endpoint":"a/b/c","input":{"prompt":"p"},"expectedSeconds":1}`,
		`{"modelId":"x","provider":"fal","kind":"image","endpoint":"flux","input":{"prompt":"p"},"expectedSeconds":1}`,
		`{"modelId":"x","provider":"fal","kind":"image","endpoint":"a/b","input":{"prompt":"p","inputImage":"image_url"},"expectedSeconds":1,"roles":{"mask":{}}}`,
		`{"modelId":"x","provider":"google","api":"vertex","kind":"image","endpoint":"imagen","input":{"prompt":"p"},"expectedSeconds":1}`,
		`{"modelId":"x","provider":"google","api":"gemini","kind":"image","endpoint":"g","input":{"prompt":"p"},"expectedSeconds":1,"roles":{"last_frame":{}}}`,
		`{"modelId":"x","provider":"openai","api":"videos","kind":"video","endpoint":"sora-2","input":{"prompt":"p"},"expectedSeconds":1}`,
	} {
		es, err := catalog.Parse([]byte(`{"models":[` + bad + `]}`))
		if err != nil {
			t.Fatalf("the generic rules refused %s: %v", bad, err)
		}
		if err := catalog.CheckEntries(es, rules[es[0].Provider]); err == nil {
			t.Errorf("%s accepted %s", es[0].Provider, bad)
		}
	}
	if _, err := openai.New(openai.Config{Key: "k", Spool: provider.DirSpool(t.TempDir()), Models: []catalog.Entry{{ID: "x", Provider: "openai", API: "videos"}}}); err == nil {
		t.Error("openai.New took an entry its rules refuse")
	}
	for name, check := range rules {
		if err := catalog.CheckEntries(catalog.ForProvider(catalog.Default(), name), check); err != nil {
			t.Errorf("the embedded catalog: %v", err)
		}
	}
}
