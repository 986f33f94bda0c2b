package generation

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Models reaches models beyond the curated catalog: provider-qualified
// ids resolved from the provider's own schema, and provider-native input
// checked against it (provider/modelschema, wired by cmd/darkroom).
type Models interface {
	// Resolve answers a model id the curated catalog does not hold. Its
	// error says why it cannot be used (not enabled, unknown, the
	// provider's schema unreachable for now).
	Resolve(ctx context.Context, id string) (provider.Model, error)
	// CheckInput validates provider-native input for a model, naming the
	// field and what it allows when it refuses.
	CheckInput(ctx context.Context, m provider.Model, input map[string]any) error
	// Known is a qualified model resolved earlier in this process and
	// still held (the schema registry's cache, caches.SchemaModels),
	// without a store read or a fetch.
	Known(id string) (provider.Model, bool)
}

// Resolve makes req's model known before Validate: a qualified id is
// resolved (Config.Models), and provider-native input is checked against
// the model's schema. Its errors are *InputError: nothing is stored or
// charged for them.
func (s *Service) Resolve(ctx context.Context, req *CreateRequest) error {
	m, curated := s.modelByID[req.ModelID]
	if curated && req.Input == nil {
		return nil
	}
	if s.cfg.Models == nil {
		if req.Input != nil {
			return inputErrorf("this server takes no provider-native input")
		}
		return nil // Validate names the unknown id
	}
	if !curated {
		if err := s.Unavailable(req.ModelID); err != nil {
			return err
		}
		var err error
		if m, err = s.cfg.Models.Resolve(ctx, req.ModelID); err != nil {
			return modelError(err)
		}
		if _, ok := s.providers[m.Provider]; !ok {
			return inputErrorf("model %s needs the %s provider, which is not configured on this server", m.ID, m.Provider)
		}
		req.resolved = &m
	}
	if req.Input != nil {
		if err := s.cfg.Models.CheckInput(ctx, m, req.Input); err != nil {
			return modelError(err)
		}
	}
	return nil
}

func modelError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ie *InputError
	if errors.As(err, &ie) {
		return err
	}
	return &InputError{Msg: err.Error()}
}

// Unavailable is the refusal of a curated model whose provider is not
// configured here, naming what the server needs, or that its vendor no
// longer lists, saying so and naming its successor if one is known (nil
// for any other id).
func (s *Service) Unavailable(id string) error {
	if need, ok := s.cfg.Unavailable[id]; ok {
		return inputErrorf("modelId %q is not available on this server: it needs %s on the server, which is not set (list_models lists the models this server offers)", id, need)
	}
	if a := s.Availability(id); a.Withdrawn != "" {
		instead := "list_models lists the models available now"
		if a.Successor != "" {
			instead = fmt.Sprintf("use %s instead, or list_models for the models available now", a.Successor)
		}
		return inputErrorf("modelId %q is not available now: %s; it is offered again once the vendor lists it (%s)", id, a.Withdrawn, instead)
	}
	return nil
}

// Availability is what the last look at a curated model's vendor
// listing found (cmd/darkroom's refresh sets it with SetAvailability).
type Availability struct {
	// Withdrawn says why the model is not offered now ("" while it is):
	// it leaves list_models and generate refuses it for free.
	Withdrawn string
	// Successor is a darkroom model id to use instead, when one is known.
	Successor string
	// ShutdownDate is the day the vendor announced it stops serving the
	// model's vendor model (zero when none is announced).
	ShutdownDate time.Time
}

// availability holds the curated models' Availability, by id; an id
// without one is available.
type availability struct {
	p atomic.Pointer[map[string]Availability]
}

// SetAvailability replaces what the vendors' listings say of the curated
// models, by id; nil says nothing of any (all available).
func (s *Service) SetAvailability(by map[string]Availability) {
	if by == nil {
		by = map[string]Availability{}
	}
	s.availability.p.Store(&by)
}

// Availability is what the vendor's listing says of a model (the zero
// value for one it says nothing of: available).
func (s *Service) Availability(id string) Availability {
	return (*s.availability.p.Load())[id]
}

// Available reports whether a model is not withdrawn.
func (s *Service) Available(id string) bool {
	return s.Availability(id).Withdrawn == ""
}

// lookupModel is the curated model of an id, or the one Resolve found
// for this request.
func (s *Service) lookupModel(req *CreateRequest) (provider.Model, bool) {
	if m, ok := s.modelByID[req.ModelID]; ok {
		return m, true
	}
	if r := req.resolved; r != nil && r.ID == req.ModelID {
		return *r, true
	}
	return provider.Model{}, false
}

// modelOf is a generation's model: curated, held by the schema
// registry, or resolved again (from the stored schema, after a restart);
// failing all, the id and provider the row holds, which the provider
// resolves itself.
func (s *Service) modelOf(ctx context.Context, g *Generation) provider.Model {
	if m, ok := s.Model(g.ModelID); ok {
		return m
	}
	if s.cfg.Models != nil {
		if m, err := s.cfg.Models.Resolve(ctx, g.ModelID); err == nil {
			return m
		}
	}
	return provider.Model{ID: g.ModelID, Provider: g.Provider, Kind: g.Kind}
}
