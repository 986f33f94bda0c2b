package emulator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"sync"
)

// Models published at run time, as anyone can publish one on Replicate or
// fal: the schema and the description are the author's, so a test can
// play a hostile model author against darkroom through the real wire.

type publishedModels struct {
	mu        sync.Mutex
	replicate map[string]*replicateModel
	fal       map[string]map[string]any
	prices    map[string]any // fal endpoint → its price entry
}

var published sync.Map // *Emulator → *publishedModels

func (e *Emulator) publishedModels() *publishedModels {
	p, _ := published.LoadOrStore(e, &publishedModels{replicate: map[string]*replicateModel{}, fal: map[string]map[string]any{}, prices: map[string]any{}})
	return p.(*publishedModels)
}

// PublishReplicate serves a community Replicate model owner/name of kind
// "image" or "video" with this description and openapi_schema (its
// version id is derived from the path, as for testdata/models).
func (e *Emulator) PublishReplicate(path, kind, description string, schema map[string]any) {
	e.publishReplicate(&replicateModel{Description: description, Kind: kind, Schema: schema, path: path})
}

// PublishOfficialReplicate is PublishReplicate for an official model: it
// is run through its model endpoint and refuses a version.
func (e *Emulator) PublishOfficialReplicate(path, kind, description string, schema map[string]any) {
	e.publishReplicate(&replicateModel{Description: description, Kind: kind, Schema: schema, path: path, Official: true})
}

func (e *Emulator) publishReplicate(m *replicateModel) {
	sum := sha256.Sum256([]byte(m.path))
	m.version = hex.EncodeToString(sum[:])
	p := e.publishedModels()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.replicate[m.path] = m
}

// PublishFal serves doc as the OpenAPI document of fal endpoint id.
func (e *Emulator) PublishFal(endpoint string, doc map[string]any) {
	p := e.publishedModels()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fal[endpoint] = doc
}

// PublishFalPrice publishes fal endpoint's price as its author may: the
// unit price is JSON number text, written as given (a test can send one
// no float64 holds).
func (e *Emulator) PublishFalPrice(endpoint, unitPrice, unit string) {
	p := e.publishedModels()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prices[endpoint] = map[string]any{"endpoint_id": endpoint, "unit_price": json.Number(unitPrice), "unit": unit, "currency": "USD"}
}

// falPrices finds an endpoint's price entries: published here, else
// testdata's.
func (e *Emulator) falPrices(endpoint string) []any {
	p := e.publishedModels()
	p.mu.Lock()
	price := p.prices[endpoint]
	p.mu.Unlock()
	if price != nil {
		return []any{price}
	}
	var prices []any
	for _, p := range modelData().prices {
		if p.(map[string]any)["endpoint_id"] == endpoint {
			prices = append(prices, p)
		}
	}
	return prices
}

// replicateModel finds a Replicate model: published here, else testdata's.
func (e *Emulator) replicateModel(path string) *replicateModel {
	if e.gone("replicate", path) {
		return nil
	}
	p := e.publishedModels()
	p.mu.Lock()
	m := p.replicate[path]
	p.mu.Unlock()
	if m != nil {
		return m
	}
	return modelData().replicate[path]
}

// falDoc finds a fal endpoint's document: published here, else testdata's.
func (e *Emulator) falDoc(endpoint string) map[string]any {
	if e.gone("fal", endpoint) {
		return nil
	}
	p := e.publishedModels()
	p.mu.Lock()
	doc := p.fal[endpoint]
	p.mu.Unlock()
	if doc != nil {
		return doc
	}
	return modelData().fal[endpoint]
}

// replicateAll is every Replicate model served: testdata's, and the
// published ones in their place.
func (e *Emulator) replicateAll() map[string]*replicateModel {
	all := maps.Clone(modelData().replicate)
	p := e.publishedModels()
	p.mu.Lock()
	defer p.mu.Unlock()
	maps.Copy(all, p.replicate)
	return all
}

// falAll is every fal endpoint's document served, published ones included.
func (e *Emulator) falAll() map[string]map[string]any {
	all := maps.Clone(modelData().fal)
	p := e.publishedModels()
	p.mu.Lock()
	defer p.mu.Unlock()
	maps.Copy(all, p.fal)
	return all
}
