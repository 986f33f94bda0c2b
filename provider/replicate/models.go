package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/internal/clip"
	"github.com/darkroom-mcp/darkroom/provider/internal/httpx"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
)

// Model metadata, from Replicate's HTTP API reference:
//
//   - GET /v1/models/{owner}/{name}: the model, with latest_version
//     {id, openapi_schema} (Cog's OpenAPI document: the input is
//     components.schemas.Input) and default_example (a prediction).
//   - GET /v1/models/{owner}/{name}/versions/{id}: one version, with its
//     openapi_schema. Official models serve no versions (404).
//   - is_official (boolean) on the model: an official model is run through
//     POST /v1/models/{owner}/{name}/predictions and refuses a version
//     with 422 "Invalid version or not permitted" (Replicate's OpenAPI
//     document, schemas_model_response and predictions.create "version",
//     as mirrored in tryAGI/Replicate, see
//     testdata/emulator/replicate_contract_test.go; replicate-javascript
//     PR #358, 2025-09-18). A reply without it reads as not official: the
//     version form darkroom used before.
//   - QUERY /v1/models with the query as a text/plain body: search,
//     paginated as {next, previous, results: [model]}.
//
// Every URL is built on the configured BaseURL from a parsed model id
// (Dialect's grammar, modelschema's characters only): nothing a caller sends picks
// the host.

// SchemaFormat is the Format of Replicate's documents (a Cog model
// version's openapi_schema), as stored with them.
const SchemaFormat modelschema.Format = "replicate"

// Dialect is Replicate's modelschema.Dialect: ids
// replicate:owner/name[:version], a version being Replicate's hex id; Cog
// documents (components.schemas.Input and Output); a model's entry runs
// its version unless the model is official.
type Dialect struct{}

// versionID is a Replicate version id.
var versionID = regexp.MustCompile(`^[0-9a-f]{8,128}$`)

// own reads Replicate's qualified ids.
var own = modelschema.Dialects{Name: Dialect{}}

// Syntax implements modelschema.Dialect.
func (Dialect) Syntax() string { return "owner/name[:version]" }

// ParseRef implements modelschema.Dialect.
func (Dialect) ParseRef(id, rest string) (string, string, error) {
	p, v, _ := strings.Cut(rest, ":")
	if v != "" && !versionID.MatchString(v) {
		return "", "", fmt.Errorf("model id %q: the version %q is not a Replicate version id (hex)", id, v)
	}
	if strings.Count(p, "/") != 1 {
		return "", "", fmt.Errorf("model id %q: a Replicate model is replicate:owner/name[:version]", id)
	}
	return p, v, nil
}

// Layout implements modelschema.Dialect.
func (Dialect) Layout(f modelschema.Format) modelschema.Layout {
	if f == SchemaFormat {
		return modelschema.LayoutComponents
	}
	return 0
}

// Stale implements modelschema.Dialect: a document stored before darkroom
// read is_official does not say whether its model takes a version.
func (Dialect) Stale(info modelschema.Info) bool { return info.Official == nil }

// EntryHints implements modelschema.Dialect: a model's entry runs the
// version its document belongs to, unless the model is official (it takes
// no version: with Version empty the adapter posts to
// /v1/models/{owner}/{name}/predictions).
func (Dialect) EntryHints(e *catalog.Entry, ref modelschema.Ref, info modelschema.Info) {
	if info.Version != "" && (info.Official == nil || !*info.Official) {
		e.Version = ref.Path + ":" + info.Version
	}
}

// Dialect implements modelschema.Source.
func (p *Provider) Dialect() modelschema.Dialect { return Dialect{} }

type modelObject struct {
	Owner         string `json:"owner"`
	Name          string `json:"name"`
	Description   string `json:"description"`
	IsOfficial    bool   `json:"is_official"`
	LatestVersion *struct {
		ID      string          `json:"id"`
		Schema  json.RawMessage `json:"openapi_schema"`
		Created string          `json:"created_at"`
	} `json:"latest_version"`
	DefaultExample *struct {
		Output any `json:"output"`
	} `json:"default_example"`
}

type versionObject struct {
	ID     string          `json:"id"`
	Schema json.RawMessage `json:"openapi_schema"`
}

// Describe implements modelschema.Source.
func (p *Provider) Describe(ctx context.Context, ref modelschema.Ref) (modelschema.Info, error) {
	var m modelObject
	if err := p.http.GetJSON(ctx, p.base+"/v1/models/"+ref.Path, &m); err != nil {
		return modelschema.Info{}, err
	}
	info := modelschema.Info{Format: SchemaFormat, Title: ref.Path, Description: clip.Description(m.Description), Official: &m.IsOfficial}
	if m.DefaultExample != nil {
		info.Kind = kindOfOutput(m.DefaultExample.Output)
	}
	if ref.Version == "" {
		if m.LatestVersion == nil || len(m.LatestVersion.Schema) == 0 {
			return modelschema.Info{}, fmt.Errorf("replicate: %w: %s has no published version", provider.ErrNotFound, ref.Path)
		}
		info.Version, info.Doc = m.LatestVersion.ID, m.LatestVersion.Schema
		return checkVersion(info, ref)
	}
	var v versionObject
	if err := p.http.GetJSON(ctx, p.base+"/v1/models/"+ref.Path+"/versions/"+ref.Version, &v); err != nil {
		return modelschema.Info{}, err
	}
	if len(v.Schema) == 0 {
		return modelschema.Info{}, fmt.Errorf("replicate: %w: version %s has no schema", provider.ErrNotFound, ref.Version)
	}
	info.Version, info.Doc = v.ID, v.Schema
	return checkVersion(info, ref)
}

// checkVersion refuses a version id that is not one (Replicate's are
// hex): it is kept with the schema and named to callers.
func checkVersion(info modelschema.Info, ref modelschema.Ref) (modelschema.Info, error) {
	if _, err := own.ParseID(Name + ":" + ref.Path + ":" + info.Version); err != nil {
		return modelschema.Info{}, fmt.Errorf("replicate: %w: %s publishes a version id that is not one", provider.ErrNotFound, ref.Path)
	}
	return info, nil
}

// kindOfOutput reads a default example's output file type.
func kindOfOutput(out any) provider.Kind {
	var u string
	switch t := out.(type) {
	case string:
		u = t
	case []any:
		if len(t) > 0 {
			u, _ = t[0].(string)
		}
	}
	pu, err := url.Parse(u)
	if err != nil {
		return ""
	}
	switch strings.ToLower(path.Ext(pu.Path)) {
	case ".mp4", ".mov", ".webm":
		return provider.KindVideo
	case ".png", ".jpg", ".jpeg", ".webp", ".gif":
		return provider.KindImage
	}
	return ""
}

// Search implements modelschema.Source: QUERY /v1/models.
func (p *Provider) Search(ctx context.Context, query string, limit int, cursor string) (modelschema.Page, error) {
	u := p.base + "/v1/models"
	if cursor != "" {
		u += "?cursor=" + url.QueryEscape(cursor)
	}
	stream, r, err := p.http.Open(ctx, httpx.Other, "QUERY", u, strings.NewReader(query), "text/plain", nil)
	if err != nil {
		return modelschema.Page{}, err
	}
	if stream != nil {
		defer stream.Body.Close()
		var page struct {
			Next    *string       `json:"next"`
			Results []modelObject `json:"results"`
		}
		if err := json.NewDecoder(httpx.Limit(stream)).Decode(&page); err != nil {
			return modelschema.Page{}, &provider.RetryableError{Err: fmt.Errorf("replicate: unreadable search reply: %w", err)}
		}
		var out modelschema.Page
		for _, m := range page.Results {
			if len(out.Hits) == limit {
				break
			}
			id := Name + ":" + m.Owner + "/" + m.Name
			if _, err := own.ParseID(id); err != nil {
				continue // no model darkroom could run: its name is not a model name
			}
			h := modelschema.Hit{ID: id, Title: m.Owner + "/" + m.Name, Description: clip.Description(m.Description)}
			if m.DefaultExample != nil {
				h.Kind = kindOfOutput(m.DefaultExample.Output)
			}
			out.Hits = append(out.Hits, h)
		}
		if page.Next != nil {
			if nu, err := url.Parse(*page.Next); err == nil {
				out.Next = clip.Cursor(nu.Query().Get("cursor"))
			}
		}
		return out, nil
	}
	if err := p.http.Err(r); err != nil {
		return modelschema.Page{}, err
	}
	return modelschema.Page{}, errors.New("replicate: empty search reply")
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

// Listed implements provider.Lister: each curated vendor model's object
// (or its pinned version), read with the token; a 404 is a model
// Replicate no longer serves.
func (p *Provider) Listed(ctx context.Context) (provider.Listing, error) {
	out := provider.Listing{}
	for _, v := range p.models.Vendors() {
		u := p.base + "/v1/models/" + v
		if path, version, ok := strings.Cut(v, ":"); ok {
			u = p.base + "/v1/models/" + path + "/versions/" + version
		}
		var obj struct{}
		err := p.http.GetJSON(ctx, u, &obj)
		if err != nil && !errors.Is(err, provider.ErrNotFound) {
			return nil, err
		}
		out[v] = provider.VendorModel{Listed: err == nil}
	}
	return out, nil
}

// Retarget implements provider.Retargeter.
func (p *Provider) Retarget(runs map[string]string) { p.models.Retarget(runs) }
