package fal

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
)

// Model metadata, from fal's references:
//
//   - the endpoint's OpenAPI document: GET {OpenAPIURL}/api/openapi/queue/
//     openapi.json?endpoint_id={endpoint} (its info carries
//     x-fal-metadata {endpointId, category}; the input is the JSON body
//     of the POST to the endpoint, a $ref into components.schemas).
//   - pricing: GET {APIURL}/v1/models/pricing?endpoint_id={endpoint} →
//     {prices: [{endpoint_id, unit_price, unit, currency}]}.
//   - search: GET {APIURL}/v1/models?q=&limit=&cursor= → {models:
//     [{endpoint_id, metadata: {display_name, category, description}}],
//     next_cursor, has_more}.
//
// Both origins are configured (never a caller's URL); the endpoint id is
// a parsed model id, sent as a query parameter.

// DefaultAPIURL is fal's Platform API origin; DefaultOpenAPIURL serves
// the per-endpoint OpenAPI documents.
const (
	DefaultAPIURL     = "https://api.fal.ai"
	DefaultOpenAPIURL = "https://fal.ai"
)

// SchemaFormat is the Format of fal's documents (an endpoint's queue
// OpenAPI document), as stored with them.
const SchemaFormat modelschema.Format = "fal"

// Dialect is fal's modelschema.Dialect: ids fal:owner/app[/path] (up to
// four more segments), no versions; per-endpoint documents (the
// endpoint's POST body, the result of GET .../requests/{request_id}); a
// result's files under images or video when the document does not say.
type Dialect struct{}

// own reads fal's qualified ids.
var own = modelschema.Dialects{Name: Dialect{}}

// Syntax implements modelschema.Dialect.
func (Dialect) Syntax() string { return "owner/app[/path]" }

// ParseRef implements modelschema.Dialect.
func (Dialect) ParseRef(id, rest string) (string, string, error) {
	if n := strings.Count(rest, "/"); n < 1 || n > 4 {
		return "", "", fmt.Errorf("model id %q: a fal model is fal:owner/app[/path]", id)
	}
	return rest, "", nil
}

// Layout implements modelschema.Dialect.
func (Dialect) Layout(f modelschema.Format) modelschema.Layout {
	if f == SchemaFormat {
		return modelschema.LayoutPaths
	}
	return 0
}

// Stale implements modelschema.Dialect: fal's stored documents lack
// nothing darkroom reads.
func (Dialect) Stale(modelschema.Info) bool { return false }

// EntryHints implements modelschema.Dialect: fal's results carry their
// files under images (an image model) or video, when the output schema
// does not say.
func (Dialect) EntryHints(e *catalog.Entry, _ modelschema.Ref, _ modelschema.Info) {
	if e.Output.Path == "" {
		e.Output.Path = map[provider.Kind]string{provider.KindImage: "images[*]", provider.KindVideo: "video"}[e.Kind]
	}
}

// Dialect implements modelschema.Source.
func (p *Provider) Dialect() modelschema.Dialect { return Dialect{} }

// Describe implements modelschema.Source.
func (p *Provider) Describe(ctx context.Context, ref modelschema.Ref) (modelschema.Info, error) {
	u := p.openapi + "/api/openapi/queue/openapi.json?endpoint_id=" + url.QueryEscape(ref.Path)
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, u, nil, nil)
	if err != nil {
		return modelschema.Info{}, err
	}
	if resp.Status == http.StatusBadRequest || resp.Status == http.StatusNotFound {
		return modelschema.Info{}, fmt.Errorf("fal: %w: %s", provider.ErrNotFound, ref.Path)
	}
	if err := p.http.Err(resp); err != nil {
		return modelschema.Info{}, err
	}
	var doc struct {
		Info struct {
			Title       string `json:"title"`
			Description string `json:"description"`
			Meta        struct {
				Category string `json:"category"`
			} `json:"x-fal-metadata"`
		} `json:"info"`
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(resp.Body, &doc); err != nil {
		return modelschema.Info{}, &provider.RetryableError{Err: fmt.Errorf("fal: unreadable OpenAPI document: %w", err)}
	}
	if len(doc.Paths) == 0 {
		return modelschema.Info{}, fmt.Errorf("fal: %w: %s has no paths", provider.ErrNotFound, ref.Path)
	}
	info := modelschema.Info{Format: SchemaFormat, Doc: resp.Body, Title: clip.Title(doc.Info.Title), Description: clip.Description(doc.Info.Description),
		Kind: kindOfCategory(doc.Info.Meta.Category)}
	info.Price = p.price(ctx, ref.Path)
	return info, nil
}

// price reads the endpoint's unit price; none (a failure included) leaves
// the operator's default per kind. A price is kept as published, one too
// large for a float64 as the largest, so that modelschema's Price.Check
// refuses it rather than charging the default for it.
func (p *Provider) price(ctx context.Context, endpoint string) *modelschema.Price {
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, p.api+"/v1/models/pricing?endpoint_id="+url.QueryEscape(endpoint), nil, nil)
	if err != nil || !resp.OK() {
		return nil
	}
	var v struct {
		Prices []struct {
			Endpoint  string      `json:"endpoint_id"`
			UnitPrice json.Number `json:"unit_price"`
			Unit      string      `json:"unit"`
			Currency  string      `json:"currency"`
		} `json:"prices"`
	}
	if json.Unmarshal(resp.Body, &v) != nil {
		return nil
	}
	for _, pr := range v.Prices {
		if pr.Endpoint != endpoint || !strings.EqualFold(pr.Currency, "USD") {
			continue
		}
		usd, err := strconv.ParseFloat(pr.UnitPrice.String(), 64)
		if math.IsInf(usd, 0) {
			usd = math.Copysign(math.MaxFloat64, usd) // JSON-storable, and refused
		} else if err != nil || usd == 0 {
			continue
		}
		return &modelschema.Price{USD: usd, Unit: pr.Unit}
	}
	return nil
}

func kindOfCategory(c string) provider.Kind {
	switch {
	case strings.HasSuffix(c, "-to-video") || c == "video":
		return provider.KindVideo
	case strings.HasSuffix(c, "-to-image") || c == "image":
		return provider.KindImage
	}
	return ""
}

// Search implements modelschema.Source.
func (p *Provider) Search(ctx context.Context, query string, limit int, cursor string) (modelschema.Page, error) {
	q := url.Values{"q": {query}, "limit": {strconv.Itoa(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	resp, err := p.http.Do(ctx, httpx.Other, http.MethodGet, p.api+"/v1/models?"+q.Encode(), nil, nil)
	if err != nil {
		return modelschema.Page{}, err
	}
	if err := p.http.Err(resp); err != nil {
		return modelschema.Page{}, err
	}
	var v struct {
		Models []struct {
			Endpoint string `json:"endpoint_id"`
			Meta     struct {
				Name        string `json:"display_name"`
				Category    string `json:"category"`
				Description string `json:"description"`
			} `json:"metadata"`
		} `json:"models"`
		Next    *string `json:"next_cursor"`
		HasMore bool    `json:"has_more"`
	}
	if err := json.Unmarshal(resp.Body, &v); err != nil {
		return modelschema.Page{}, &provider.RetryableError{Err: fmt.Errorf("fal: unreadable search reply: %w", err)}
	}
	var out modelschema.Page
	for _, m := range v.Models {
		if len(out.Hits) == limit {
			break
		}
		id := Name + ":" + m.Endpoint
		if _, err := own.ParseID(id); err != nil {
			continue // no model darkroom could run: its id is not a model id
		}
		out.Hits = append(out.Hits, modelschema.Hit{ID: id, Title: clip.Title(m.Meta.Name), Description: clip.Description(m.Meta.Description), Kind: kindOfCategory(m.Meta.Category)})
	}
	if v.HasMore && v.Next != nil {
		out.Next = clip.Cursor(*v.Next)
	}
	return out, nil
}

// entry finds the catalog entry of a model id: the curated set, else a
// qualified id through Config.Resolve.
func (p *Provider) entry(ctx context.Context, id string) (catalog.Entry, bool, error) {
	return modelschema.Lookup(ctx, p.models, p.cfg.Resolve, Name, id)
}

// SetResolve sets Config.Resolve, before the provider serves (the
// resolver is built over the providers).
func (p *Provider) SetResolve(f func(ctx context.Context, id string) (catalog.Entry, error)) {
	p.cfg.Resolve = f
}

// Listed implements provider.Lister: fal's model list (the Platform API)
// asked for each curated vendor endpoint; one fal does not list, or lists as
// not active, is not served.
func (p *Provider) Listed(ctx context.Context) (provider.Listing, error) {
	out := provider.Listing{}
	for _, v := range p.models.Vendors() {
		ok, err := p.listed(ctx, v)
		if err != nil {
			return nil, err
		}
		out[v] = provider.VendorModel{Listed: ok}
	}
	return out, nil
}

// Retarget implements provider.Retargeter.
func (p *Provider) Retarget(runs map[string]string) { p.models.Retarget(runs) }

// listed asks fal whether it lists endpoint as active.
func (p *Provider) listed(ctx context.Context, endpoint string) (bool, error) {
	var v struct {
		Models []struct {
			Endpoint string `json:"endpoint_id"`
			Meta     struct {
				Status string `json:"status"`
			} `json:"metadata"`
		} `json:"models"`
	}
	if err := p.http.GetJSON(ctx, p.api+"/v1/models?"+url.Values{"endpoint_id": {endpoint}}.Encode(), &v); err != nil {
		return false, err
	}
	for _, m := range v.Models {
		if m.Endpoint == endpoint && (m.Meta.Status == "" || m.Meta.Status == "active") {
			return true, nil
		}
	}
	return false, nil
}
