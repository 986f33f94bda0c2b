package generation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Create validates and durably records a new generation. Everything that
// must not race is decided in the one write transaction that inserts it:
// an owner's repeat of an idempotency key with the same arguments returns
// the earlier generation (existing=true, nothing charged), with other
// arguments it is an InputError; the daily budget is checked against what
// is already spent; then a token is taken from the caller's create rate
// (none left: a *RateError); the task (InTx) is created alongside.
func (s *Service) Create(ctx context.Context, owner string, req CreateRequest) (g *Generation, existing bool, err error) {
	m, err := s.validated(&req)
	if err != nil {
		return nil, false, err
	}
	hash := argsHash(&req)
	if req.IdempotencyKey != "" {
		// A repeat is answered before any input is stored (the transaction
		// decides again, for a repeat that races this one).
		if r, err := s.store.GenerationByKey(ctx, owner, req.IdempotencyKey); err == nil {
			return s.repeat(r, &req, hash)
		} else if !errors.Is(err, ErrNotFound) {
			return nil, false, err
		}
	}
	c := &creation{owner: owner, req: &req, m: m, limit: s.cfg.Budget(ctx, owner), rate: s.cfg.CreateRate(ctx, owner)}
	if c.rate != nil && math.IsInf(c.rate.PerSecond, 1) {
		c.rate = nil
	}
	if err := s.prepare(ctx, c, hash); err != nil {
		return nil, false, err
	}
	earlier, err := s.insert(ctx, c)
	if earlier != nil && err == nil {
		s.dropInput(ctx, c.input)
		return s.repeat(*earlier, &req, hash)
	}
	if err != nil {
		s.dropInput(ctx, c.input)
		if errors.Is(err, ErrDuplicateKey) {
			// An engine whose transactions do not serialize on LockOwner
			// lost the race to a concurrent create: answer as a repeat.
			if r, err := s.store.GenerationByKey(ctx, owner, req.IdempotencyKey); err == nil {
				return s.repeat(r, &req, hash)
			}
		}
		return nil, false, err
	}
	noteCreate(ctx, c.row.ID)
	s.noteCreated(ctx, c.fresh, req.InTx != nil)
	if c.row.Status == StatusQueued {
		s.kick()
	}
	return c.fresh, false, nil
}

// creation is one Create on its way: the owner's limits, read before its
// transaction, and the record it inserts.
type creation struct {
	owner string
	req   *CreateRequest
	m     provider.Model
	limit *int64 // daily budget (nil: unlimited)
	rate  *Rate  // create rate (nil: unlimited)
	now   time.Time
	input *StoredBlob // the input image stored for it, if any
	row   Row
	fresh *Generation // the record as inserted (the defaults are the schema's): no read-back
}

// prepare stores c's input image, if any, and builds the record to insert.
func (s *Service) prepare(ctx context.Context, c *creation, hash string) error {
	req, m := c.req, c.m
	id := NewID()
	params := Params{AspectRatio: req.AspectRatio, NegativePrompt: req.NegativePrompt, Seed: req.Seed, DurationSeconds: req.DurationSeconds, Input: req.Input}
	if req.InputImage != nil {
		if c.limit != nil && m.Credits > *c.limit {
			return budgetError(m, *c.limit, 0)
		}
		in, err := s.storeInput(ctx, c.owner, id, "input", req.InputImage)
		if err != nil {
			return err
		}
		params.InputImage, c.input = in, in
	}
	status, msg := StatusQueued, "queued"
	params.AwaitsImage = m.NeedsInputImage && params.InputImage == nil
	params.AwaitsApproval = req.HoldForApproval
	switch {
	case params.AwaitsImage:
		status, msg = StatusReserved, msgAwaitsImage
	case params.AwaitsApproval:
		status, msg = StatusReserved, fmt.Sprintf("waiting for approval to spend %d credits", m.Credits)
	}
	pj, _ := json.Marshal(params)
	now := s.cfg.Now().UTC().Truncate(time.Millisecond)
	c.now = now
	c.row = Row{
		ID: id, Owner: c.owner, ModelID: m.ID, Provider: m.Provider, Kind: string(m.Kind),
		Prompt: req.Prompt, Params: string(pj), ArgsHash: hash, Credits: m.Credits, Charged: m.Credits,
		Status: status, StatusMessage: msg, CreatedAt: now, UpdatedAt: now, IdempotencyKey: req.IdempotencyKey,
	}
	if status == StatusQueued {
		c.row.NextCheckAt = now
	}
	c.fresh = &Generation{
		ID: id, Owner: c.owner, ModelID: m.ID, Provider: m.Provider, Kind: m.Kind, Prompt: req.Prompt, Params: params,
		Credits: m.Credits, Charged: m.Credits, Status: status, StatusMessage: msg, Outputs: []Output{},
		IdempotencyKey: req.IdempotencyKey, CreatedAt: now, UpdatedAt: now,
	}
	return nil
}

// insert is Create's write transaction: under the owner's lock it finds
// an earlier generation of the idempotency key (earlier), else checks the
// budget and the create rate (a refusal is the error), else inserts c's
// record and runs InTx. A repeat or a refusal is an outcome, not a failed
// write: a failing write makes the engine rerun its batch mates.
func (s *Service) insert(ctx context.Context, c *creation) (earlier *Row, err error) {
	var refused error
	err = s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		earlier, refused = nil, nil
		if c.req.IdempotencyKey != "" || c.limit != nil || c.rate != nil {
			if err := tx.LockOwner(ctx, c.owner); err != nil {
				return err
			}
		}
		if c.req.IdempotencyKey != "" {
			r, err := tx.GenerationByKey(ctx, c.owner, c.req.IdempotencyKey)
			if err == nil {
				earlier = &r
				return nil
			}
			if !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		var err error
		if refused, err = s.refusal(ctx, tx, c); err != nil || refused != nil {
			return err
		}
		if err := tx.InsertGeneration(ctx, c.row); err != nil {
			return err
		}
		if c.req.InTx != nil {
			return c.req.InTx(ctx, tx, c.fresh)
		}
		return nil
	})
	if err == nil && refused != nil {
		err = refused
	}
	return earlier, err
}

// refusal is why the owner may not create c now (nil: they may): over
// the daily budget, or out of create tokens. Taking a token comes last,
// so a repeat or a refusal above costs none.
func (s *Service) refusal(ctx context.Context, tx Tx, c *creation) (refused, err error) {
	if c.limit != nil {
		spent, err := tx.SpentSince(ctx, c.owner, dayStart(c.now))
		if err != nil {
			return nil, err
		}
		if c.m.Credits > *c.limit-spent {
			return budgetError(c.m, *c.limit, spent), nil
		}
	}
	if c.rate != nil {
		wait, err := tx.TakeCreateToken(ctx, c.owner, *c.rate, s.cfg.Now())
		if err != nil {
			return nil, err
		}
		if wait > 0 {
			return &RateError{RetryAfter: wait}, nil
		}
	}
	return nil, nil
}

// repeat answers an idempotency key used before by the same owner.
func (s *Service) repeat(r Row, req *CreateRequest, hash string) (*Generation, bool, error) {
	if r.ArgsHash != "" && r.ArgsHash != hash {
		return nil, false, inputErrorf("idempotencyKey %q was already used with different arguments (generation %s); use a new key for a new request", req.IdempotencyKey, r.ID)
	}
	g, err := fromRow(r)
	return g, err == nil, err
}
