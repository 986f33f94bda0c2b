package generation

import "github.com/darkroom-mcp/darkroom/provider"

// LivePreviewer is implemented by providers that keep the latest preview
// frame of a running job (ComfyUI's websocket previews), already made
// small by package preview (a JPEG of at most 512 px and 64 KB). It is
// never an output: it decorates a running generation's result only.
type LivePreviewer interface {
	// LivePreview is the latest frame of the job of generation id, and
	// how many frames came; ok is false when there is none.
	LivePreview(generationID string) (jpeg []byte, frames int, ok bool)
}

// LivePreview is the latest preview frame of a running generation, from
// its provider (ok false: none).
func (s *Service) LivePreview(g *Generation) (jpeg []byte, frames int, ok bool) {
	if g.Status != StatusRunning {
		return nil, 0, false
	}
	p, found := s.providers[g.Provider]
	if !found {
		return nil, 0, false
	}
	lp, found := provider.As[LivePreviewer](p)
	if !found {
		return nil, 0, false
	}
	return lp.LivePreview(g.ID)
}
