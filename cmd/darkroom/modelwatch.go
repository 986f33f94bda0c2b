package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/server"
)

// modelWatch keeps the last listing each provider's vendor gave (which
// curated models it lists for our credentials) and withdraws the models
// it no longer lists. A provider that cannot be asked keeps its last
// listing: an outage withdraws nothing.
type modelWatch struct {
	mu      sync.Mutex
	listing map[string]map[string]bool // by provider, by vendor model
	at      map[string]time.Time       // when each listing was read
	gone    map[string]string          // withdrawn now, with why
	runs    map[string]string          // ids that run a later target now
}

// resolveTarget is the vendor model e runs given its provider's listing:
// the first of its candidates listed ("" when none is); asked is false
// when the listing says nothing of them.
func resolveTarget(e catalog.Entry, listed map[string]bool) (target string, asked bool) {
	for _, v := range e.Candidates() {
		ok, known := listed[v]
		asked = asked || known
		if ok {
			return v, true
		}
	}
	return "", asked
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
	// The vendors are asked without the lock (readiness reads it).
	fresh := map[string]map[string]bool{}
	failed := map[string]error{}
	for _, p := range a.providers {
		if l, ok := provider.As[provider.Lister](p); ok {
			if listed, err := l.Listed(ctx); err != nil {
				failed[p.Name()] = err
			} else {
				fresh[p.Name()] = listed
			}
		}
	}
	w := &a.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.listing == nil {
		w.listing, w.at, w.gone = map[string]map[string]bool{}, map[string]time.Time{}, map[string]string{}
	}
	for name, err := range failed {
		a.log.Warn("models refresh: provider not asked; its last listing stands", "provider", name, "listing_age", ageOf(w.at[name]), "err", err)
	}
	for name, listed := range fresh {
		w.listing[name], w.at[name] = listed, time.Now()
	}
	gone := map[string]string{}
	runs := map[string]map[string]string{} // by provider: id → the target it runs
	for _, e := range entries {
		target, asked := resolveTarget(e, w.listing[e.Provider])
		if !asked {
			continue // not asked, or cannot be
		}
		a.metrics.ModelAvailable(e.ID, target != "")
		switch {
		case target == "":
			gone[e.ID] = fmt.Sprintf("%s no longer lists %s for this server's credentials (checked %s)", vendorName(e), strings.Join(e.Candidates(), " or "), w.at[e.Provider].UTC().Format(time.RFC3339))
		case target != e.Candidates()[0]:
			if runs[e.Provider] == nil {
				runs[e.Provider] = map[string]string{}
			}
			runs[e.Provider][e.ID] = target
			if w.runs[e.ID] != target {
				a.log.Warn("model runs its next target: its vendor no longer lists the first", "model", e.ID, "runs", target)
			}
		}
	}
	w.runs = map[string]string{}
	for _, p := range a.providers {
		if r, ok := provider.As[provider.Retargeter](p); ok {
			r.Retarget(runs[p.Name()])
			maps.Copy(w.runs, runs[p.Name()])
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

// probe is /readyz's advisory models check: "withdrawn" while any
// curated model is (which, and how many, are in the log, not on the
// unauthenticated /readyz).
func (w *modelWatch) probe(context.Context) error {
	w.mu.Lock()
	n := len(w.gone)
	w.mu.Unlock()
	if n == 0 {
		return nil
	}
	return &server.NotReady{Category: "withdrawn", Err: fmt.Errorf("%d curated models withdrawn: their vendors no longer list them", n)}
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
