package generation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // input images: DecodeConfig
	_ "image/png"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/darkroom-mcp/darkroom/internal/ids"
	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/preview"
	"github.com/darkroom-mcp/darkroom/provider"
	_ "golang.org/x/image/webp"
)

// ErrNotFound is returned for an unknown id and, identically, for an id
// owned by someone else: a foreign id must look exactly like an unknown one.
var ErrNotFound = errors.New("generation not found")

// InputError is bad input from the caller; nothing was changed. Its message
// says what to fix.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, a ...any) error { return &InputError{fmt.Sprintf(format, a...)} }

// Observer lets the layer above (tasks) keep its own rows in step with a
// generation inside the same transaction.
type Observer interface {
	// Changed runs inside the write transaction after every status or
	// progress change, with the new state.
	Changed(ctx context.Context, tx Tx, g *Generation) error
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, tx Tx, g *Generation) error

// Changed calls f.
func (f ObserverFunc) Changed(ctx context.Context, tx Tx, g *Generation) error { return f(ctx, tx, g) }

// Config wires a Service.
type Config struct {
	Store         Store
	Blobs         blob.Store
	Providers     []provider.Provider
	Hub           *Hub
	Now           func() time.Time
	MaxInputBytes int64         // upload cap; default 10 MiB
	LinkTTL       time.Duration // signed link lifetime; default 15 min
	// Retention is how long outputs are kept after completion (default 7
	// days); then their files are deleted.
	Retention time.Duration
	// History is how long an ended generation's record is kept after its
	// last change (0: for ever); then it is deleted, its input image too,
	// and reads as unknown. It must cover Retention (a completed record
	// goes only once its outputs have expired).
	History time.Duration
	// ReservationTTL is how long a reserved generation waits for its
	// uploads or approval before it fails, refunded (default
	// DefaultReservationTTL); the retention round decides.
	ReservationTTL time.Duration
	// Exclusive, when set, runs retention on one replica of the fleet at
	// a time: it runs fn unless another replica is running the same job
	// (then returns nil). Nil: this process is the only one.
	Exclusive func(ctx context.Context, job string, fn func(context.Context) error) error
	// Observer, when set, follows every change inside its transaction.
	Observer Observer
	// Budget is the caller's daily credit limit (nil result: unlimited),
	// decided inside the creating transaction.
	Budget func(ctx context.Context, owner string) *int64
	// CreateRate is the caller's create rate (nil result: unlimited),
	// decided inside the creating transaction after the budget.
	CreateRate func(ctx context.Context, owner string) *Rate
	// Kick, when set, is told of every write that makes work due (the
	// runner is woken in any case).
	Kick func()
	// Logger gets one info line per lifecycle event; Metrics counts them.
	Logger  *slog.Logger
	Metrics Meter
	// InlinePreview makes a preview of each image output as it is stored
	// (see package preview), recorded in Output.Preview.
	InlinePreview bool
	// Models resolves qualified model ids and checks provider-native
	// input (models.go); nil: the curated catalog only.
	Models Models
	// Unavailable holds the curated models whose provider is not
	// configured, by id, each with the setting the server needs for it
	// ("GEMINI_API_KEY"): asked for one, a caller learns that, not that
	// it does not exist.
	Unavailable map[string]string
}

// Service is the API over generations used by the tool handlers.
type Service struct {
	cfg          Config
	store        Store
	kicks        chan struct{} // wakes the runner
	models       []provider.Model
	modelByID    map[string]provider.Model
	providers    map[string]provider.Provider
	previews     *preview.Cache // inline previews' bytes by key (immutable)
	availability availability   // what the vendors' listings say of curated models (models.go)
}

// NewService builds the service and its model catalog.
func NewService(cfg Config) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMeter{}
	}
	if cfg.MaxInputBytes == 0 {
		cfg.MaxInputBytes = 10 << 20
	}
	if cfg.LinkTTL == 0 {
		cfg.LinkTTL = 15 * time.Minute
	}
	if cfg.Retention == 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.ReservationTTL <= 0 {
		cfg.ReservationTTL = DefaultReservationTTL
	}
	if cfg.Hub == nil {
		cfg.Hub = NewHub()
	}
	if cfg.Kick == nil {
		cfg.Kick = func() {}
	}
	if cfg.Budget == nil {
		cfg.Budget = func(context.Context, string) *int64 { return nil }
	}
	if cfg.CreateRate == nil {
		cfg.CreateRate = func(context.Context, string) *Rate { return nil }
	}
	s := &Service{cfg: cfg, store: cfg.Store, kicks: make(chan struct{}, 1), modelByID: map[string]provider.Model{}, providers: map[string]provider.Provider{}}
	s.previews = preview.NewCache()
	s.SetAvailability(nil)
	for _, p := range cfg.Providers {
		s.providers[p.Name()] = p
		for _, m := range p.Models() {
			if _, dup := s.modelByID[m.ID]; dup {
				return nil, fmt.Errorf("model %q is offered by two providers", m.ID)
			}
			m.Provider = p.Name()
			s.modelByID[m.ID] = m
			s.models = append(s.models, m)
		}
	}
	return s, nil
}

// kick wakes the runner: a write made work due.
func (s *Service) kick() {
	select {
	case s.kicks <- struct{}{}:
	default:
	}
	s.cfg.Kick()
}

// Hub returns the change hub.
func (s *Service) Hub() *Hub { return s.cfg.Hub }

// Models lists every model, in provider then catalog order.
func (s *Service) Models() []provider.Model {
	return slices.DeleteFunc(slices.Clone(s.models), func(m provider.Model) bool { return !s.Available(m.ID) })
}

// Model looks a model up by id.
func (s *Service) Model(id string) (provider.Model, bool) {
	if m, ok := s.modelByID[id]; ok {
		return m, true
	}
	if s.cfg.Models != nil {
		return s.cfg.Models.Known(id)
	}
	return provider.Model{}, false
}

// InputImage is an input image sent inline.
type InputImage struct {
	Data     []byte
	MimeType string // as claimed by the caller; checked against the bytes
}

// CreateRequest is a new generation.
type CreateRequest struct {
	ModelID         string
	Prompt          string
	NegativePrompt  string
	AspectRatio     string
	Seed            *int64
	DurationSeconds int
	InputImage      *InputImage // the main input image, sent as bytes
	// Inputs are input files by role (RoleInput); the main image may be
	// one of them instead of InputImage.
	Inputs []RoleInput
	// Count is how many outputs to make (0 means 1).
	Count int
	// Input are provider-native fields (checked by Resolve against the
	// model's schema), stored with the generation and sent as they are.
	Input          map[string]any
	IdempotencyKey string
	// HoldForApproval keeps the generation reserved until Approve.
	HoldForApproval bool
	// InTx runs inside the creating transaction (the tasks layer creates its
	// task row here, so both commit together or not at all).
	InTx func(ctx context.Context, tx Tx, g *Generation) error
	// valid is the model Validate accepted the request for: Create then
	// validates it no second time (its fields must not change between).
	valid *provider.Model
	// credits is what the request costs (Validate): the model's price per
	// output times the count.
	credits int64
	// mainDims is InputImage's size, read from its header by Validate.
	mainDims [2]int
	// resolved is the qualified model Resolve found (models.go).
	resolved *provider.Model
}

// Credits is what the validated request costs: the model's credits per
// output times the outputs asked for.
func (req *CreateRequest) Credits() int64 { return req.credits }

// DefaultAspectRatio is used when the caller gives none (or the model's
// first ratio when it does not offer this one).
const DefaultAspectRatio = "16:9"

// Bounds on a request, in characters (Unicode code points, as JSON
// Schema's maxLength counts), not bytes. The tool schemas are built from
// these constants.
const (
	MaxPromptChars         = 4000
	MaxNegativePromptChars = 2000
	MaxIdempotencyKeyChars = 200
	// MaxDurationSeconds bounds durationSeconds whatever a model offers.
	MaxDurationSeconds = 60
)

// Bounds on an input image, read from its header before anything is
// stored or charged: a longer side or more pixels than these is refused.
const (
	MaxInputSide   = 8192
	MaxInputPixels = 40_000_000
)

// Validate checks a request against the catalog without touching storage.
func (s *Service) Validate(req *CreateRequest) (provider.Model, error) {
	if !s.Available(req.ModelID) {
		return provider.Model{}, s.Unavailable(req.ModelID)
	}
	m, ok := s.lookupModel(req)
	if !ok {
		if err := s.Unavailable(req.ModelID); err != nil {
			return m, err
		}
		return m, inputErrorf("unknown modelId %q: it does not exist (list_models and search_models list the available ids)", req.ModelID)
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return m, inputErrorf("prompt is required and must not be blank")
	}
	if n := utf8.RuneCountInString(req.Prompt); n > MaxPromptChars {
		return m, inputErrorf("prompt is %d characters; the limit is %d: shorten it", n, MaxPromptChars)
	}
	if n := utf8.RuneCountInString(req.NegativePrompt); n > MaxNegativePromptChars {
		return m, inputErrorf("negativePrompt is %d characters; the limit is %d: shorten it", n, MaxNegativePromptChars)
	}
	if n := utf8.RuneCountInString(req.IdempotencyKey); n > MaxIdempotencyKeyChars {
		return m, inputErrorf("idempotencyKey is %d characters; the limit is %d", n, MaxIdempotencyKeyChars)
	}
	if req.AspectRatio == "" {
		req.AspectRatio = DefaultAspectRatio
		if !slices.Contains(m.AspectRatios, DefaultAspectRatio) && len(m.AspectRatios) > 0 {
			req.AspectRatio = m.AspectRatios[0] // a model without 16:9 (OpenAI's: 1:1, 3:2, 2:3)
		}
	}
	if len(m.AspectRatios) == 0 && req.AspectRatio == DefaultAspectRatio {
		req.AspectRatio = "" // a qualified model without an aspect-ratio field
	} else if !slices.Contains(m.AspectRatios, req.AspectRatio) {
		return m, inputErrorf("aspectRatio %q is not offered by %s; choose %s", req.AspectRatio, m.ID, words.Or(m.AspectRatios))
	}
	if req.DurationSeconds < 0 || req.DurationSeconds > MaxDurationSeconds {
		return m, inputErrorf("durationSeconds must be between 1 and %d; got %d", MaxDurationSeconds, req.DurationSeconds)
	}
	if m.Kind == provider.KindVideo {
		if req.DurationSeconds == 0 && len(m.Durations) > 0 {
			req.DurationSeconds = m.Durations[0]
		}
		if len(m.Durations) > 0 && !slices.Contains(m.Durations, req.DurationSeconds) {
			return m, inputErrorf("durationSeconds %d is not offered by %s; choose %s", req.DurationSeconds, m.ID, words.Or(m.Durations))
		}
	} else if req.DurationSeconds != 0 {
		return m, inputErrorf("durationSeconds applies to video models only; %s makes images", m.ID)
	}
	if req.InputImage != nil && !m.NeedsInputImage && !m.AcceptsInputImage {
		return m, inputErrorf("%s does not take an input image", m.ID)
	}
	if req.InputImage != nil {
		w, h, err := s.checkImage(req.InputImage, "inputImage")
		if err != nil {
			return m, err
		}
		req.mainDims = [2]int{w, h}
	}
	if err := s.checkInputs(req, m); err != nil {
		return m, err
	}
	most := max(m.MaxCount, 1)
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Count < 1 || req.Count > most {
		return m, inputErrorf("count %d is not offered by %s: it makes 1 to %d outputs per call", req.Count, m.ID, most)
	}
	if m.Credits < 0 || m.Credits > math.MaxInt64/int64(req.Count) { // an operator's catalog is read, not trusted to fit
		return m, inputErrorf("%s's price (%d credits an output) is out of range for count %d; nothing was charged", m.ID, m.Credits, req.Count)
	}
	req.credits = m.Credits * int64(req.Count)
	req.valid = &m
	return m, nil
}

// validated is Validate's answer, given once per request.
func (s *Service) validated(req *CreateRequest) (provider.Model, error) {
	if v := req.valid; v != nil && v.ID == req.ModelID {
		return *v, nil
	}
	return s.Validate(req)
}

// checkImage refuses an input image that cannot be used, from its bytes'
// size, type and header (image.DecodeConfig reads no pixels), so nothing
// is stored or charged for it. It sets MimeType to the real type and
// returns the size. field names the image in errors.
func (s *Service) checkImage(img *InputImage, field string) (width, height int, err error) {
	if len(img.Data) == 0 {
		return 0, 0, inputErrorf("%s is empty", field)
	}
	if int64(len(img.Data)) > s.cfg.MaxInputBytes {
		return 0, 0, inputErrorf("%s is %d bytes; the limit is %d bytes", field, len(img.Data), s.cfg.MaxInputBytes)
	}
	real := SniffImage(img.Data)
	if real == "" {
		return 0, 0, inputErrorf("%s is not a PNG, JPEG or WebP image", field)
	}
	if img.MimeType != "" && img.MimeType != real {
		return 0, 0, inputErrorf("%s claims %s but its bytes are %s", field, img.MimeType, real)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || "image/"+format != real {
		return 0, 0, inputErrorf("%s is not a valid %s file (its header cannot be read); send the image again or in another format", field, real)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, inputErrorf("%s is %d×%d pixels; it has no pixels", field, cfg.Width, cfg.Height)
	}
	if cfg.Width > MaxInputSide || cfg.Height > MaxInputSide || int64(cfg.Width)*int64(cfg.Height) > MaxInputPixels {
		return 0, 0, inputErrorf("%s is %d×%d pixels; the limit is %d pixels a side and %d million pixels: scale it down",
			field, cfg.Width, cfg.Height, MaxInputSide, MaxInputPixels/1_000_000)
	}
	img.MimeType = real
	return cfg.Width, cfg.Height, nil
}

// SniffImage names the image type from magic bytes, or "" if it is not a
// PNG, JPEG or WebP.
func SniffImage(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}):
		return "image/jpeg"
	case len(b) >= 12 && string(b[0:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// argsHash digests what makes a generation: a repeated idempotency key
// must come with the same.
func argsHash(req *CreateRequest) string {
	h := sha256.New()
	img := ""
	if req.InputImage != nil {
		sum := sha256.Sum256(req.InputImage.Data)
		img = hex.EncodeToString(sum[:])
	}
	seed := ""
	if req.Seed != nil {
		seed = fmt.Sprint(*req.Seed)
	}
	args := []any{req.ModelID, req.Prompt, req.NegativePrompt, req.AspectRatio, seed, req.DurationSeconds, img, req.HoldForApproval}
	// What later releases added joins the digest only when used, so a
	// key repeated across an upgrade still matches its first request.
	if req.Count > 1 {
		args = append(args, "count", req.Count)
	}
	for _, in := range req.Inputs {
		args = append(args, "input", in.Role, inputDigest(in))
	}
	if req.Input != nil {
		args = append(args, req.Input) // only when given: earlier generations' hashes stay
	}
	_ = json.NewEncoder(h).Encode(args)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// inputDigest names an input's content: its bytes' digest, the output it
// is, or "" for one still to upload.
func inputDigest(in RoleInput) string {
	switch {
	case in.Image != nil:
		sum := sha256.Sum256(in.Image.Data)
		return hex.EncodeToString(sum[:])
	case in.Output != nil:
		return in.Output.From
	}
	return ""
}

func dayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func budgetError(m provider.Model, credits, limit, spent int64) error {
	return inputErrorf("%s costs %d credits but your balance today is %d (spent %d of %d); nothing was generated", m.ID, credits, max(limit-spent, 0), spent, limit)
}

// storeInput keeps an input image under a name unique to this attempt, so
// that a losing concurrent upload never overwrites the winner's file.
func (s *Service) storeInput(ctx context.Context, owner, id, name string, img *InputImage) (StoredBlob, error) {
	ext := strings.TrimPrefix(img.MimeType, "image/")
	obj, err := s.cfg.Blobs.Put(ctx, blob.OwnerHash(owner)+"/"+id+"/"+name+"."+ext, bytes.NewReader(img.Data), img.MimeType, s.cfg.MaxInputBytes)
	if err != nil {
		return StoredBlob{}, fmt.Errorf("store input image: %w", err)
	}
	return StoredBlob{Key: obj.Key, MimeType: obj.ContentType, Bytes: obj.Size, SHA256: obj.SHA256}, nil
}

// dropInputs deletes inputs stored for a write that did not commit.
func (s *Service) dropInputs(ctx context.Context, in []StoredBlob) {
	for _, b := range in {
		_ = s.cfg.Blobs.Delete(context.WithoutCancel(ctx), b.Key)
	}
}

// Get returns the owner's generation, or ErrNotFound.
func (s *Service) Get(ctx context.Context, owner, id string) (*Generation, error) {
	r, err := s.store.OwnedGeneration(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return fromRow(r)
}

// List pages through the owner's generations, newest first. status filters
// when non-empty; cursor is the opaque nextCursor of the previous page.
func (s *Service) List(ctx context.Context, owner string, status Status, cursor string, limit int) ([]*Generation, string, error) {
	if status != "" && !status.Valid() {
		return nil, "", inputErrorf("status %q is not reserved, queued, running, completed, failed or cancelled", status)
	}
	p := ListQuery{Owner: owner, Status: status, Limit: limit + 1}
	if cursor != "" {
		c, id, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", inputErrorf("cursor is not one this server issued; omit it to start from the newest")
		}
		p.BeforeCreated, p.BeforeID = c, id
	}
	rows, err := s.store.ListGenerations(ctx, p)
	if err != nil {
		return nil, "", err
	}
	var next string
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[len(rows)-1]
		next = encodeCursor(last.CreatedAt.UnixMilli(), last.ID)
	}
	out := make([]*Generation, 0, len(rows))
	for _, r := range rows {
		g, err := fromRow(r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, g)
	}
	return out, next, nil
}

func encodeCursor(createdAt int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(createdAt, 10) + ":" + id))
}

func decodeCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", err
	}
	ts, id, ok := strings.Cut(string(b), ":")
	if !ok || id == "" {
		return 0, "", errors.New("bad cursor")
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || n <= 0 {
		return 0, "", errors.New("bad cursor")
	}
	return n, id, nil
}

// msgAwaitsImage is the status message of a generation reserved for its
// input image (no id: whoever reads it already has it).
const msgAwaitsImage = "waiting for an input image: call upload_input with this generationId"

// Wait blocks until the generation is terminal, timeout passes (timedOut),
// or ctx ends. It is event-driven: the runner's commit wakes it at once.
func (s *Service) Wait(ctx context.Context, owner, id string, timeout time.Duration) (g *Generation, timedOut bool, err error) {
	return s.WaitWith(ctx, owner, id, timeout, WaitOptions{})
}

// WaitOptions lets a waiter watch the states a wait goes through.
type WaitOptions struct {
	// OnState, if set, is called with every non-terminal state the wait
	// reads (at the start and after each change; tick false), and with
	// the latest one every Every while nothing changes (tick true). It
	// runs on the waiting goroutine and must not block for long.
	OnState func(g *Generation, tick bool)
	// Every is the keep-alive interval for OnState (0: none).
	Every time.Duration
}

// WaitWith is Wait reporting the states it sees to o.OnState.
func (s *Service) WaitWith(ctx context.Context, owner, id string, timeout time.Duration, o WaitOptions) (g *Generation, timedOut bool, err error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var tick <-chan time.Time
	if o.OnState != nil && o.Every > 0 {
		ticker := time.NewTicker(o.Every)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		ch, release := s.cfg.Hub.Watch(id)
		g, err = s.Get(ctx, owner, id)
		if err != nil || g.Status.Terminal() {
			release()
			return g, false, err
		}
		if o.OnState != nil {
			o.OnState(g, false)
		}
		for woke := false; !woke; {
			select {
			case <-ch:
				woke = true
			case <-tick:
				o.OnState(g, true)
			case <-timer.C:
				release()
				return g, true, nil
			case <-s.cfg.Hub.Drained(): // shutting down: call again
				release()
				return g, true, nil
			case <-ctx.Done():
				release()
				return g, false, ctx.Err()
			}
		}
		release()
	}
}

// CancelOutcome says what Cancel did.
type CancelOutcome int

const (
	// CancelDone: the generation ended cancelled now (credits refunded).
	CancelDone CancelOutcome = iota
	// CancelRequested: the provider was asked; the runner reports the outcome.
	CancelRequested
	// CancelTooLate: the generation was already terminal; nothing changed.
	CancelTooLate
)

// Cancel cancels a reserved or queued generation at once, or asks the
// provider to cancel a running one. Cooperative: the job may finish first.
func (s *Service) Cancel(ctx context.Context, owner, id string) (*Generation, CancelOutcome, error) {
	if _, err := s.Get(ctx, owner, id); err != nil {
		return nil, 0, err
	}
	return s.cancel(ctx, id)
}

// CancelByID is Cancel for a caller that has already checked ownership
// (the tasks layer checks the task's owner).
func (s *Service) CancelByID(ctx context.Context, id string) (*Generation, CancelOutcome, error) {
	return s.cancel(ctx, id)
}

func (s *Service) cancel(ctx context.Context, id string) (*Generation, CancelOutcome, error) {
	outcome := CancelTooLate
	g, err := s.change(ctx, id, func(ctx context.Context, tx Tx, at time.Time) (bool, error) {
		outcome = CancelTooLate
		c := change(id, EventCancel, "")
		c.At, c.Message = at, "cancelled before submission; credits refunded"
		ok, err := tx.Apply(ctx, c)
		if err != nil || ok {
			outcome = CancelDone
			return ok, err
		}
		c = change(id, EventCancelAsk, "")
		c.At = at
		if ok, err = tx.Apply(ctx, c); ok {
			outcome = CancelRequested
		}
		return false, err
	})
	if err != nil {
		return nil, 0, err
	}
	if outcome == CancelTooLate && g.CancelRequested && !g.Status.Terminal() {
		outcome = CancelRequested // asked before; still waiting on the provider
	}
	if outcome == CancelRequested {
		s.noteStatus(g, "cancel requested")
		// The ask changes no status, so change() announced nothing: a
		// step holding a stream or a create for it (signal.go) is woken.
		s.cfg.Hub.Publish(id)
		s.kick()
	}
	return g, outcome, nil
}

// UploadInput attaches an input file the reserved generation waits for
// (role: its main image, a mask, a reference, a last frame; "" the first
// it waits for), and queues it once nothing else is awaited. The check
// that it still waits for that role and the change are one transaction:
// of concurrent uploads exactly one wins, and the record names the file
// that upload stored.
func (s *Service) UploadInput(ctx context.Context, owner, id, role string, img InputImage) (*Generation, error) {
	g, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	m := s.modelOf(ctx, g)
	if role == "" {
		role = nextAwaited(g, m)
	}
	if err := uploadable(g, m, role); err != nil {
		return nil, err
	}
	w, h, err := s.checkImage(&img, "image")
	if err != nil {
		return nil, err
	}
	f := InputFile{Role: role, Width: w, Height: h}
	if err := fitsMask(g.Params, f); err != nil {
		return nil, err
	}
	// Each upload its own file: a losing one deletes only its own. (An id's
	// first 12 digits are its millisecond, shared by concurrent uploads.)
	if f.StoredBlob, err = s.storeInput(ctx, owner, id, role+"-"+ids.New()[12:28], &img); err != nil {
		return nil, err
	}
	after, err := s.release(ctx, id, func(g *Generation) error {
		if err := uploadable(g, m, role); err != nil {
			return err
		}
		attach(&g.Params, MainRole(m.Kind), f)
		return nil
	}, "queued")
	if err != nil {
		s.dropInputs(ctx, []StoredBlob{f.StoredBlob})
	}
	return after, err
}

// nextAwaited is the role an upload without one is for: the main image
// first, then the further roles in the order inputs named them.
func nextAwaited(g *Generation, m provider.Model) string {
	if g.Params.AwaitsImage || len(g.Params.Awaits) == 0 {
		return MainRole(m.Kind)
	}
	return g.Params.Awaits[0]
}

func uploadable(g *Generation, m provider.Model, role string) error {
	switch {
	case g.Status != StatusReserved:
		return inputErrorf("generation %s is %s; upload_input applies only to a reserved generation", g.ID, g.Status)
	case maxOf(m, role) == 0:
		return inputErrorf("model %s takes no %s input; it takes %s", g.ModelID, role, rolesInWords(m))
	case role == MainRole(m.Kind) && !g.Params.AwaitsImage:
		return inputErrorf("generation %s already has its %s", g.ID, strings.ReplaceAll(role, "_", " "))
	case role != MainRole(m.Kind) && !slices.Contains(g.Params.Awaits, role):
		return inputErrorf("generation %s waits for no %s input", g.ID, role)
	}
	return nil
}

// fitsMask refuses an upload whose size differs from its counterpart's:
// a mask against the main image, the main image against a mask.
func fitsMask(p Params, f InputFile) error {
	var main [2]int
	var inputs []RoleInput
	if p.InputImage != nil {
		main = [2]int{p.InputImage.Width, p.InputImage.Height}
	}
	for i := range p.Inputs {
		inputs = append(inputs, RoleInput{Role: p.Inputs[i].Role, Output: &p.Inputs[i]})
	}
	if f.Role == provider.RoleMask {
		inputs = append(inputs, RoleInput{Role: f.Role, Output: &f})
	} else if f.Role == provider.RoleImage {
		main = [2]int{f.Width, f.Height}
	}
	return checkMaskSize(main, inputs)
}

// attach records an uploaded file and what the generation still awaits.
func attach(p *Params, main string, f InputFile) {
	if f.Role == main {
		p.InputImage, p.AwaitsImage = &f, false
		return
	}
	p.Inputs = append(p.Inputs, f)
	i := slices.Index(p.Awaits, f.Role)
	p.Awaits = slices.Delete(p.Awaits, i, i+1)
}

// Approve releases a generation held for spend approval (it still waits
// for its input image if it has none).
func (s *Service) Approve(ctx context.Context, id string) (*Generation, error) {
	return s.release(ctx, id, func(g *Generation) error {
		g.Params.AwaitsApproval = false
		return nil
	}, "queued: spend approved")
}

// release clears one reason a reserved generation waits, inside one write
// transaction, and queues it when no reason is left. clear sees the
// record as the transaction reads it and may refuse (its error stands).
func (s *Service) release(ctx context.Context, id string, clear func(*Generation) error, msg string) (*Generation, error) {
	var refused error
	g, err := s.change(ctx, id, func(ctx context.Context, tx Tx, at time.Time) (bool, error) {
		refused = nil
		cur, err := readIn(ctx, tx, id)
		if err != nil {
			return false, err
		}
		if refused = clear(cur); refused != nil {
			return false, nil // an outcome: nothing changes
		}
		p := cur.Params
		pj, _ := json.Marshal(p)
		c := change(id, EventQueue, "")
		c.Message = msg
		if p.awaitsInput() || p.AwaitsApproval {
			c = change(id, EventHold, "")
			c.Message = waitingFor(p)
			if p.AwaitsApproval {
				c.Message = "waiting for approval to spend " + words.Count(cur.Credits, "credit")
			}
		}
		c.At, c.Params = at, string(pj)
		return tx.Apply(ctx, c)
	})
	if err == nil && refused != nil {
		return nil, refused
	}
	if err == nil && g.Status == StatusQueued {
		s.noteStatus(g, "queued")
		s.kick()
	}
	return g, err
}

// change runs fn in a write transaction; when fn reports a change, the
// observer runs in the same transaction and waiters wake after commit.
// It returns the state after the transaction.
func (s *Service) change(ctx context.Context, id string, fn func(ctx context.Context, tx Tx, at time.Time) (bool, error)) (*Generation, error) {
	var g *Generation
	var changed bool
	at := s.cfg.Now()
	err := s.store.Update(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		if changed, err = fn(ctx, tx, at); err != nil {
			return err
		}
		if g, err = readIn(ctx, tx, id); err != nil {
			return err
		}
		if s.livePreviews(g.Provider) {
			// The live preview lives while the generation runs
			// (livepreview.go): the Observer is told how many frames came,
			// and the change that ends it deletes it.
			switch {
			case g.Previewing():
				n, err := tx.LivePreviewFrames(ctx, id)
				if err != nil {
					return err
				}
				g.PreviewFrames = int(n)
			case changed && g.Status.Terminal():
				if err := tx.DeleteLivePreview(ctx, id); err != nil {
					return err
				}
			}
		}
		if changed && s.cfg.Observer != nil {
			return s.cfg.Observer.Changed(ctx, tx, g)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if changed {
		s.cfg.Hub.Publish(id)
		s.noteChanged(g, at)
	}
	return g, nil
}

// apply makes one guarded change (see change) and reports the state
// after it.
func (s *Service) apply(ctx context.Context, c Change) (*Generation, error) {
	return s.change(ctx, c.ID, func(ctx context.Context, tx Tx, at time.Time) (bool, error) {
		c.At = at
		return tx.Apply(ctx, c)
	})
}

// Spent returns the credits the owner was charged since the start of the
// current UTC day.
func (s *Service) Spent(ctx context.Context, owner string) (int64, error) {
	return s.store.SpentSince(ctx, owner, dayStart(s.cfg.Now()))
}

// Link mints a short-lived signed link for a stored blob.
func (s *Service) Link(ctx context.Context, b StoredBlob) (string, time.Time, error) {
	return s.cfg.Blobs.SignedURL(ctx, b.Key, s.cfg.LinkTTL)
}

// Retention returns how long outputs are kept.
func (s *Service) Retention() time.Duration { return s.cfg.Retention }

// ExpireOutputs deletes the files of generations completed more than the
// retention period ago and marks their outputs expired, in batches. A
// file is deleted before the record says so: a crash in between leaves a
// record whose file is gone, which the next pass marks.
func (s *Service) ExpireOutputs(ctx context.Context) (int, error) {
	before := s.cfg.Now().Add(-s.cfg.Retention)
	total := 0
	for {
		rows, err := s.store.OutputsToExpire(ctx, before, 200)
		if err != nil || len(rows) == 0 {
			return total, err
		}
		for _, r := range rows {
			var outs []Output
			if err := json.Unmarshal([]byte(r.Outputs), &outs); err != nil {
				return total, err
			}
			for _, o := range outs {
				if err := s.deleteOutput(ctx, o); err != nil {
					return total, err
				}
			}
			if _, err := s.change(ctx, r.ID, func(ctx context.Context, tx Tx, _ time.Time) (bool, error) {
				return tx.MarkOutputsExpired(ctx, r.ID)
			}); err != nil {
				return total, err
			}
			total++
		}
		if len(rows) < 200 {
			return total, nil
		}
	}
}

// PruneCreateBuckets forgets the create-rate buckets that are full again
// (no row says the same), so the table holds only recent creators.
func (s *Service) PruneCreateBuckets(ctx context.Context) (n int64, err error) {
	err = s.store.Update(ctx, func(ctx context.Context, tx Tx) (err error) {
		n, err = tx.PruneCreateBuckets(ctx, s.cfg.Now())
		return err
	})
	return n, err
}

// RunRetention expires outputs and reservations nobody completed, prunes
// full create-rate buckets and purges the history (PurgeHistory), every
// interval until ctx ends.
func (s *Service) RunRetention(ctx context.Context, every time.Duration, onErr func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	expire := func(ctx context.Context) error {
		_, err := s.ExpireOutputs(ctx)
		_, rerr := s.ExpireReservations(ctx)
		_, perr := s.PruneCreateBuckets(ctx)
		_, _, herr := s.PurgeHistory(ctx)
		return errors.Join(err, rerr, perr, herr)
	}
	for {
		var err error
		if s.cfg.Exclusive != nil {
			err = s.cfg.Exclusive(ctx, "generation.retention", expire)
		} else {
			err = expire(ctx)
		}
		if err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
