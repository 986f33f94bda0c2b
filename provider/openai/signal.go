package openai

import "github.com/darkroom-mcp/darkroom/provider"

// Signal implements provider.Signaller: an image call answers with the
// image (openai-go v3's Images.Generate and Images.Edit return the
// result; no webhook or job to poll).
func (p *Provider) Signal(provider.Model, bool) provider.Signal { return provider.SignalSynchronous }
