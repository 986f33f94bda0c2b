// Package local is darkroom's built-in provider: it needs no network and no
// keys, and simulates a real job API honestly so every path of darkroom can
// be exercised on one machine.
//
// Outputs are procedural and deterministic: the same model, prompt,
// negative prompt, aspect ratio, duration, seed (and input images) give
// byte-identical files from one build of darkroom (another CPU architecture
// may round floating point differently). Image models write a PNG, video
// models an animated GIF, or an MP4 when ffmpeg is on PATH (the job reports
// the real type). A job makes Request.Count outputs, output n rendered
// with seed+n. Every input role is drawn: an image model given a main
// image edits it, inside a mask if there is one (edit.go); reference
// images set the palette (render.go); a video's last frame ends its clip
// (video.go).
//
// Jobs are durable. Each is a JSON file under <Dir>/local-provider/jobs,
// written atomically, and its state follows from its submit time and the
// clock: queued for the first 15% of its latency, then running with rising
// progress, then completed. The output is rendered when first asked for
// after completion, into <Dir>/local-provider/outputs/<job>/. So a job
// survives a kill -9 and a new Provider on the same Dir carries on.
//
// Two prompt tokens steer a job, so tests and demos can reach every path:
//
//	[fail]  the job fails after its queue phase with the error
//	        "the local provider refused this prompt ([fail] token)"
//	[slow]  the job takes twice its model's latency
//
// The provider sends no webhooks and ignores Request.Deadline: darkroom
// polls it and enforces its own deadlines.
package local

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"image"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/provider"
)

// Options configures a Provider.
type Options struct {
	// Dir is darkroom's data folder; the provider keeps its files in
	// Dir/local-provider.
	Dir string
	// Scale multiplies every model's latency (about 1 s to 3 s for images,
	// 20 s for video). 0 completes jobs at once. See ParseLatencyScale.
	Scale float64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ParseLatencyScale parses a latency scale such as DARKROOM_LOCAL_LATENCY:
// empty means 1, otherwise a number from 0 to 1000.
func ParseLatencyScale(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 1, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !validScale(f) {
		return 0, fmt.Errorf("local: latency scale %q is not a number from 0 to %d", s, maxScale)
	}
	return f, nil
}

// maxScale keeps scaled latencies (at most 20 s × maxScale) far from
// overflowing a time.Duration.
const maxScale = 1000

func validScale(f float64) bool { return f >= 0 && f <= maxScale } // NaN fails both

// Provider is the local provider. It is safe for concurrent use, and
// several processes may share one Dir.
type Provider struct {
	dir    string
	scale  float64
	now    func() time.Time
	ffmpeg string // ffmpeg's path; empty means videos stay GIF

	// locks serialise the calls on one job (striped by job id, so there is
	// nothing to clean up).
	locks [64]sync.Mutex
}

var _ provider.Provider = (*Provider)(nil)

// New makes a Provider storing its jobs under opts.Dir.
func New(opts Options) (*Provider, error) {
	if opts.Dir == "" {
		return nil, errors.New("local: Options.Dir is required")
	}
	if !validScale(opts.Scale) {
		return nil, fmt.Errorf("local: latency scale %v is not a number from 0 to %d", opts.Scale, maxScale)
	}
	p := &Provider{dir: filepath.Join(opts.Dir, "local-provider"), scale: opts.Scale, now: opts.Now}
	if p.now == nil {
		p.now = time.Now
	}
	for _, sub := range []string{"jobs", "outputs"} {
		if err := os.MkdirAll(filepath.Join(p.dir, sub), 0o750); err != nil {
			return nil, err
		}
	}
	p.ffmpeg, _ = exec.LookPath("ffmpeg")
	return p, nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return Name }

// Models implements provider.Provider; ExpectedDuration includes the scale.
func (p *Provider) Models() []provider.Model {
	models := make([]provider.Model, len(catalog))
	for i, c := range catalog {
		models[i], _ = lookup(c.ID)
		models[i].ExpectedDuration = p.scaled(c.ExpectedDuration)
	}
	return models
}

func (p *Provider) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * p.scale)
}

// lock takes the lock for job id and returns its release.
func (p *Provider) lock(id string) func() {
	h := fnv.New32a()
	h.Write([]byte(id))
	mu := &p.locks[h.Sum32()%uint32(len(p.locks))]
	mu.Lock()
	return mu.Unlock
}

// Submit implements provider.Provider. A second submit with the same
// IdempotencyKey returns the first job, whatever the request says.
func (p *Provider) Submit(ctx context.Context, req provider.Request) (provider.Job, error) {
	if err := ctx.Err(); err != nil {
		return provider.Job{}, err
	}
	id := newJobID(req.IdempotencyKey)
	defer p.lock(id)()
	switch _, err := p.load(id); {
	case err == nil:
		return provider.Job{ID: id}, nil
	case !errors.Is(err, provider.ErrNotFound):
		return provider.Job{}, err
	}
	r, err := p.newRecord(id, req)
	if err != nil {
		return provider.Job{}, err
	}
	if req.InputImage != nil {
		if r.Input, err = p.storeInput(ctx, id, "input", req.InputImage, nil, nil); err != nil {
			return provider.Job{}, err
		}
	}
	for i := range req.Extra {
		in := &req.Extra[i]
		var check func(image.Config) error
		if in.Role == provider.RoleMask {
			check = func(cfg image.Config) error { return p.sameSize(r.Input, cfg) }
		}
		var sum string
		name, err := p.storeInput(ctx, id, in.Role, in, func(data []byte) {
			s := sha256.Sum256(data)
			sum = hex.EncodeToString(s[:])
		}, check)
		if err != nil {
			return provider.Job{}, err
		}
		r.Extras = append(r.Extras, extraFile{Role: in.Role, File: name, MimeType: in.MimeType, Sum: sum})
	}
	// Another process may have created the job meanwhile; its job wins.
	if err := p.save(r, true); err != nil && !errors.Is(err, fs.ErrExist) {
		return provider.Job{}, err
	}
	return provider.Job{ID: id}, nil
}

// storeInput reads and checks one input and keeps it in jobs/, named by
// the job, its role and its content. Only one input's bytes are held at a
// time. seen, when set, is given the bytes; check, the decoded header.
func (p *Provider) storeInput(ctx context.Context, id, role string, in *provider.Input, seen func([]byte), check func(image.Config) error) (string, error) {
	data, err := readInput(ctx, in)
	if err != nil {
		return "", roleError(role, err)
	}
	if check != nil {
		cfg, _, _ := image.DecodeConfig(bytes.NewReader(data)) // readInput read it
		if err := check(cfg); err != nil {
			return "", err
		}
	}
	if seen != nil {
		seen(data)
	}
	sum := sha256.Sum256(data)
	name := id + "-" + hex.EncodeToString(sum[:8]) + ".input"
	if role != "input" {
		name = id + "-" + role + "-" + hex.EncodeToString(sum[:8]) + ".input"
	}
	err = writeFile(p.inputPath(name), false, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	return name, err
}

// roleError names the role in a refusal of an extra input.
func roleError(role string, err error) error {
	var pe *provider.PermanentError
	if role == "input" || !errors.As(err, &pe) {
		return err
	}
	return &provider.PermanentError{Message: strings.Replace(pe.Message, "the input image", "the "+role+" image", 1)}
}

// sameSize refuses a mask whose size is not the stored main image's: a
// mask says which of its pixels may change.
func (p *Provider) sameSize(imageName string, mask image.Config) error {
	f, err := os.Open(p.inputPath(imageName))
	if err != nil {
		return err
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return err
	}
	if cfg.Width != mask.Width || cfg.Height != mask.Height {
		return &provider.PermanentError{Message: fmt.Sprintf("the mask is %d×%d pixels but the image is %d×%d; they must be the same size",
			mask.Width, mask.Height, cfg.Width, cfg.Height)}
	}
	return nil
}

// newRecord validates req against the catalog and fills in defaults.
func (p *Provider) newRecord(id string, req provider.Request) (*record, error) {
	m, ok := lookup(req.Model.ID)
	if !ok {
		return nil, &provider.PermanentError{Message: fmt.Sprintf("the local provider has no model %q", req.Model.ID)}
	}
	r := &record{
		ID:             id,
		IdempotencyKey: req.IdempotencyKey,
		Model:          m.ID,
		Prompt:         req.Prompt,
		NegativePrompt: req.NegativePrompt,
		AspectRatio:    cmp.Or(req.AspectRatio, m.AspectRatios[0]),
		Seed:           req.Seed,
		SubmittedAt:    p.now().UTC(),
		Latency:        p.scaled(m.ExpectedDuration),
	}
	if !slices.Contains(m.AspectRatios, r.AspectRatio) {
		return nil, &provider.PermanentError{Message: fmt.Sprintf("%s does not offer aspect ratio %q (choose %s)",
			m.ID, r.AspectRatio, words.Or(m.AspectRatios))}
	}
	if m.Kind == provider.KindVideo {
		r.Duration = req.DurationSeconds
		if r.Duration == 0 {
			r.Duration = m.Durations[0]
		}
		if !slices.Contains(m.Durations, r.Duration) {
			return nil, &provider.PermanentError{Message: fmt.Sprintf("%s does not offer a duration of %d s (choose %s)",
				m.ID, r.Duration, words.Or(m.Durations))}
		}
	}
	switch {
	case m.NeedsInputImage && req.InputImage == nil:
		return nil, &provider.PermanentError{Message: m.ID + " needs an input image"}
	case !m.NeedsInputImage && !m.AcceptsInputImage && req.InputImage != nil:
		return nil, &provider.PermanentError{Message: m.ID + " does not take an input image"}
	case req.InputImage != nil:
		r.InputMimeType = req.InputImage.MimeType
	}
	if err := checkExtras(m, req); err != nil {
		return nil, err
	}
	if req.Count < 0 || req.Count > max(m.MaxCount, 1) {
		return nil, &provider.PermanentError{Message: fmt.Sprintf("%s makes 1 to %d outputs a call, not %d", m.ID, max(m.MaxCount, 1), req.Count)}
	}
	r.Count = req.Count
	if hasToken(r.Prompt, slowToken) {
		r.Latency *= 2
	}
	return r, nil
}

// checkExtras refuses extra inputs the model does not take, or too many of
// one role, or a mask with no image to edit.
func checkExtras(m provider.Model, req provider.Request) error {
	n := map[string]int{}
	for _, in := range req.Extra {
		n[in.Role]++
		most, ok := m.Roles[in.Role]
		switch {
		case !ok:
			return &provider.PermanentError{Message: fmt.Sprintf("%s does not take a %s input", m.ID, in.Role)}
		case n[in.Role] > most:
			return &provider.PermanentError{Message: fmt.Sprintf("%s takes at most %d %s input(s)", m.ID, most, in.Role)}
		case in.Role == provider.RoleMask && req.InputImage == nil:
			return &provider.PermanentError{Message: "a mask needs an image to edit"}
		}
	}
	return nil
}

// Find implements provider.Provider.
func (p *Provider) Find(ctx context.Context, idempotencyKey string) (provider.Job, bool, error) {
	if idempotencyKey == "" {
		return provider.Job{}, false, nil
	}
	id := newJobID(idempotencyKey)
	_, err := p.load(id)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		return provider.Job{}, false, nil
	case err != nil:
		return provider.Job{}, false, err
	}
	return provider.Job{ID: id}, true, nil
}

// JobCount is how many jobs this Dir has ever held, counted on disk.
func (p *Provider) JobCount() int {
	entries, err := os.ReadDir(filepath.Join(p.dir, "jobs"))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			n++
		}
	}
	return n
}

// Status implements provider.Provider.
func (p *Provider) Status(ctx context.Context, job provider.Job) (provider.Status, error) {
	defer p.lock(job.ID)()
	r, err := p.load(job.ID)
	if err != nil {
		return provider.Status{}, err
	}
	return p.observe(ctx, r, p.now())
}

// Cancel implements provider.Provider: a queued or running job ends
// cancelled; a terminal one is reported unchanged.
func (p *Provider) Cancel(ctx context.Context, job provider.Job) (provider.Status, error) {
	defer p.lock(job.ID)()
	r, err := p.load(job.ID)
	if err != nil {
		return provider.Status{}, err
	}
	now := p.now()
	if !r.status(now).State.Terminal() {
		r.Final, r.CancelledAt = provider.StateCancelled, now.UTC()
		if err := p.save(r, false); err != nil {
			return provider.Status{}, err
		}
	}
	return p.observe(ctx, r, now)
}

// observe reports r at now, persisting a terminal state the first time it
// is seen and rendering the output of a completed job. The caller holds the
// job's lock.
func (p *Provider) observe(ctx context.Context, r *record, now time.Time) (provider.Status, error) {
	st := r.status(now)
	switch {
	case st.State == provider.StateCompleted:
		if err := p.ensureOutput(ctx, r); err != nil {
			return provider.Status{}, err
		}
		for n, o := range r.outputs() {
			st.Outputs = append(st.Outputs, provider.Output{URL: outputURL(r.ID, n), MimeType: o.Mime})
		}
	case st.State.Terminal() && r.Final == "":
		r.Final = st.State
		if err := p.save(r, false); err != nil {
			return provider.Status{}, err
		}
	}
	return st, nil
}

// ensureOutput renders a completed job's outputs unless they are on disk.
// Rendering is deterministic, so a second render after a crash (or by
// another process) writes the same bytes.
func (p *Provider) ensureOutput(ctx context.Context, r *record) error {
	if r.Final == provider.StateCompleted && len(r.outputs()) == r.count() {
		have := true
		for _, o := range r.outputs() {
			if _, err := os.Stat(filepath.Join(p.outputDir(r.ID), o.Name)); err != nil {
				have = false
			}
		}
		if have {
			return nil
		}
	}
	s, err := p.spec(r)
	if err != nil {
		return err
	}
	dir := p.outputDir(r.ID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	outs := make([]outputFile, r.count())
	for n := range outs {
		// Output n is the same request with seed+n: each differs, and
		// output 0 is what a single-output job makes.
		sn := s
		sn.seed, sn.index = s.seed+int64(n), n
		if outs[n].Name, outs[n].Mime, err = render(ctx, sn, dir, p.ffmpeg); err != nil {
			return fmt.Errorf("local: render job %s output %d: %w", r.ID, n, err)
		}
	}
	r.Output, r.OutputMime, r.More = outs[0].Name, outs[0].Mime, outs[1:]
	if len(r.More) == 0 {
		r.More = nil
	}
	r.Final = provider.StateCompleted
	return p.save(r, false)
}

func (p *Provider) spec(r *record) (spec, error) {
	s := spec{model: r.Model, prompt: r.Prompt, negative: r.NegativePrompt,
		ratio: r.AspectRatio, seed: r.Seed, duration: r.Duration}
	for _, e := range r.Extras {
		s.extras = append(s.extras, specInput{role: e.Role, path: p.inputPath(e.File), sum: e.Sum})
	}
	if r.Input == "" {
		return s, nil
	}
	var err error
	s.input, err = os.ReadFile(p.inputPath(r.Input))
	return s, err
}

func outputURL(id string, index int) string { return fmt.Sprintf("local:%s/%d", id, index) }

// outputIndex parses outputURL(id, n); n is canonical (no sign, no
// leading zero) so each output has one URL.
func outputIndex(id, url string) (int, bool) {
	rest, ok := strings.CutPrefix(url, "local:"+id+"/")
	n, err := strconv.Atoi(rest)
	if !ok || err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// OpenOutput implements provider.Provider for the "local:<job>/<index>"
// URLs of a completed job.
func (p *Provider) OpenOutput(ctx context.Context, job provider.Job, out provider.Output) (io.ReadCloser, error) {
	n, ok := outputIndex(job.ID, out.URL)
	if !ok {
		return nil, fmt.Errorf("local: %q is not an output of job %s: %w", out.URL, job.ID, provider.ErrNotFound)
	}
	unlock := p.lock(job.ID)
	r, err := p.load(job.ID)
	var st provider.Status
	if err == nil {
		st, err = p.observe(ctx, r, p.now())
	}
	unlock()
	if err != nil {
		return nil, err
	}
	if st.State != provider.StateCompleted {
		return nil, fmt.Errorf("local: job %s is %s, it has no output yet", job.ID, st.State)
	}
	outs := r.outputs()
	if n >= len(outs) {
		return nil, fmt.Errorf("local: job %s has no output %d: %w", job.ID, n, provider.ErrNotFound)
	}
	// The file is only ever replaced by rename, so it is safe to read
	// without the lock.
	return os.Open(filepath.Join(p.outputDir(job.ID), outs[n].Name))
}
