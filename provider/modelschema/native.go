package modelschema

import "context"

// Native is a provider whose models come from neither the curated catalog
// nor a published schema document, and which describes them and checks
// their input itself (ComfyUI: each workflow file a model, its node
// inputs what input may set).
type Native interface {
	// DescribeModel answers describe_model for one of its models (ok
	// false: not one of them).
	DescribeModel(id string) (d *Description, ok bool)
	// CheckModelInput validates generate's input for one of its models,
	// naming what is wrong.
	CheckModelInput(ctx context.Context, id string, input map[string]any) error
}

// AddNative makes n describe and check the models of provider name.
func (c *Catalog) AddNative(name string, n Native) {
	if c.native == nil {
		c.native = map[string]Native{}
	}
	c.native[name] = n
}
