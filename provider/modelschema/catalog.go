package modelschema

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
)

// Catalog answers darkroom's questions about any model: the curated
// entries of the configured providers and, through the Registry, the
// qualified ids the operator allows. It implements generation.Models.
type Catalog struct {
	reg     *Registry
	curated map[string]catalog.Entry
	order   []provider.Model // the service's models, in list order
	now     func() time.Time
	// searched are the configured sources' names in the order they are
	// searched: as the service lists its providers' models, then by name.
	searched []string
	native   map[string]Native // providers that describe their own models (native.go)

	searches *caches.Bounded[string, searchEntry] // caches.Searches, by kind and query
}

type searchEntry struct {
	hits []Hit
	at   time.Time
}

// SearchTTL is how long a search's results are reused (caches.SearchTTL).
const SearchTTL = caches.SearchTTL

// MaxSearchLimit bounds one page of search_models.
const MaxSearchLimit = 50

// NewCatalog builds a Catalog over the registry, the curated entries and
// the models the service lists (provider.Model, in order).
func NewCatalog(reg *Registry, entries []catalog.Entry, models []provider.Model) *Catalog {
	c := &Catalog{reg: reg, curated: map[string]catalog.Entry{}, order: models, now: reg.cfg.Now,
		searches: caches.New(caches.Searches, caches.Options[string, searchEntry]{Now: reg.cfg.Now})}
	for _, m := range models {
		if _, ok := reg.cfg.Sources[m.Provider]; ok && !slices.Contains(c.searched, m.Provider) {
			c.searched = append(c.searched, m.Provider)
		}
	}
	var rest []string
	for name := range reg.cfg.Sources {
		if !slices.Contains(c.searched, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	c.searched = append(c.searched, rest...)
	for _, e := range entries {
		if !e.Disabled {
			c.curated[e.ID] = e
		}
	}
	return c
}

// Resolve implements generation.Models.
func (c *Catalog) Resolve(ctx context.Context, id string) (provider.Model, error) {
	if !c.reg.dialects.Qualified(id) {
		return provider.Model{}, &UnknownError{Msg: fmt.Sprintf("unknown modelId %q: it does not exist (list_models and search_models list the available ids)", id)}
	}
	m, err := c.reg.Resolve(ctx, id)
	if err != nil {
		return provider.Model{}, err
	}
	return m.Model(), nil
}

// Known implements generation.Models: a qualified model the registry
// holds (Registry.Known).
func (c *Catalog) Known(id string) (provider.Model, bool) { return c.reg.Known(id) }

// resolved is a model's entry and schema (nil schema: its provider
// publishes none).
func (c *Catalog) resolved(ctx context.Context, id string) (catalog.Entry, *Model, error) {
	if e, ok := c.curated[id]; ok {
		m, ok, err := c.reg.ForEntry(ctx, e)
		if err != nil || !ok {
			return e, nil, err
		}
		return e, m, nil
	}
	if !c.reg.dialects.Qualified(id) {
		return catalog.Entry{}, nil, &UnknownError{Msg: fmt.Sprintf("unknown modelId %q: it does not exist (list_models and search_models list the available ids)", id)}
	}
	m, err := c.reg.Resolve(ctx, id)
	if err != nil {
		return catalog.Entry{}, nil, err
	}
	return m.Entry, m, nil
}

// CheckInput implements generation.Models.
func (c *Catalog) CheckInput(ctx context.Context, pm provider.Model, input map[string]any) error {
	if n, ok := c.native[pm.Provider]; ok {
		if err := n.CheckModelInput(ctx, pm.ID, input); err != nil {
			return &InputError{Msg: err.Error()}
		}
		return nil
	}
	if _, publishes := c.reg.dialects[pm.Provider]; !publishes {
		return &InputError{Msg: fmt.Sprintf("%s takes no input: its provider (%s) publishes no input schema darkroom can check it against", pm.ID, pm.Provider)}
	}
	e, m, err := c.resolved(ctx, pm.ID)
	if err != nil {
		return err
	}
	if m == nil {
		return &InputError{Msg: fmt.Sprintf("%s takes no input: its provider (%s) publishes no input schema darkroom can check it against", pm.ID, e.Provider)}
	}
	return m.Schema.CheckInput(ctx, pm.ID, input, m.Owned())
}

// Description is describe_model's answer.
type Description struct {
	ModelID     string        `json:"modelId"`
	Provider    string        `json:"provider"`
	Kind        provider.Kind `json:"kind"`
	Title       string        `json:"title"`
	Description string        `json:"description"`
	Credits     int64         `json:"credits"`
	PriceUnit   string        `json:"priceUnit"`
	// Curated: in darkroom's own catalog (tested field map, fixed price).
	Curated      bool     `json:"curated"`
	AspectRatios []string `json:"aspectRatios"`
	Durations    []int    `json:"durations,omitempty"`
	MaxCount     int      `json:"maxCount"`
	Mapping      Mapping  `json:"mapping"`
	// Input lists the provider-native fields generate's input may set
	// (those darkroom's own arguments set are left out); nil when the
	// provider publishes no schema.
	Input           []Field `json:"input"`
	SchemaFetchedAt string  `json:"schemaFetchedAt,omitempty"`
}

// Mapping is which of generate's arguments reach which provider field.
type Mapping struct {
	Prompt          string          `json:"prompt"`
	NegativePrompt  string          `json:"negativePrompt,omitempty"`
	AspectRatio     string          `json:"aspectRatio,omitempty"`
	Seed            string          `json:"seed,omitempty"`
	DurationSeconds string          `json:"durationSeconds,omitempty"`
	Count           string          `json:"count,omitempty"`
	InputImage      string          `json:"inputImage,omitempty"`
	Roles           map[string]Role `json:"roles,omitempty"`
}

// Role is one input role's field.
type Role struct {
	Field string `json:"field"`
	Max   int    `json:"max"`
}

// Describe answers describe_model. key changes whenever the answer does
// (the schema's fetch time), for the reply cache.
func (c *Catalog) Describe(ctx context.Context, id string) (d *Description, key string, err error) {
	if _, curated := c.curated[id]; !curated && !c.reg.dialects.Qualified(id) {
		for _, m := range c.order { // a model of no catalog entry (the local provider's)
			if m.ID == id {
				if n, ok := c.native[m.Provider]; ok {
					if d, ok := n.DescribeModel(id); ok {
						return d, id, nil
					}
				}
				return DescribeModel(m), id, nil
			}
		}
	}
	e, m, err := c.resolved(ctx, id)
	if err != nil {
		return nil, "", err
	}
	_, curated := c.curated[id]
	pm := e.Model()
	if m != nil && !curated {
		pm = m.Model()
	}
	d = &Description{ModelID: id, Provider: e.Provider, Kind: e.Kind, Title: e.Title, Description: e.Description,
		Credits: pm.Credits, PriceUnit: pm.PriceUnit, Curated: curated, AspectRatios: slices.Clone(e.AspectRatios), Durations: e.Durations,
		MaxCount: max(e.MaxCount, 1),
		Mapping: Mapping{Prompt: e.Input.Prompt, NegativePrompt: e.Input.NegativePrompt, AspectRatio: e.Input.AspectRatio, Seed: e.Input.Seed,
			DurationSeconds: e.Input.Duration, Count: e.Input.Count, InputImage: e.Input.InputImage}}
	if d.AspectRatios == nil {
		d.AspectRatios = []string{}
	}
	for role, r := range e.Roles {
		if d.Mapping.Roles == nil {
			d.Mapping.Roles = map[string]Role{}
		}
		d.Mapping.Roles[role] = Role{Field: r.Field, Max: max(r.Max, 1)}
	}
	key = id
	if m != nil {
		owned := m.Owned()
		d.Input = []Field{}
		for _, f := range m.Schema.Fields {
			if _, own := owned[f.Name]; !own {
				d.Input = append(d.Input, f)
			}
		}
		d.SchemaFetchedAt = m.FetchedAt.UTC().Format(time.RFC3339)
		key += "@" + d.SchemaFetchedAt
	}
	return d, key, nil
}

// DescribeModel is Describe for a model the service lists without a
// catalog entry (the local provider's).
func DescribeModel(m provider.Model) *Description {
	d := &Description{ModelID: m.ID, Provider: m.Provider, Kind: m.Kind, Title: m.Title, Description: m.Description,
		Credits: m.Credits, PriceUnit: cmpOr(m.PriceUnit, UnitRun), Curated: true, AspectRatios: slices.Clone(m.AspectRatios),
		Durations: m.Durations, MaxCount: max(m.MaxCount, 1), Mapping: Mapping{Prompt: "prompt"}}
	if d.AspectRatios == nil {
		d.AspectRatios = []string{}
	}
	return d
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// SearchResult is search_models' answer.
type SearchResult struct {
	Models     []Hit  `json:"models"`
	NextCursor string `json:"nextCursor,omitempty"`
	// Sources are where the results come from: "curated" and each
	// provider searched.
	Sources []string `json:"sources"`
	// At is when the search ran (its results are reused until SearchTTL):
	// a reply cache key.
	At time.Time `json:"-"`
}

// Search answers search_models: the curated models matching query (in
// id, title or description, case-insensitive) and kind, then each allowed
// and configured provider's own search (its first page, up to
// MaxSearchLimit), filtered by the allow list and kind. One search is
// kept SearchTTL; cursor pages through it (opaque: an offset bound to the
// query). A provider that fails is left out of Sources, and that search
// is not kept: the next one asks again.
func (c *Catalog) Search(ctx context.Context, query string, kind provider.Kind, limit int, cursor string) (*SearchResult, error) {
	if limit <= 0 || limit > MaxSearchLimit {
		limit = min(max(limit, 20), MaxSearchLimit)
	}
	query = strings.TrimSpace(query)
	skey := string(kind) + "\x00" + strings.ToLower(query)
	off := 0
	if cursor != "" {
		var err error
		if off, err = decodeCursor(cursor, skey); err != nil {
			return nil, &InputError{Msg: "cursor is not one search_models gave for this query and kind: start again without it"}
		}
	}
	hits, sources, at := c.searchAll(ctx, query, kind, skey)
	res := &SearchResult{Models: []Hit{}, Sources: sources, At: at}
	end := min(off+limit, len(hits))
	if off < end {
		res.Models = hits[off:end]
	}
	if end < len(hits) {
		res.NextCursor = encodeCursor(end, skey)
	}
	return res, nil
}

func (c *Catalog) searchAll(ctx context.Context, query string, kind provider.Kind, skey string) ([]Hit, []string, time.Time) {
	now := c.now()
	if s, ok := c.searches.Get(skey); ok && now.Sub(s.at) < SearchTTL {
		return s.hits, sourcesOf(s.hits), s.at
	}
	q := strings.ToLower(query)
	var hits []Hit
	failed := false
	seen := map[string]bool{}
	for _, m := range c.order {
		if kind != "" && m.Kind != kind {
			continue
		}
		if q == "" || strings.Contains(strings.ToLower(m.ID+" "+m.Title+" "+m.Description), q) {
			hits = append(hits, Hit{ID: m.ID, Title: m.Title, Description: m.Description, Kind: m.Kind, Source: "curated"})
			seen[m.ID] = true
		}
	}
	for _, name := range c.searched {
		src, ok := c.reg.Searchable(name)
		if !ok {
			continue
		}
		page, err := src.Search(ctx, query, MaxSearchLimit, "")
		if err != nil {
			c.reg.cfg.Logger.Warn("model search failed", "provider", name, "err", err)
			failed = true
			continue
		}
		for _, h := range page.Hits {
			ref, err := c.reg.dialects.ParseID(h.ID)
			if err != nil || !c.reg.cfg.Allow.Allows(ref) || seen[h.ID] || (kind != "" && h.Kind != "" && h.Kind != kind) {
				continue
			}
			seen[h.ID] = true
			h.Source = name
			if len(h.Description) > 300 {
				h.Description = h.Description[:300] + "…"
			}
			hits = append(hits, h)
		}
	}
	if failed { // this caller's answer only: the next search asks again
		return hits, sourcesOf(hits), now
	}
	c.searches.Put(skey, searchEntry{hits: hits, at: now})
	return hits, sourcesOf(hits), now
}

func sourcesOf(hits []Hit) []string {
	out := []string{"curated"}
	for _, h := range hits {
		if !slices.Contains(out, h.Source) {
			out = append(out, h.Source)
		}
	}
	return out
}

func encodeCursor(off int, skey string) string {
	sum := sha256.Sum256([]byte(skey))
	b, _ := json.Marshal([]string{strconv.Itoa(off), hex.EncodeToString(sum[:8])})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(c, skey string) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) > 200 {
		return 0, fmt.Errorf("bad cursor")
	}
	var v []string
	if json.Unmarshal(b, &v) != nil || len(v) != 2 {
		return 0, fmt.Errorf("bad cursor")
	}
	sum := sha256.Sum256([]byte(skey))
	off, err := strconv.Atoi(v[0])
	if err != nil || off < 0 || v[1] != hex.EncodeToString(sum[:8]) {
		return 0, fmt.Errorf("bad cursor")
	}
	return off, nil
}
