package modelschema_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
)

// acme is a provider modelschema has never heard of, defined here only:
// its ids are acme:<model>[:<release>] (one segment, no owner; a release
// is a number), its documents are "acme-v1" (Cog's layout), and its
// results carry their files under "renders[*]" when the document does not
// say. A pinned release is run as the entry's Version.
type acmeDialect struct{}

func (acmeDialect) Syntax() string { return "model[:release]" }

func (acmeDialect) ParseRef(id, rest string) (string, string, error) {
	name, release, _ := strings.Cut(rest, ":")
	if strings.Contains(name, "/") {
		return "", "", fmt.Errorf("model id %q: an acme model is acme:model[:release], one name", id)
	}
	if release != "" && strings.Trim(release, "0123456789") != "" {
		return "", "", fmt.Errorf("model id %q: an acme release is a number", id)
	}
	return name, release, nil
}

func (acmeDialect) Layout(f modelschema.Format) modelschema.Layout {
	if f == "acme-v1" {
		return modelschema.LayoutComponents
	}
	return 0
}

func (acmeDialect) Stale(modelschema.Info) bool { return false }

func (acmeDialect) EntryHints(e *catalog.Entry, ref modelschema.Ref, _ modelschema.Info) {
	if e.Output.Path == "" {
		e.Output.Path = "renders[*]"
	}
	if ref.Version != "" {
		e.Version = ref.Path + "@" + ref.Version
	}
}

// acmeSource is acme's published metadata: two models, and a search that
// also finds one whose id is no acme id.
type acmeSource struct {
	mu    sync.Mutex
	asked []modelschema.Ref
}

func (*acmeSource) Dialect() modelschema.Dialect { return acmeDialect{} }

func (s *acmeSource) Describe(_ context.Context, ref modelschema.Ref) (modelschema.Info, error) {
	s.mu.Lock()
	s.asked = append(s.asked, ref)
	s.mu.Unlock()
	if ref.Path != "sunset" && ref.Path != "moonrise" {
		return modelschema.Info{}, provider.ErrNotFound
	}
	return modelschema.Info{Format: "acme-v1", Title: "Acme " + ref.Path, Kind: provider.KindImage,
		Doc: []byte(`{"components":{"schemas":{"Input":{"type":"object","required":["prompt"],"properties":{
			"prompt":{"type":"string"},
			"style":{"type":"string","enum":["noir","pastel"]},
			"aspect_ratio":{"type":"string","enum":["1:1","16:9"]}}}}}}`)}, nil
}

func (*acmeSource) Search(_ context.Context, query string, limit int, _ string) (modelschema.Page, error) {
	var p modelschema.Page
	for _, h := range []modelschema.Hit{
		{ID: "acme:sunset", Title: "Sunset", Kind: provider.KindImage},
		{ID: "acme:moonrise", Title: "Moonrise", Kind: provider.KindImage},
		{ID: "acme:studio/sunset", Title: "not an acme id"},
	} {
		if strings.Contains(strings.ToLower(h.Title+" "+h.ID), query) && len(p.Hits) < limit {
			p.Hits = append(p.Hits, h)
		}
	}
	return p, nil
}

// TestAnotherProvider: a provider defined in this test file alone, under
// a name modelschema's code never mentions, with its own id grammar,
// resolves, is allowed by "acme:*", searches, describes and checks input,
// its own rules applied to the entry; other prefixes are refused naming
// acme's.
func TestAnotherProvider(t *testing.T) {
	ctx := context.Background()
	names := []string{"acme"}
	if _, err := modelschema.ParseAllow("fal:*", names); err == nil || !strings.Contains(err.Error(), "acme:PATTERN") {
		t.Errorf("a pattern of a provider not known: %v; want acme:PATTERN named", err)
	}
	allow, err := modelschema.ParseAllow("acme:*", names)
	if err != nil {
		t.Fatal(err)
	}
	src := &acmeSource{}
	reg := modelschema.New(modelschema.Config{Allow: allow, Sources: map[string]modelschema.Source{"acme": src}, Go: func(fn func()) { fn() }})
	if ds := reg.Dialects(); !slices.Equal(ds.Names(), names) || !ds.Qualified("acme:sunset") || ds.Qualified("replicate:a/b") {
		t.Fatalf("dialects %v", ds.Names())
	}

	m, err := reg.Resolve(ctx, "acme:sunset")
	if err != nil {
		t.Fatal(err)
	}
	e := m.Entry
	if e.ID != "acme:sunset" || e.Provider != "acme" || e.Endpoint != "sunset" || e.Version != "" || e.Output.Path != "renders[*]" ||
		e.Input.Prompt != "prompt" || e.Input.AspectRatio != "aspect_ratio" || len(e.AspectRatios) != 2 || m.Model().Credits != 10 {
		t.Errorf("entry %+v", e)
	}
	pinned, err := reg.Resolve(ctx, "acme:sunset:7")
	if err != nil || pinned.Entry.Version != "sunset@7" || src.asked[len(src.asked)-1] != (modelschema.Ref{Provider: "acme", Path: "sunset", Version: "7"}) {
		t.Errorf("pinned: %v, entry version %q, asked %+v", err, pinned.Entry.Version, src.asked)
	}
	for id, want := range map[string]string{
		"acme:studio/sunset": "one name",            // acme's grammar, not modelschema's
		"acme:sunset:latest": "release is a number", // nor its idea of a version
		"acme:..":            "segment",             // the characters are modelschema's
		"acme:nothing":       "does not exist",
		"replicate:a/b":      "acme:model[:release]", // the known prefixes, named
	} {
		var ue *modelschema.UnknownError
		if _, err := reg.Resolve(ctx, id); !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an unknown model error with %q", id, err, want)
		}
	}

	c := modelschema.NewCatalog(reg, nil, nil)
	res, err := c.Search(ctx, "rise", "", 10, "")
	if err != nil || len(res.Models) != 1 || res.Models[0].ID != "acme:moonrise" || res.Models[0].Source != "acme" || !slices.Equal(res.Sources, []string{"curated", "acme"}) {
		t.Fatalf("search: %v %+v", err, res)
	}
	if res, _ := c.Search(ctx, "sunset", "", 10, ""); len(res.Models) != 1 || res.Models[0].ID != "acme:sunset" {
		t.Errorf("search: %+v; want acme:sunset alone (acme:studio/sunset is no acme id)", res.Models)
	}

	d, _, err := c.Describe(ctx, "acme:moonrise")
	if err != nil {
		t.Fatal(err)
	}
	if d.Provider != "acme" || d.Curated || d.Mapping.Prompt != "prompt" || len(d.Input) != 1 || d.Input[0].Name != "style" {
		t.Errorf("describe: %+v", d)
	}
	pm, err := c.Resolve(ctx, "acme:moonrise")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckInput(ctx, pm, map[string]any{"style": "noir"}); err != nil {
		t.Errorf("valid input refused: %v", err)
	}
	for _, in := range []map[string]any{{"style": "sepia"}, {"prompt": "set by input"}} {
		var ie *modelschema.InputError
		if err := c.CheckInput(ctx, pm, in); !errors.As(err, &ie) {
			t.Errorf("input %v: %v; want it refused", in, err)
		}
	}
}
