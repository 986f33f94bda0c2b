package google

import "github.com/darkroom-mcp/darkroom/provider"

// Signal implements provider.Signaller: a Gemini image call answers with
// the image; a Gemini Omni interaction (background) and a Veo operation
// are polled, as the adapter reads them today (go-genai's Interactions.Get
// and Operations.GetVideosOperation).
func (p *Provider) Signal(m provider.Model, _ bool) provider.Signal {
	if e, ok := p.models.Get(m.ID); ok && e.API == "gemini" {
		return provider.SignalSynchronous
	}
	return provider.SignalPoll
}
