package comfyui

import (
	"context"
	"fmt"
	"slices"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
)

// DescribeModel implements modelschema.Native: a workflow's model, which
// node input each of generate's arguments sets, and every other node
// input input may set ("node.input").
func (p *Provider) DescribeModel(id string) (*modelschema.Description, bool) {
	w, ok := p.models[id]
	if !ok {
		return nil, false
	}
	m := w.Model
	d := &modelschema.Description{ModelID: id, Provider: Name, Kind: m.Kind, Title: m.Title, Description: m.Description,
		Credits: m.Credits, PriceUnit: m.PriceUnit, Curated: true, AspectRatios: slices.Clone(m.AspectRatios), Durations: m.Durations,
		MaxCount: max(m.MaxCount, 1),
		Mapping: modelschema.Mapping{Prompt: w.Map.Prompt, NegativePrompt: w.Map.NegativePrompt, Seed: w.Map.Seed, Count: w.Map.Count,
			InputImage: w.Map.Image}}
	if w.Map.Width != "" {
		d.Mapping.AspectRatio = w.Map.Width + ", " + w.Map.Height
	}
	if w.Map.Frames != "" {
		d.Mapping.DurationSeconds = fmt.Sprintf("%s = seconds × %g fps (%s), %s", w.Map.Frames, w.Frames.FPS, w.Map.FPS, w.Frames.bounds())
	}
	roles := map[string]modelschema.Role{}
	if w.Map.Mask != "" {
		roles[provider.RoleMask] = modelschema.Role{Field: w.Map.Mask, Max: 1}
	}
	if w.Map.LastFrame != "" {
		roles[provider.RoleLastFrame] = modelschema.Role{Field: w.Map.LastFrame, Max: 1}
	}
	for i, r := range w.Map.References {
		if i == 0 {
			roles[provider.RoleReference] = modelschema.Role{Field: r, Max: len(w.Map.References)}
		}
	}
	if len(roles) > 0 {
		d.Mapping.Roles = roles
	}
	d.Input = []modelschema.Field{}
	for _, f := range w.Fields() {
		d.Input = append(d.Input, modelschema.Field{Name: f.Name, Type: f.Type, Default: f.Default, Description: fmt.Sprintf("node %s", f.Node)})
	}
	return d, true
}

// CheckModelInput implements modelschema.Native.
func (p *Provider) CheckModelInput(ctx context.Context, id string, input map[string]any) error {
	w, ok := p.models[id]
	if !ok {
		return fmt.Errorf("no ComfyUI workflow serves model %q here", id)
	}
	return w.CheckInput(input)
}
