package modelschema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
)

// AllowSetting is the setting that lists allowed qualified models.
const AllowSetting = "DARKROOM_MODELS_ALLOW"

// Source is a provider's published model metadata: implemented by the
// adapters whose providers publish schemas, which fetch only from their
// configured API origins.
type Source interface {
	// Dialect is how the provider's qualified ids and documents read.
	Dialect() Dialect
	// Describe fetches a model's metadata and schema document. A model the
	// provider does not know is provider.ErrNotFound.
	Describe(ctx context.Context, ref Ref) (Info, error)
	// Search asks the provider's own model search. cursor is the
	// provider's ("" for the first page).
	Search(ctx context.Context, query string, limit int, cursor string) (Page, error)
}

// Page is one page of a provider's search.
type Page struct {
	Hits []Hit
	Next string // the provider's cursor; "" at the end
}

// Hit is one model a search found.
type Hit struct {
	ID          string        `json:"modelId"`
	Title       string        `json:"title,omitempty"`
	Description string        `json:"description,omitempty"`
	Kind        provider.Kind `json:"kind,omitempty"`
	// Source is where a search found it: "curated", or the name of the
	// provider whose search did.
	Source string `json:"source"`
}

// Stored is a schema document as a Store keeps it.
type Stored struct {
	ModelID   string
	Info      []byte // Info as JSON
	FetchedAt time.Time
}

// Store keeps fetched schemas (the engines' model_schemas table).
type Store interface {
	ModelSchema(ctx context.Context, modelID string) (Stored, error) // provider.ErrNotFound: none
	PutModelSchema(ctx context.Context, s Stored) error
}

// Config configures a Registry.
type Config struct {
	Allow Allow
	// Dialects are the providers whose models have qualified ids, by name,
	// configured or not (a configured Source brings its own): an id of one
	// not configured is refused as such, not as unknown.
	Dialects Dialects
	// Sources are the configured providers' (by provider name): a
	// provider without a token has none and serves no qualified id.
	Sources map[string]Source
	Store   Store
	// Refresh is the age after which a stored schema is fetched again in
	// the background (default 24 h); the stored copy serves meanwhile,
	// and goes on serving when the provider is down.
	Refresh time.Duration
	Pricing Pricing
	Now     func() time.Time
	Logger  *slog.Logger
	// Go runs a background refresh (default: a goroutine); tests make it
	// synchronous.
	Go func(func())
}

// Registry resolves qualified model ids and schemas. It is safe for
// concurrent use.
type Registry struct {
	cfg      Config
	dialects Dialects // cfg.Dialects and the sources'

	models *caches.Bounded[string, *Model] // caches.SchemaModels, by cacheKey
	misses *caches.Bounded[string, miss]   // caches.SchemaMisses, by cacheKey

	mu         sync.Mutex
	refreshing map[string]bool
}

// miss is a fetch's lasting failure (an unknown model, a schema darkroom
// cannot use), answered again for MissTTL without asking the provider.
type miss struct {
	err error
	at  time.Time
}

// MissTTL is how long a miss is remembered (caches.MissTTL).
const MissTTL = caches.MissTTL

// Model is a resolved model: its entry, schema and provider metadata.
type Model struct {
	Entry     catalog.Entry
	Schema    *Schema
	Info      Info
	PriceUnit string
	FetchedAt time.Time
	owned     map[string]string // Owned, built once
}

// New builds a Registry.
func New(cfg Config) *Registry {
	if cfg.Refresh <= 0 {
		cfg.Refresh = 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Go == nil {
		cfg.Go = func(f func()) { go f() }
	}
	if cfg.Pricing.Default == nil {
		cfg.Pricing = DefaultPricing
	}
	ds := Dialects{}
	for n, d := range cfg.Dialects {
		ds[n] = d
	}
	for n, s := range cfg.Sources {
		ds[n] = s.Dialect()
	}
	return &Registry{cfg: cfg, dialects: ds, refreshing: map[string]bool{},
		models: caches.New(caches.SchemaModels, caches.Options[string, *Model]{Now: cfg.Now}),
		misses: caches.New(caches.SchemaMisses, caches.Options[string, miss]{Now: cfg.Now})}
}

// Dialects are the providers whose qualified ids the registry reads.
func (r *Registry) Dialects() Dialects { return r.dialects }

// Allow is the registry's allow list.
func (r *Registry) Allow() Allow { return r.cfg.Allow }

// Searchable is a provider's source when it may serve qualified ids
// (configured and named by an allow pattern).
func (r *Registry) Searchable(name string) (Source, bool) {
	s, ok := r.cfg.Sources[name]
	return s, ok && r.cfg.Allow.Provider(name)
}

// NotEnabledError: a qualified id no allow pattern matches, or whose
// provider is not configured.
type NotEnabledError struct{ Msg string }

func (e *NotEnabledError) Error() string { return e.Msg }

// UnknownError: no such model.
type UnknownError struct{ Msg string }

func (e *UnknownError) Error() string { return e.Msg }

// Resolve resolves a qualified model id: allowed, its provider configured,
// its schema from memory, the store, or the provider (first fetch).
// Errors: *NotEnabledError, *UnknownError, *provider.RetryableError (the
// first fetch failed: try again), or another error for a schema darkroom
// cannot use.
func (r *Registry) Resolve(ctx context.Context, id string) (*Model, error) {
	ref, err := r.dialects.ParseID(id)
	if err != nil {
		return nil, &UnknownError{Msg: err.Error()}
	}
	if !r.cfg.Allow.Allows(ref) {
		return nil, &NotEnabledError{Msg: fmt.Sprintf("model %s is not enabled on this server; an operator enables it by adding a pattern such as %q to %s", id, Hint(ref), AllowSetting)}
	}
	src, ok := r.cfg.Sources[ref.Provider]
	if !ok {
		return nil, &NotEnabledError{Msg: fmt.Sprintf("model %s is not enabled on this server: the %s provider is not configured (its API token is not set)", id, ref.Provider)}
	}
	return r.get(ctx, ref, src, nil)
}

// ForEntry resolves a curated entry's schema (for its provider-native
// input and describe_model). A provider with no published schema (no
// Source), or one not configured, has none: ok is false.
func (r *Registry) ForEntry(ctx context.Context, e catalog.Entry) (m *Model, ok bool, err error) {
	src, have := r.cfg.Sources[e.Provider]
	if !have {
		return nil, false, nil
	}
	ref := Ref{Provider: e.Provider, Path: e.Endpoint}
	if e.Version != "" {
		_, v, found := cutLast(e.Version, ":")
		if !found {
			v = e.Version
		}
		ref.Version = v
		if ref.Path == "" {
			ref.Path, _, _ = cutLast(e.Version, ":")
		}
	}
	m, err = r.get(ctx, ref, src, &e)
	return m, err == nil, err
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

func (r *Registry) get(ctx context.Context, ref Ref, src Source, curated *catalog.Entry) (*Model, error) {
	key := cacheKey(ref, curated)
	now := r.cfg.Now()
	m, _ := r.models.Get(key)
	if m == nil {
		if missed, ok := r.misses.Get(key); ok && now.Sub(missed.at) < MissTTL {
			return nil, missed.err
		}
	}
	if m == nil && r.cfg.Store != nil {
		st, err := r.cfg.Store.ModelSchema(ctx, ref.ID())
		switch {
		case err == nil:
			var info Info
			if json.Unmarshal(st.Info, &info) == nil {
				if built, err := r.build(ref, info, st.FetchedAt, curated); err == nil {
					if curated == nil && r.dialects[ref.Provider].Stale(info) {
						// Stored before darkroom read all the provider
						// says (Replicate's is_official: its entry would
						// name a version Replicate refuses). Ask once
						// more; if the provider cannot answer, the stored
						// copy serves as before.
						if fresh, err := r.fetch(ctx, ref, src, curated); err == nil {
							return fresh, nil
						}
					}
					m = built
					r.keep(key, m)
				}
			}
		case !errors.Is(err, provider.ErrNotFound):
			return nil, err
		}
	}
	if m != nil {
		if now.Sub(m.FetchedAt) >= r.cfg.Refresh {
			r.refresh(ref, src, curated)
		}
		return m, nil
	}
	m, err := r.fetch(ctx, ref, src, curated)
	var re *provider.RetryableError
	if err != nil && !errors.As(err, &re) && ctx.Err() == nil {
		r.remember(key, err, now)
	}
	return m, err
}

// remember holds a miss.
func (r *Registry) remember(key string, err error, now time.Time) {
	r.misses.Put(key, miss{err: err, at: now})
}

// fetch asks the provider, stores the document and caches the model.
func (r *Registry) fetch(ctx context.Context, ref Ref, src Source, curated *catalog.Entry) (*Model, error) {
	info, err := src.Describe(ctx, ref)
	if errors.Is(err, provider.ErrNotFound) {
		return nil, &UnknownError{Msg: fmt.Sprintf("model %s does not exist at %s (search_models finds models)", ref.ID(), ref.Provider)}
	}
	if err != nil {
		var re *provider.RetryableError
		var after time.Duration
		if errors.As(err, &re) {
			after = re.After
		}
		return nil, &provider.RetryableError{Err: fmt.Errorf("reading %s's schema from %s failed (%w); try again shortly (nothing was charged)", ref.ID(), ref.Provider, err), After: after}
	}
	if err := CheckBounds(info.Doc, MaxSchemaBytes, MaxSchemaDepth); err != nil {
		return nil, fmt.Errorf("%s's schema %w: darkroom does not use it", ref.ID(), err)
	}
	info.Doc = Canonical(info.Doc)
	now := r.cfg.Now()
	m, err := r.build(ref, info, now, curated)
	if err != nil {
		return nil, err
	}
	if r.cfg.Store != nil {
		b, _ := json.Marshal(info)
		if err := r.cfg.Store.PutModelSchema(ctx, Stored{ModelID: ref.ID(), Info: b, FetchedAt: now}); err != nil {
			r.cfg.Logger.Warn("model schema not stored", "model", ref.ID(), "err", err)
		}
	}
	r.keep(cacheKey(ref, curated), m)
	return m, nil
}

// cacheKey is where a model is held in memory: a curated entry's schema
// apart from the same model's qualified id (their entries differ; the
// stored document, keyed by the qualified id, is one).
func cacheKey(ref Ref, curated *catalog.Entry) string {
	if curated != nil {
		return ref.ID() + "\x00" + curated.ID
	}
	return ref.ID()
}

// keep holds m (a stored one is read again from the store when it has
// left the cache).
func (r *Registry) keep(key string, m *Model) {
	r.misses.Delete(key)
	r.models.Put(key, m)
}

// Known is a qualified model this process resolved and still holds, with
// no store read or fetch: generation.Service's lookup of a model by id
// (generation.Models). A curated entry's schema is not one.
func (r *Registry) Known(id string) (provider.Model, bool) {
	ref, err := r.dialects.ParseID(id)
	if err != nil {
		return provider.Model{}, false
	}
	// Peek, not Get: this looks up what Resolve just found for the same
	// request (generation.Service.Model), not a read the cache's switch
	// may answer from the store instead.
	m, ok := r.models.Peek(cacheKey(ref, nil))
	if !ok {
		return provider.Model{}, false
	}
	return m.Model(), true
}

// refresh fetches again in the background, once at a time per model; a
// failure keeps the copy held.
func (r *Registry) refresh(ref Ref, src Source, curated *catalog.Entry) {
	key := cacheKey(ref, curated)
	r.mu.Lock()
	if r.refreshing[key] {
		r.mu.Unlock()
		return
	}
	r.refreshing[key] = true
	r.mu.Unlock()
	r.cfg.Go(func() {
		defer func() {
			r.mu.Lock()
			delete(r.refreshing, key)
			r.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := r.fetch(ctx, ref, src, curated); err != nil {
			r.cfg.Logger.Warn("model schema refresh failed; serving the stored copy", "model", key, "err", err)
		}
	})
}

func (r *Registry) build(ref Ref, info Info, fetched time.Time, curated *catalog.Entry) (*Model, error) {
	d := r.dialects[ref.Provider]
	layout := d.Layout(info.Format)
	if layout == 0 {
		return nil, fmt.Errorf("%s: unknown schema format %q", ref.ID(), info.Format)
	}
	s, err := Compile(layout, info.Doc, ref.Path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref.ID(), err)
	}
	m := &Model{Schema: s, Info: info, FetchedAt: fetched, PriceUnit: UnitRun}
	if curated != nil {
		m.Entry = *curated
		m.owned = owned(m.Entry, s)
		return m, nil
	}
	e, err := Entry(ref, info, s, r.cfg.Pricing, d)
	if err != nil {
		return nil, err
	}
	m.PriceUnit = r.cfg.Pricing.unit(info.Price)
	m.Entry = e
	m.owned = owned(e, s)
	return m, nil
}

// Model is the resolved model as darkroom's provider.Model.
func (m *Model) Model() provider.Model {
	pm := m.Entry.Model()
	pm.PriceUnit = m.PriceUnit
	return pm
}
