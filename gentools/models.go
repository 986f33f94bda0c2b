package gentools

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
	"github.com/darkroom-mcp/darkroom/server/edge"
)

// modelTools are describe_model's and search_models' rows: read-only,
// charged as a poll, served on the lean path with a keyed reply, so a
// repeated question is answered from the reply cache.
func (t *Tools) modelTools() []Tool {
	return []Tool{
		{Def: def("describe_model", "One model in full, before generate: price (credits per priceUnit), needsInputImage, roles, maxCount, "+
			"the fields generate's input may set (types, enums, ranges, defaults), the provider field each argument sets.",
			describeModelIn, describeModelOut, readOnly("Describe model", true)), Handler: answer(t.readDescribe), Class: ClassPoll, Read: t.readDescribe},
		{Def: def("search_models", "Find models by words (and kind): the curated ones, then the providers allowed here. "+
			"Pass nextCursor back as cursor for more; describe_model one before generate.",
			searchModelsIn, searchModelsOut, readOnly("Search models", true)), Handler: answer(t.readSearch), Class: ClassPoll, Read: t.readSearch},
	}
}

func (t *Tools) readDescribe(ctx context.Context, req *mcp.CallToolRequest) (edge.Reply, error) {
	var a struct {
		ModelID string `json:"modelId"`
	}
	if r := DecodeArgs(req, &a); r != nil {
		return edge.Reply{Result: r}, nil
	}
	if a.ModelID == "" {
		return edge.Reply{Result: toolError("modelId is required: a modelId from list_models or search_models")}, nil
	}
	if n := utf8.RuneCountInString(a.ModelID); n > maxModelIDChars {
		return edge.Reply{Result: toolError("modelId is %d characters; the limit is %d", n, maxModelIDChars)}, nil
	}
	// A model its vendor withdrew is described, available:false with why;
	// one whose provider is not configured here is refused.
	av := t.svc.Availability(a.ModelID)
	if err := t.svc.Unavailable(a.ModelID); err != nil && av.Withdrawn == "" {
		return edge.Reply{Result: toolError("%s", err.Error())}, nil
	}
	var d *modelschema.Description
	var key any = a.ModelID
	if t.cfg.Models != nil {
		var err error
		if d, key, err = t.cfg.Models.Describe(ctx, a.ModelID); err != nil {
			return modelRefusal(err)
		}
	} else if m, ok := t.svc.Model(a.ModelID); ok {
		d = modelschema.DescribeModel(m)
	} else {
		return edge.Reply{Result: toolError("unknown modelId %q: it does not exist (list_models lists the available ids)", a.ModelID)}, nil
	}
	// The answer depends on the description's key and the availability.
	return edge.Reply{ID: "describe_model\x00" + a.ModelID, Key: [2]any{key, av}, Render: func() *mcp.CallToolResult {
		out := t.described(d, av)
		return structured(describeLine(out), out)
	}}, nil
}

// described is describe_model's answer: the description, and the inputs
// the model takes as list_models gives them (a local model has no field
// map to say so).
type described struct {
	*modelschema.Description
	NeedsInputImage   bool           `json:"needsInputImage"`
	AcceptsInputImage bool           `json:"acceptsInputImage,omitempty"`
	Roles             map[string]int `json:"roles,omitempty"`
	// Available is false while the model's vendor lists none of its
	// vendor models (generate refuses it), with why.
	Available         bool   `json:"available"`
	UnavailableReason string `json:"unavailableReason,omitempty"`
	// ShutdownDate (YYYY-MM-DD) is set when the vendor announced one
	// within 30 days.
	ShutdownDate string `json:"shutdownDate,omitempty"`
	// Successor is the model to use instead, when one is known and this
	// one is unavailable or shutting down.
	Successor string `json:"successor,omitempty"`
}

func (t *Tools) described(d *modelschema.Description, av generation.Availability) described {
	out := described{Description: d, Available: av.Withdrawn == "", UnavailableReason: av.Withdrawn, Successor: av.Successor}
	if !av.ShutdownDate.IsZero() {
		out.ShutdownDate = av.ShutdownDate.Format(time.DateOnly)
	}
	if m, ok := t.svc.Model(d.ModelID); ok {
		out.NeedsInputImage, out.AcceptsInputImage, out.Roles = m.NeedsInputImage, m.AcceptsInputImage, m.Roles
	}
	return out
}

// modelRefusal answers a model that cannot be described (not enabled,
// unknown, a bad input, a provider to retry) as an isError result that
// says why: nothing was charged but the poll. A call cut short, unless a
// provider's retryable error carries it, is an error.
func modelRefusal(err error) (edge.Reply, error) {
	var re *provider.RetryableError
	if !errors.As(err, &re) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return edge.Reply{}, err
	}
	return edge.Reply{Result: toolError("%s", err.Error())}, nil
}

func describeLine(d described) string {
	price := fmt.Sprintf("%s per %s", words.Count(d.Credits, "credit"), d.PriceUnit)
	fields := "no published input schema"
	if d.Input != nil {
		fields = words.Count(len(d.Input), "input field")
	}
	inputs := ""
	if d.NeedsInputImage {
		inputs = ", needs an input image"
	}
	if len(d.Roles) > 0 {
		inputs += ", takes " + words.And(slices.Sorted(maps.Keys(d.Roles))) + " inputs"
	}
	line := fmt.Sprintf("%s: %s model, %s%s, %s", d.ModelID, d.Kind, price, inputs, fields)
	if !d.Available {
		line += "; NOT AVAILABLE now: " + d.UnavailableReason
	}
	if d.ShutdownDate != "" {
		line += "; its vendor shuts it down on " + d.ShutdownDate
	}
	if d.Successor != "" {
		line += "; use " + d.Successor + " instead"
	}
	return line
}

func (t *Tools) readSearch(ctx context.Context, req *mcp.CallToolRequest) (edge.Reply, error) {
	var a struct {
		Query  string `json:"query"`
		Kind   string `json:"kind"`
		Cursor string `json:"cursor"`
		Limit  *int   `json:"limit"`
	}
	if r := DecodeArgs(req, &a); r != nil {
		return edge.Reply{Result: r}, nil
	}
	if n := utf8.RuneCountInString(a.Query); n > maxQueryChars {
		return edge.Reply{Result: toolError("query is %d characters; the limit is %d", n, maxQueryChars)}, nil
	}
	if a.Kind != "" && a.Kind != string(provider.KindImage) && a.Kind != string(provider.KindVideo) {
		return edge.Reply{Result: toolError("kind must be image or video; got %q", a.Kind)}, nil
	}
	limit, bad := bounded("limit", a.Limit, 1, modelschema.MaxSearchLimit, defSearchLimit, "")
	if bad != nil {
		return edge.Reply{Result: bad}, nil
	}
	var res *modelschema.SearchResult
	if t.cfg.Models != nil {
		var err error
		if res, err = t.cfg.Models.Search(ctx, a.Query, provider.Kind(a.Kind), limit, a.Cursor); err != nil {
			return modelRefusal(err)
		}
		// A curated model its vendor lists no more is not offered (the
		// page may come out shorter than limit).
		res.Models = slices.DeleteFunc(slices.Clone(res.Models), func(h modelschema.Hit) bool { return !t.svc.Available(h.ID) }) // a cached search's slice
	} else {
		res = &modelschema.SearchResult{Models: []modelschema.Hit{}, Sources: []string{"curated"}}
		q := strings.ToLower(a.Query)
		for _, m := range t.svc.Models() {
			if (a.Kind == "" || string(m.Kind) == a.Kind) && strings.Contains(strings.ToLower(m.ID+" "+m.Title+" "+m.Description), q) && len(res.Models) < limit {
				res.Models = append(res.Models, modelschema.Hit{ID: m.ID, Title: m.Title, Description: m.Description, Kind: m.Kind, Source: "curated"})
			}
		}
	}
	// The slot is the question: the same one within the search's life
	// answers from the reply cache.
	slot := fmt.Sprintf("search_models\x00%s\x00%s\x00%s\x00%d", strings.ToLower(strings.TrimSpace(a.Query)), a.Kind, a.Cursor, limit)
	return edge.Reply{ID: slot, Key: res.At.UnixNano(), Render: func() *mcp.CallToolResult {
		line := fmt.Sprintf("%s found for %q", words.Count(len(res.Models), "model"), a.Query)
		if res.NextCursor != "" {
			line += "; more with cursor"
		}
		return structured(line, res)
	}}, nil
}

// resolveModel is generate's hook into the model catalog: the caller's
// provider-native input, bounded and decoded, and a qualified model id
// resolved, before anything is fetched, stored or charged.
func (t *Tools) resolveModel(ctx context.Context, cr *generation.CreateRequest, input []byte) *mcp.CallToolResult {
	if len(input) > 0 && string(input) != "null" {
		in, err := modelschema.DecodeInput(input)
		if err != nil {
			return toolError("%s", err.Error())
		}
		cr.Input = in
	}
	if err := t.svc.Resolve(ctx, cr); err != nil {
		var ie *generation.InputError
		if errors.As(err, &ie) {
			return toolError("%s", ie.Msg)
		}
		return toolError("model %s could not be resolved now: %v; try again shortly (nothing was charged)", cr.ModelID, err)
	}
	return nil
}
