package generation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/words"
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
	if req.IdempotencyKey != "" && storesInputs(&req) {
		// A repeat is answered before any input is stored (the transaction
		// decides again, for a repeat that races this one). Without input
		// bytes to store, the transaction's own look-up is enough: a
		// round trip fewer.
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
		s.dropInputs(ctx, c.stored)
		return s.repeat(*earlier, &req, hash)
	}
	if err != nil {
		s.dropInputs(ctx, c.stored)
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

// storesInputs is whether req sends input bytes that Create stores
// before its transaction.
func storesInputs(req *CreateRequest) bool {
	return req.InputImage != nil || slices.ContainsFunc(req.Inputs, func(in RoleInput) bool { return in.Image != nil })
}

// creation is one Create on its way: the owner's limits, read before its
// transaction, and the record it inserts.
type creation struct {
	owner  string
	req    *CreateRequest
	m      provider.Model
	limit  *int64 // daily budget (nil: unlimited)
	rate   *Rate  // create rate (nil: unlimited)
	now    time.Time
	stored []StoredBlob // the input files stored for it
	row    Row
	fresh  *Generation // the record as inserted (the defaults are the schema's): no read-back
}

// prepare stores c's input files sent as bytes, and builds the record to
// insert.
func (s *Service) prepare(ctx context.Context, c *creation, hash string) error {
	req, m := c.req, c.m
	id := NewID()
	params := Params{AspectRatio: req.AspectRatio, NegativePrompt: req.NegativePrompt, Seed: req.Seed, DurationSeconds: req.DurationSeconds, Input: req.Input}
	if req.Count > 1 {
		params.Count = req.Count
	}
	if err := s.storeInputs(ctx, c, id, &params); err != nil {
		return err
	}
	status, msg := StatusQueued, "queued"
	awaited(req, m, &params)
	params.AwaitsApproval = req.HoldForApproval
	switch {
	case params.awaitsInput():
		status, msg = StatusReserved, waitingFor(params)
	case params.AwaitsApproval:
		status, msg = StatusReserved, "waiting for approval to spend "+words.Count(req.credits, "credit")
	}
	pj, _ := json.Marshal(params)
	now := s.cfg.Now().UTC().Truncate(time.Millisecond)
	c.now = now
	c.row = Row{
		ID: id, Owner: c.owner, ModelID: m.ID, Provider: m.Provider, Kind: string(m.Kind),
		Prompt: req.Prompt, Params: string(pj), ArgsHash: hash, Credits: req.credits, Charged: req.credits,
		Status: status, StatusMessage: msg, CreatedAt: now, UpdatedAt: now, IdempotencyKey: req.IdempotencyKey,
	}
	if status == StatusQueued {
		c.row.NextCheckAt = now
	}
	c.fresh = &Generation{
		ID: id, Owner: c.owner, ModelID: m.ID, Provider: m.Provider, Kind: m.Kind, Prompt: req.Prompt, Params: params,
		Credits: req.credits, Charged: req.credits, Status: status, StatusMessage: msg, Outputs: []Output{},
		IdempotencyKey: req.IdempotencyKey, CreatedAt: now, UpdatedAt: now,
	}
	return nil
}

// storeInputs keeps the input files c's request sent as bytes (an output
// it names is used where it is) and lists them in p: the main image as
// p.InputImage, the others in p.Inputs. A request over the budget stores
// nothing.
func (s *Service) storeInputs(ctx context.Context, c *creation, id string, p *Params) error {
	req := c.req
	if req.InputImage == nil && !slices.ContainsFunc(req.Inputs, func(in RoleInput) bool { return in.Output != nil }) {
		return nil
	}
	if c.limit != nil && req.credits > *c.limit {
		return budgetError(c.m, req.credits, *c.limit, 0)
	}
	main := MainRole(c.m.Kind)
	if req.InputImage != nil {
		f, err := s.storeInput(ctx, c.owner, id, "input", req.InputImage)
		if err != nil {
			return err
		}
		c.stored = append(c.stored, f)
		p.InputImage = &InputFile{StoredBlob: f, Role: main, Width: req.mainDims[0], Height: req.mainDims[1]}
	}
	for i, in := range req.Inputs {
		if in.Output == nil {
			continue // awaited: upload_input brings it
		}
		f := *in.Output
		f.Role = in.Role
		if in.Image != nil {
			b, err := s.storeInput(ctx, c.owner, id, fmt.Sprintf("%s-%d", in.Role, i), in.Image)
			if err != nil {
				s.dropInputs(ctx, c.stored)
				c.stored = nil
				return err
			}
			c.stored = append(c.stored, b)
			f.StoredBlob = b
		}
		if in.Role == main {
			p.InputImage = &f
		} else {
			p.Inputs = append(p.Inputs, f)
		}
	}
	return nil
}

// insert is Create's write transaction, shared with the owner's other
// creates waiting at once where the engine batches them (UpdateOwner):
// under the owner's lock it finds an earlier generation of the
// idempotency key (earlier), else checks the budget and the create rate
// (a refusal is the error), else inserts c's record and runs InTx. A
// repeat or a refusal is an outcome, not a failed write: a failing write
// makes the engine rerun its batch mates.
func (s *Service) insert(ctx context.Context, c *creation) (earlier *Row, err error) {
	var refused error
	locked := c.req.IdempotencyKey != "" || c.limit != nil || c.rate != nil
	update := s.store.Update
	if locked {
		update = func(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
			return s.store.UpdateOwner(ctx, c.owner, fn)
		}
	}
	err = update(ctx, func(ctx context.Context, tx Tx) error {
		earlier, refused = nil, nil
		if locked {
			if err := tx.LockOwner(ctx, c.owner); err != nil {
				return err
			}
		}
		var spent *int64 // the day's spend, when read with the key
		if c.req.IdempotencyKey != "" {
			var err error
			if earlier, spent, err = keyed(ctx, tx, c); err != nil || earlier != nil {
				return err
			}
		}
		var err error
		if refused, err = s.refusal(ctx, tx, c, spent); err != nil || refused != nil {
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

// keyed finds the owner's generation of c's idempotency key (earlier,
// nil when none). With a budget it reads the day's spend in the same
// statement (spent): a keyed, budgeted create takes a round trip fewer.
func keyed(ctx context.Context, tx Tx, c *creation) (earlier *Row, spent *int64, err error) {
	if c.limit != nil {
		n, id, err := tx.SpentAndKey(ctx, c.owner, c.req.IdempotencyKey, dayStart(c.now))
		if err != nil || id == "" {
			return nil, &n, err
		}
	}
	r, err := tx.GenerationByKey(ctx, c.owner, c.req.IdempotencyKey)
	switch {
	case err == nil:
		return &r, nil, nil
	case errors.Is(err, ErrNotFound):
		return nil, nil, nil
	}
	return nil, nil, err
}

// refusal is why the owner may not create c now (nil: they may): over
// the daily budget, or out of create tokens. Taking a token comes last,
// so a repeat or a refusal above costs none. spent is the day's spend if
// already read.
func (s *Service) refusal(ctx context.Context, tx Tx, c *creation, spent *int64) (refused, err error) {
	if c.limit != nil {
		if spent == nil {
			n, err := tx.SpentSince(ctx, c.owner, dayStart(c.now))
			if err != nil {
				return nil, err
			}
			spent = &n
		}
		if c.req.credits > *c.limit-*spent {
			return budgetError(c.m, c.req.credits, *c.limit, *spent), nil
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
