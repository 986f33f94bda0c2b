package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/comfyui"
	"github.com/darkroom-mcp/darkroom/provider/fal"
	"github.com/darkroom-mcp/darkroom/provider/fetch"
	"github.com/darkroom-mcp/darkroom/provider/google"
	"github.com/darkroom-mcp/darkroom/provider/openai"
	"github.com/darkroom-mcp/darkroom/provider/replicate"
)

// adapter is one remote provider darkroom can run: adding a provider is
// one row of adapters (its settings are rows of the settings table,
// config.go). Its curated models are the catalog entries naming it, which
// it checks itself when it is built (its package's CheckEntry).
type adapter struct {
	name string
	// on reports whether the configuration turns it on (its key is set).
	on func(*config) bool
	// build makes it; b.entries are the curated entries naming it.
	build func(ctx context.Context, b adapterEnv) (provider.Provider, error)
}

// adapterEnv is what an adapter is built from.
type adapterEnv struct {
	cfg     *config
	log     *slog.Logger
	entries []catalog.Entry // the curated entries naming the adapter
	spool   provider.Spool  // where synchronous calls' results wait for the runner
}

// fetch is how the adapter reads outputs: from its vendor's hosts
// (defaults), and those DARKROOM_OUTPUT_HOSTS adds.
func (b adapterEnv) fetch(defaults []string) fetch.Options {
	o := fetch.Options{AllowHTTP: b.cfg.UnsafeOutputFetch, AllowPrivate: b.cfg.UnsafeOutputFetch}
	if len(b.cfg.OutputHosts) > 0 {
		o.Hosts = append(slices.Clone(defaults), b.cfg.OutputHosts...)
	}
	return o
}

// adapters are the remote providers, in the order list_models shows them.
var adapters = []adapter{
	{name: replicate.Name, on: func(c *config) bool { return c.ReplicateToken != "" }, build: buildReplicate},
	{name: fal.Name, on: func(c *config) bool { return c.FalKey != "" }, build: buildFal},
	{name: google.Name, on: func(c *config) bool { return c.GeminiKey != "" || c.GoogleProject != "" }, build: buildGoogle},
	{name: openai.Name, on: func(c *config) bool { return c.OpenAIKey != "" }, build: buildOpenAI},
	{name: comfyui.Name, on: func(c *config) bool { return len(c.ComfyURLs) > 0 }, build: func(_ context.Context, b adapterEnv) (provider.Provider, error) {
		return comfyProvider(b.cfg, b.log)
	}},
}

// remoteProviders builds every adapter the configuration turns on; one
// without its key is absent, and so are its models (asked for one, the
// server names the key: unavailableModels). spool holds synchronous
// calls' results (Google's and OpenAI's) until the runner copies them.
func remoteProviders(ctx context.Context, cfg *config, log *slog.Logger, spool provider.Spool) ([]provider.Provider, error) {
	entries, err := curatedEntries(cfg)
	if err != nil {
		return nil, err
	}
	var out []provider.Provider
	for _, a := range adapters {
		if !a.on(cfg) {
			continue
		}
		p, err := a.build(ctx, adapterEnv{cfg: cfg, log: log, entries: catalog.ForProvider(entries, a.name), spool: spool})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func buildReplicate(ctx context.Context, b adapterEnv) (provider.Provider, error) {
	p, err := replicate.New(replicate.Config{
		Token: b.cfg.ReplicateToken, BaseURL: b.cfg.ReplicateBaseURL, WebhookSecret: b.cfg.ReplicateSecret,
		Models: b.entries, Fetch: b.fetch(replicate.DefaultOutputHosts),
		WaitBelow: b.cfg.replicateWaitBelow,
	})
	if err != nil {
		return nil, err
	}
	if b.cfg.Webhooks && b.cfg.ReplicateSecret == "" {
		if err := p.LoadWebhookSecret(ctx); err != nil {
			b.log.Warn("replicate: no webhook secret; polling instead", "err", err)
		}
	}
	return p, nil
}

func buildFal(_ context.Context, b adapterEnv) (provider.Provider, error) {
	return fal.New(fal.Config{
		Key: b.cfg.FalKey, QueueURL: b.cfg.FalQueueURL, MaxConcurrent: b.cfg.FalConcurrency, APIURL: b.cfg.FalAPIURL, OpenAPIURL: b.cfg.FalOpenAPIURL,
		WebhookJWKSURL: b.cfg.FalJWKSURL, WebhookUserID: b.cfg.FalUserID,
		Models: b.entries, Fetch: b.fetch(fal.DefaultOutputHosts),
		StreamStall: b.cfg.falStreamStall,
	})
}

// buildGoogle is the Gemini API with a key, and Vertex AI with a project.
func buildGoogle(_ context.Context, b adapterEnv) (provider.Provider, error) {
	gc := google.Config{
		Key: b.cfg.GeminiKey, BaseURL: b.cfg.GeminiBaseURL, Spool: b.spool,
		Models: b.entries, Fetch: b.fetch(google.DefaultOutputHosts),
	}
	if b.cfg.GoogleProject != "" {
		gc.Vertex = &google.Vertex{Project: b.cfg.GoogleProject, Location: b.cfg.GoogleLocation, BaseURL: b.cfg.VertexBaseURL}
		if b.cfg.GoogleCreds != "" {
			creds, err := os.ReadFile(b.cfg.GoogleCreds)
			if err != nil {
				return nil, fmt.Errorf("DARKROOM_GOOGLE_CREDENTIALS: %w", err)
			}
			gc.Vertex.Credentials = creds
		}
	}
	return google.New(gc)
}

func buildOpenAI(_ context.Context, b adapterEnv) (provider.Provider, error) {
	return openai.New(openai.Config{
		Key: b.cfg.OpenAIKey, BaseURL: b.cfg.OpenAIBaseURL, Organization: b.cfg.OpenAIOrg, Project: b.cfg.OpenAIProject,
		Spool: b.spool, Models: b.entries,
	})
}
