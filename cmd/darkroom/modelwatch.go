package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
)

// modelWatch keeps the last listing each provider's vendor gave (which
// curated models it lists for our credentials) and withdraws the models
// it no longer lists. A provider that cannot be asked keeps its last
// listing: an outage withdraws nothing.
type modelWatch struct {
	mu      sync.Mutex
	listing map[string]map[string]bool // by provider, by model id
	at      map[string]time.Time       // when each listing was read
	gone    map[string]string          // withdrawn now, with why
}

// watchModels reads every provider's listing at start and every
// DARKROOM_MODELS_REFRESH (±10%, so replicas started together spread
// their asks) until ctx ends.
func (a *app) watchModels(ctx context.Context) {
	if a.cfg.ModelsRefresh <= 0 {
		return
	}
	for {
		a.refreshModels(ctx)
		jitter := time.Duration(rand.Int64N(int64(a.cfg.ModelsRefresh/5)+1)) - a.cfg.ModelsRefresh/10
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.cfg.ModelsRefresh + jitter):
		}
	}
}

// refreshModels asks each provider that can list which curated models its
// vendor lists, withdraws those it does not (free refusal, out of
// list_models) and restores those it lists again; each change is logged
// once.
func (a *app) refreshModels(ctx context.Context) {
	entries, err := curatedEntries(a.cfg)
	if err != nil {
		a.log.Warn("models refresh: curated catalog", "err", err)
		return
	}
	w := &a.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.listing == nil {
		w.listing, w.at, w.gone = map[string]map[string]bool{}, map[string]time.Time{}, map[string]string{}
	}
	for _, p := range a.providers {
		l, ok := provider.As[provider.Lister](p)
		if !ok {
			continue
		}
		listed, err := l.Listed(ctx)
		if err != nil {
			a.log.Warn("models refresh: provider not asked; its last listing stands", "provider", p.Name(), "listing_age", ageOf(w.at[p.Name()]), "err", err)
			continue
		}
		w.listing[p.Name()], w.at[p.Name()] = listed, time.Now()
	}
	gone := map[string]string{}
	for _, e := range entries {
		listed, ok := w.listing[e.Provider][e.ID]
		if !ok {
			continue // not asked, or cannot be
		}
		a.metrics.ModelAvailable(e.ID, listed)
		if !listed {
			gone[e.ID] = fmt.Sprintf("%s no longer lists %s for this server's credentials (checked %s)", vendorName(e), cmpOr(e.Endpoint, e.Version), w.at[e.Provider].UTC().Format(time.RFC3339))
		}
	}
	for id := range gone {
		if _, was := w.gone[id]; !was {
			a.log.Warn("model withdrawn: its vendor no longer lists it", "model", id, "why", gone[id])
		}
	}
	for id := range w.gone {
		if _, still := gone[id]; !still {
			a.log.Info("model available again: its vendor lists it", "model", id)
		}
	}
	w.gone = gone
	a.svc.Withdraw(maps.Clone(gone))
}

// vendorName is how a caller knows an entry's vendor.
func vendorName(e catalog.Entry) string {
	switch e.Provider {
	case "google":
		return "Google"
	case "openai":
		return "OpenAI"
	case "replicate":
		return "Replicate"
	}
	return e.Provider
}

func ageOf(t time.Time) string {
	if t.IsZero() {
		return "never read"
	}
	return time.Since(t).Round(time.Second).String()
}

func cmpOr(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
