package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/server"
)

// modelWatch keeps the last listing each provider's vendor gave (which
// curated models it lists for our credentials, and any shutdown date),
// withdraws the models it no longer lists and flags those about to shut
// down. A provider that cannot be asked keeps its last listing, stored
// with its age: an outage withdraws nothing, nor does a restart during
// one.
type modelWatch struct {
	mu      sync.Mutex             // guards what follows
	listing map[string]readListing // by provider
	gone    map[string]string      // withdrawn now, with why
	runs    map[string]string      // ids that run a later target now
	ending  map[string]time.Time   // ids whose target shuts down within shutdownNotice
}

// readListing is one provider's listing with when its vendor was asked.
type readListing struct {
	listing provider.Listing
	at      time.Time
}

// shutdownNotice is how far ahead a vendor's announced shutdown date is
// flagged (describe_model and the log).
const shutdownNotice = 30 * 24 * time.Hour

// listingClaim is how long a replica that claimed a vendor's listing may
// take to ask it before another replica may.
const listingClaim = time.Minute

// resolveTarget is the vendor model e runs given its provider's listing:
// the first of its candidates listed ("" when none is), with what the
// vendor says of it; asked is false when the listing says nothing of
// them.
func resolveTarget(e catalog.Entry, listed provider.Listing) (target string, vm provider.VendorModel, asked bool) {
	for _, v := range e.Candidates() {
		m, known := listed[v]
		asked = asked || known
		if m.Listed {
			return v, m, true
		}
	}
	return "", provider.VendorModel{}, asked
}

// modelsTick is how often the watch looks at the listings: a tenth of
// DARKROOM_MODELS_REFRESH, ±10% (replicas started together spread their
// looks). A look reads the stored listing; a listing older than
// refresh−tick is asked of its vendor, by one replica of a fleet, so
// every replica sees a vendor's change within one refresh.
func (a *app) modelsTick() time.Duration { return a.cfg.ModelsRefresh / 10 }

// watchModels looks at every provider's listing at start and every
// modelsTick until ctx ends.
func (a *app) watchModels(ctx context.Context) {
	if a.cfg.ModelsRefresh <= 0 {
		return
	}
	tick := a.modelsTick()
	for {
		a.refreshModels(ctx)
		jitter := time.Duration(rand.Int64N(int64(tick/5)+1)) - tick/10
		select {
		case <-ctx.Done():
			return
		case <-time.After(tick + jitter):
		}
	}
}

// listingStore is the engine's store of the providers' last listings.
type listingStore interface {
	ModelListings() provider.ListingStore
}

// refreshModels reads each listing provider's listing (stored, or asked
// of its vendor when stale), withdraws the curated models their vendors
// no longer list (free refusal, out of list_models), restores those they
// list again, retargets aliases and flags shutdown dates; each change is
// logged once.
func (a *app) refreshModels(ctx context.Context) {
	entries, err := curatedEntries(a.cfg)
	if err != nil {
		a.log.Warn("models refresh: curated catalog", "err", err)
		return
	}
	entries = withProviderModels(entries, a.providers)
	w := &a.watch
	now := time.Now()
	if a.cfg.modelsNow != nil {
		now = a.cfg.modelsNow()
	}
	// The vendors are asked without the lock (readiness reads it).
	w.mu.Lock()
	last := maps.Clone(w.listing)
	w.mu.Unlock()
	fresh := map[string]readListing{}
	for _, p := range a.providers {
		if l, ok := provider.As[provider.Lister](p); ok {
			if r, ok := a.readListing(ctx, p.Name(), l, last[p.Name()], now); ok {
				fresh[p.Name()] = r
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.listing == nil {
		w.listing, w.gone = map[string]readListing{}, map[string]string{}
	}
	maps.Copy(w.listing, fresh)
	gone := map[string]string{}
	ending := map[string]time.Time{}
	avail := map[string]generation.Availability{}
	runs := map[string]map[string]string{} // by provider: id → the target it runs
	for _, e := range entries {
		read := w.listing[e.Provider]
		target, vm, asked := resolveTarget(e, read.listing)
		if !asked {
			continue // not asked, or cannot be
		}
		a.metrics.ModelAvailable(e.ID, target != "")
		switch {
		case target == "":
			gone[e.ID] = fmt.Sprintf("%s no longer lists %s for this server's credentials (checked %s)", vendorName(e), strings.Join(e.Candidates(), " or "), read.at.UTC().Format(time.RFC3339))
			if why := read.listing[e.Candidates()[0]].Reason; why != "" {
				gone[e.ID] = fmt.Sprintf("%s cannot run %s: %s (checked %s)", vendorName(e), e.ID, why, read.at.UTC().Format(time.RFC3339))
			}
			avail[e.ID] = generation.Availability{Withdrawn: gone[e.ID], Successor: e.Successor}
			continue
		case target != e.Candidates()[0]:
			if runs[e.Provider] == nil {
				runs[e.Provider] = map[string]string{}
			}
			runs[e.Provider][e.ID] = target
			if w.runs[e.ID] != target {
				a.log.Warn("model runs its next target: its vendor no longer lists the first", "model", e.ID, "runs", target)
			}
		}
		if !vm.ShutdownDate.IsZero() && vm.ShutdownDate.Sub(now) < shutdownNotice {
			ending[e.ID] = vm.ShutdownDate
			avail[e.ID] = generation.Availability{ShutdownDate: vm.ShutdownDate, Successor: e.Successor}
			if !w.ending[e.ID].Equal(vm.ShutdownDate) {
				a.log.Warn("model shuts down soon: its vendor announced a date", "model", e.ID, "vendor_model", target, "shutdown_date", vm.ShutdownDate.Format(time.DateOnly), "successor", e.Successor)
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
			a.log.Warn("model withdrawn: its vendor no longer lists it", "model", id, "why", gone[id], "successor", avail[id].Successor)
		}
	}
	for id := range w.gone {
		if _, still := gone[id]; !still {
			a.log.Info("model available again: its vendor lists it", "model", id)
		}
	}
	w.gone, w.ending = gone, ending
	a.svc.SetAvailability(maps.Clone(avail))
}

// readListing is name's listing at now: the stored one while it is
// fresh (or while another replica asks the vendor), else the vendor's
// answer, stored for the other replicas. ok is false when there is none
// to go by; an error keeps the last listing and logs its age.
func (a *app) readListing(ctx context.Context, name string, l provider.Lister, last readListing, now time.Time) (readListing, bool) {
	var store provider.ListingStore
	if s, ok := a.db.(listingStore); ok {
		store = s.ModelListings()
	}
	stale := now.Add(-(a.cfg.ModelsRefresh - a.modelsTick()))
	have := last.at.After(time.Time{})
	if store != nil {
		stored, err := store.ModelListing(ctx, name)
		switch {
		case err == nil && stored.ReadAt.After(last.at):
			var got provider.Listing
			if err := json.Unmarshal(stored.Listing, &got); err != nil {
				a.log.Warn("models refresh: stored listing unreadable; asking the vendor", "provider", name, "err", err)
				break
			}
			last, have = readListing{listing: got, at: stored.ReadAt}, true
		case err != nil && !errors.Is(err, provider.ErrNotFound):
			a.log.Warn("models refresh: stored listing not read", "provider", name, "err", err)
		}
		if have && last.at.After(stale) {
			return last, true // fresh: asked by this or another replica
		}
		won, err := store.ClaimModelListing(ctx, name, stale, now, now.Add(listingClaim))
		if err != nil || !won {
			return last, have // another replica asks now; its answer is read next time
		}
	}
	ctx, cancel := context.WithTimeout(ctx, listingClaim)
	defer cancel()
	listed, err := l.Listed(ctx)
	if err != nil {
		a.log.Warn("models refresh: provider not asked; its last listing stands", "provider", name, "listing_age", ageOf(last.at, now), "err", err)
		return last, have
	}
	if store != nil {
		b, _ := json.Marshal(listed)
		if err := store.PutModelListing(ctx, provider.StoredListing{Provider: name, Listing: b, ReadAt: now}); err != nil {
			a.log.Warn("models refresh: listing not stored", "provider", name, "err", err)
		}
	}
	return readListing{listing: listed, at: now}, true
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
	case "comfyui":
		return "ComfyUI"
	}
	return e.Provider
}

func ageOf(t, now time.Time) string {
	if t.IsZero() {
		return "never read"
	}
	return now.Sub(t).Round(time.Second).String()
}
