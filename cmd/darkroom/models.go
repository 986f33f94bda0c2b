package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/provider/google"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/provider/openai"
	"github.com/darkroom-mcp/darkroom/provider/replicate"
)

// qualified are the providers whose models callers may name by a
// provider-qualified id (DARKROOM_MODELS_ALLOW), each with its adapter's
// dialect: known whether or not the provider is configured, so that an id
// of one without its key is refused as not configured.
var qualified = modelschema.Dialects{replicate.Name: replicate.Dialect{}, fal.Name: fal.Dialect{}}

// setModelsAllow reads DARKROOM_MODELS_ALLOW: patterns of the qualified
// providers only.
func setModelsAllow(c *config, v string) (err error) {
	c.ModelsAllow, err = modelschema.ParseAllow(v, qualified.Names())
	return err
}

// curatedEntries is the model catalog: the embedded one, with the
// operator's file merged over it.
func curatedEntries(cfg *config) ([]catalog.Entry, error) {
	entries := catalog.Default()
	if cfg.ModelsFile != "" {
		over, err := catalog.Load(cfg.ModelsFile)
		if err != nil {
			return nil, fmt.Errorf("DARKROOM_MODELS_FILE: %w", err)
		}
		entries = catalog.Merge(entries, over)
	}
	// Each adapter checks its own entries when it is built; a provider
	// no adapter answers to is refused here, configured or not.
	for _, e := range entries {
		if _, known := providerKeys[e.Provider]; !known && !e.Disabled {
			return nil, fmt.Errorf("DARKROOM_MODELS_FILE: model %q: provider %q is not one darkroom runs (%s)", e.ID, e.Provider, strings.Join(slices.Sorted(maps.Keys(providerKeys)), ", "))
		}
	}
	return entries, nil
}

// withProviderModels is entries and, for each model a provider describes
// itself (modelschema.Native: ComfyUI's workflows) and can list
// (provider.Lister), an entry whose vendor model is its own id: models
// check and the models watch cover those as they do curated ones.
func withProviderModels(entries []catalog.Entry, providers []provider.Provider) []catalog.Entry {
	known := map[string]bool{}
	for _, e := range entries {
		known[e.ID] = true
	}
	out := slices.Clone(entries)
	for _, p := range providers {
		_, native := provider.As[modelschema.Native](p)
		_, lists := provider.As[provider.Lister](p)
		if !native || !lists {
			continue
		}
		for _, m := range p.Models() {
			if !known[m.ID] {
				out = append(out, catalog.Entry{ID: m.ID, Provider: p.Name(), Kind: m.Kind, Title: m.Title, Endpoint: m.ID})
			}
		}
	}
	return out
}

// providerKeys names the setting that turns each remote provider on.
var providerKeys = map[string]string{replicate.Name: "replicate-api-token", fal.Name: "fal-key", google.Name: "gemini-api-key", openai.Name: "openai-api-key"}

// unavailableModels are the enabled curated models no configured
// provider serves, each with the variable that would turn it on (the
// vendor's own name, GEMINI_API_KEY, which the server reads as well as its
// DARKROOM_ one; DARKROOM_GOOGLE_PROJECT for Vertex AI's).
func unavailableModels(entries []catalog.Entry, configured []provider.Provider) map[string]string {
	served := map[string]bool{}
	for _, p := range configured {
		for _, m := range p.Models() {
			served[m.ID] = true
		}
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.Disabled || served[e.ID] {
			continue
		}
		flag := providerKeys[e.Provider]
		if e.Provider == google.Name && google.Backend(e) == "vertex" {
			flag = "google-project"
		}
		out[e.ID] = "the " + e.Provider + " provider's key"
		for _, s := range serverSettings("serve") {
			if s.flag == flag {
				out[e.ID] = s.env[len(s.env)-1]
			}
		}
	}
	return out
}

// schemaStore is the engine's store of fetched model schemas.
type schemaStore interface {
	ModelSchemas() modelschema.Store
}

// buildModels builds the model catalog beyond the curated one: the
// registry of qualified ids over the configured Replicate and fal
// providers (each its own schema source, fetching only from its
// configured origin), the allow list, the store, the prices; and hands
// each of those providers the resolver for the qualified ids it serves.
func (a *app) buildModels(entries []catalog.Entry) {
	sources := map[string]modelschema.Source{}
	type resolvable interface {
		SetResolve(func(ctx context.Context, id string) (catalog.Entry, error))
	}
	var providers []resolvable
	var models []provider.Model
	for _, p := range a.providers {
		if s, ok := p.(modelschema.Source); ok {
			sources[p.Name()] = s
		}
		if r, ok := p.(resolvable); ok {
			providers = append(providers, r)
		}
		for _, m := range p.Models() {
			m.Provider = p.Name()
			models = append(models, m)
		}
	}
	rc := modelschema.Config{Allow: a.cfg.ModelsAllow, Dialects: qualified, Sources: sources, Refresh: a.cfg.SchemaRefresh, Logger: a.log,
		Pricing: modelschema.Pricing{CreditsPerUSD: a.cfg.CreditsPerUSD, Default: a.cfg.DefaultCredits}}
	if rc.Pricing.Default == nil {
		rc.Pricing = modelschema.DefaultPricing
	}
	if s, ok := a.db.(schemaStore); ok {
		rc.Store = s.ModelSchemas()
	}
	reg := modelschema.New(rc)
	for _, p := range providers {
		p.SetResolve(func(ctx context.Context, id string) (catalog.Entry, error) {
			m, err := reg.Resolve(ctx, id)
			if err != nil {
				return catalog.Entry{}, err
			}
			return m.Entry, nil
		})
	}
	a.models = modelschema.NewCatalog(reg, entries, models)
	for _, p := range a.providers {
		if n, ok := p.(modelschema.Native); ok { // models described by their provider (ComfyUI's workflows)
			a.models.AddNative(p.Name(), n)
		}
	}
}
