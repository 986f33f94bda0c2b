package emulator

import (
	"net/http"
	"slices"
	"strconv"
	"time"
)

// What each vendor lists for a key today, for darkroom models check:
// the Gemini API's GET /v1beta/models (paged: pageSize, pageToken →
// nextPageToken), OpenAI's GET /v1/models, Replicate's model objects, and
// fal's GET /v1/models?endpoint_id=. Unlist takes a model out of every
// listing and refuses calls to it as its vendor refuses a retired one,
// as when a vendor withdraws a model between two releases of darkroom.

// geminiListed are the Gemini API models listed, as go-genai v1.79.1
// names them (interactions.Model; read 2026-12-07), retired ones left out.
var geminiListed = []string{"gemini-3.1-flash-image", "gemini-3-pro-image", "gemini-3.1-flash-lite-image", "gemini-omni-1.2-flash", "gemini-omni-1.1-flash", "gemini-3.5-flash"}

// openaiListed are OpenAI's image models listed, as openai-go v3.105.0
// names them (ImageModel; read 2026-12-07), retired ones left out.
var openaiListed = []string{"gpt-image-2", "gpt-image-2-2026-04-21", "gpt-image-2.5-sunburst", "gpt-image-2.5-flare", "gpt-image-2.6-sunburst", "gpt-image-2.6-flare"}

// Unlist takes provider's model (as sent on the wire: "gpt-image-2",
// Replicate's "owner/name", fal's endpoint) out of its listing.
func (e *Emulator) Unlist(provider, model string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.unlisted == nil {
		e.unlisted = map[string]bool{}
	}
	e.unlisted[provider+"\x00"+model] = true
}

// AnnounceShutdown makes OpenAI's listing give model a shutdown_date of
// day (openai-go v3.105.0 model.go: Model.ShutdownDate, a date or null).
func (e *Emulator) AnnounceShutdown(model string, day time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shutdown == nil {
		e.shutdown = map[string]time.Time{}
	}
	e.shutdown[model] = day
}

// Listings counts the model lists provider served (Gemini API and
// OpenAI): how often darkroom asked what its vendor lists.
func (e *Emulator) Listings(provider string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.listings[provider]
}

func (e *Emulator) countListing(provider string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.listings == nil {
		e.listings = map[string]int{}
	}
	e.listings[provider]++
}

// Relist undoes Unlist.
func (e *Emulator) Relist(provider, model string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.unlisted, provider+"\x00"+model)
}

// gone reports whether provider no longer serves model: retired, or
// unlisted.
func (e *Emulator) gone(provider, model string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Retired(provider, model) || e.unlisted[provider+"\x00"+model]
}

// listed is models without the unlisted ones.
func (e *Emulator) listed(provider string, models []string) []string {
	return slices.DeleteFunc(slices.Clone(models), func(m string) bool { return e.gone(provider, m) })
}

// geminiModels serves GET /v1beta/models, a page at a time.
func (e *Emulator) geminiModels(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("pageToken") == "" {
		e.countListing("google")
	}
	all := e.listed("google", geminiListed)
	size, err := strconv.Atoi(r.URL.Query().Get("pageSize"))
	if err != nil || size <= 0 {
		size = 50
	}
	from, _ := strconv.Atoi(r.URL.Query().Get("pageToken"))
	from = min(max(from, 0), len(all))
	to := min(from+size, len(all))
	var models []any
	for _, m := range all[from:to] {
		models = append(models, map[string]any{"name": "models/" + m, "displayName": m})
	}
	page := map[string]any{"models": models}
	if to < len(all) {
		page["nextPageToken"] = strconv.Itoa(to)
	}
	writeJSON(w, 200, page)
}

// openaiModels serves GET /v1/models.
func (e *Emulator) openaiModels(w http.ResponseWriter) {
	e.countListing("openai")
	var data []any
	for _, m := range e.listed("openai", openaiListed) {
		var shutdown any // null: none announced
		e.mu.Lock()
		if day, ok := e.shutdown[m]; ok {
			shutdown = day.Format(time.DateOnly)
		}
		e.mu.Unlock()
		data = append(data, map[string]any{"id": m, "object": "model", "created": 1776729600, "owned_by": "system", "shutdown_date": shutdown})
	}
	writeJSON(w, 200, map[string]any{"object": "list", "data": data})
}
