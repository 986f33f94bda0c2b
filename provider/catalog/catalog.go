// Package catalog holds the remote providers' model catalog (Replicate,
// fal, Google's Gemini API, OpenAI's image API) as data: an
// embedded default (models.json) and an optional override file
// (DARKROOM_MODELS_FILE, read with Load). Each entry says how darkroom's
// request maps onto the provider's input fields and where the output URLs
// are in the provider's result.
package catalog

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/provider"
)

//go:embed models.json
var defaultJSON []byte

// Entry is one model.
type Entry struct {
	// ID is darkroom's model id, unique across providers.
	ID string `json:"modelId"`
	// Provider names the adapter that runs it; the adapter checks what it
	// asks of its entries (CheckEntries).
	Provider    string        `json:"provider"`
	Kind        provider.Kind `json:"kind"`
	Title       string        `json:"title"`
	Description string        `json:"description"`
	Credits     int64         `json:"credits"`
	// ExpectedSeconds is the typical time from submit to completion.
	ExpectedSeconds float64  `json:"expectedSeconds"`
	AspectRatios    []string `json:"aspectRatios"`
	Durations       []int    `json:"durations,omitempty"`
	NeedsInputImage bool     `json:"needsInputImage,omitempty"`
	// Endpoint is the provider's model path: Replicate "owner/name"
	// (official model endpoint), fal "owner/app[/subpath]", Google and
	// OpenAI the model name ("gemini-omni-1.2-flash", "gpt-image-2").
	Endpoint string `json:"endpoint"`
	// Targets are the vendor models the id runs instead of Endpoint, in
	// order, when its vendor no longer lists Endpoint: the same model
	// under another name (a dated snapshot), at the same price. The id is
	// a stable alias: it runs the first one listed (Set.Retarget).
	Targets []string `json:"targets,omitempty"`
	// Successor is the darkroom model id to use instead when this one's
	// vendor lists none of its vendor models (describe_model and the
	// refusal name it).
	Successor string `json:"successor,omitempty"`
	// API is the vendor method a google or openai model is called by:
	// google "gemini" (generateContent) or "interactions" (a background
	// interaction, for video) on the Gemini API, "veo" (predictLongRunning)
	// on Vertex AI; openai "images" (generations, or edits when an
	// input image comes).
	API string `json:"api,omitempty"`
	// Version pins a Replicate version ("hash" or "owner/name:hash"); set,
	// it is sent to POST /v1/predictions instead of the model endpoint.
	Version string `json:"version,omitempty"`
	// Input maps darkroom's request onto the provider's input object.
	Input InputMap `json:"input"`
	// Defaults are fixed input fields sent with every request.
	Defaults map[string]any `json:"defaults,omitempty"`
	// Output says where the result's files are.
	Output OutputMap `json:"output"`
	// MaxCount is the most outputs one call may ask for (0 means 1); the
	// count goes to Input.Count.
	MaxCount int `json:"maxCount,omitempty"`
	// Roles are the input roles the model takes besides its main input
	// image (Input.InputImage): "mask", "reference", "last_frame".
	Roles map[string]Role `json:"roles,omitempty"`
	// Disabled removes the model (in an override file).
	Disabled bool `json:"disabled,omitempty"`
	// Source says where the entry's vendor id, price and limits came from
	// (an SDK file and version, a vendor page), and Checked the day they
	// were last checked against it (YYYY-MM-DD): a vendor retires models,
	// and a reader must be able to tell how stale an entry may be.
	Source  string `json:"source,omitempty"`
	Checked string `json:"checked,omitempty"`
}

// InputMap names the provider's input fields; an empty name means the
// model has no such input.
type InputMap struct {
	Prompt         string `json:"prompt"`
	NegativePrompt string `json:"negativePrompt,omitempty"`
	AspectRatio    string `json:"aspectRatio,omitempty"`
	// AspectRatioValues translates darkroom's "16:9" into the provider's
	// value (fal's image_size "landscape_16_9"); nil sends the ratio as is.
	AspectRatioValues map[string]any `json:"aspectRatioValues,omitempty"`
	Duration          string         `json:"duration,omitempty"`
	// DurationFormat: "int" (5, default), "string" ("5") or "seconds"
	// ("5s").
	DurationFormat string `json:"durationFormat,omitempty"`
	Seed           string `json:"seed,omitempty"`
	InputImage     string `json:"inputImage,omitempty"`
	// Count is the provider's field for how many outputs to make
	// (Replicate "num_outputs", fal "num_images").
	Count string `json:"count,omitempty"`
}

// Role is how one input role reaches the provider.
type Role struct {
	// Field is the provider's input field the file's URL goes in.
	Field string `json:"field"`
	// Max is how many files of the role one call may give (0 means 1);
	// more than one needs List.
	Max int `json:"max,omitempty"`
	// List: the field takes an array of URLs, not one URL.
	List bool `json:"list,omitempty"`
}

// OutputMap locates output files in the provider's result.
type OutputMap struct {
	// Path into the result (Replicate: the prediction's "output"; fal: the
	// response body): dot-separated keys, "[*]" for every array element,
	// "[n]" for one. "" is the root. The value found may be a URL string,
	// an object with "url" (and "content_type"), or arrays of those.
	Path string `json:"path"`
	// MimeType is the files' type when the result does not say.
	MimeType string `json:"mimeType,omitempty"`
	// SafetyPath, when set, points at booleans (or arrays of booleans)
	// that are true when the provider's safety checker blocked an output
	// (fal's has_nsfw_concepts).
	SafetyPath string `json:"safetyPath,omitempty"`
}

type file struct {
	Models []Entry `json:"models"`
}

// Default returns the embedded catalog.
func Default() []Entry {
	es, err := Parse(defaultJSON)
	if err != nil {
		panic("catalog: embedded models.json: " + err.Error())
	}
	return es
}

// Load reads a catalog file ({"models":[...]}, the models.json shape).
func Load(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	es, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("catalog: %s: %w", path, err)
	}
	return es, nil
}

// Parse decodes and validates a catalog. Disabled entries are kept (Merge
// uses them to remove defaults); ForProvider drops them.
func Parse(b []byte) ([]Entry, error) {
	var f file
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, e := range f.Models {
		if err := e.validate(); err != nil {
			return nil, fmt.Errorf("model %d (%q): %w", i, e.ID, err)
		}
		if seen[e.ID] {
			return nil, fmt.Errorf("model %q listed twice", e.ID)
		}
		seen[e.ID] = true
	}
	return f.Models, nil
}

func (e Entry) validate() error {
	if e.ID == "" {
		return errors.New("modelId is required")
	}
	if e.Disabled {
		return nil
	}
	if e.Successor == e.ID {
		return errors.New("successor is the model itself")
	}
	if _, err := time.Parse(time.DateOnly, e.Checked); e.Checked != "" && err != nil {
		return fmt.Errorf("checked %q is not a date (YYYY-MM-DD)", e.Checked)
	}
	if e.Provider == "" {
		return errors.New("provider is required")
	}
	if e.Kind != provider.KindImage && e.Kind != provider.KindVideo {
		return fmt.Errorf("kind %q is not image or video", e.Kind)
	}
	if e.Endpoint == "" && e.Version == "" {
		return errors.New("endpoint is required")
	}
	if e.Input.Prompt == "" {
		return errors.New("input.prompt is required")
	}
	if len(e.Targets) > 0 && e.Version != "" {
		return errors.New("targets go with an endpoint, not a pinned version")
	}
	if e.ExpectedSeconds <= 0 {
		return errors.New("expectedSeconds must be > 0")
	}
	if e.NeedsInputImage && e.Input.InputImage == "" {
		return errors.New("needsInputImage without input.inputImage")
	}
	switch e.Input.DurationFormat {
	case "", "int", "string", "seconds":
	default:
		return fmt.Errorf("durationFormat %q is not int, string or seconds", e.Input.DurationFormat)
	}
	if e.MaxCount > 1 && e.Input.Count == "" {
		return errors.New("maxCount > 1 without input.count")
	}
	for role, r := range e.Roles {
		switch role {
		case provider.RoleMask, provider.RoleReference, provider.RoleLastFrame:
		default:
			return fmt.Errorf("roles: %q is not mask, reference or last_frame (the main image is input.inputImage)", role)
		}
		if r.Max > 1 && !r.List && r.Field != "" {
			return fmt.Errorf("roles.%s: max %d needs list", role, r.Max)
		}
	}
	if _, err := splitPath(e.Output.Path); err != nil {
		return fmt.Errorf("output.path: %w", err)
	}
	if _, err := splitPath(e.Output.SafetyPath); err != nil {
		return fmt.Errorf("output.safetyPath: %w", err)
	}
	for _, r := range e.AspectRatios {
		if e.Input.AspectRatioValues != nil {
			if _, ok := e.Input.AspectRatioValues[r]; !ok {
				return fmt.Errorf("aspect ratio %q has no aspectRatioValues entry", r)
			}
		}
	}
	return nil
}

// CheckEntries checks the enabled entries of es against what their
// provider's adapter asks of them beyond the rules every entry follows
// (each adapter's CheckEntry: its API names, endpoint shapes, roles).
func CheckEntries(es []Entry, check func(Entry) error) error {
	for _, e := range es {
		if e.Disabled {
			continue
		}
		if err := check(e); err != nil {
			return fmt.Errorf("model %q (%s): %w", e.ID, e.Provider, err)
		}
	}
	return nil
}

// RoleFields is the rule of providers whose input takes each role's file
// as a URL in a named field: every role names its field.
func (e Entry) RoleFields() error {
	for role, r := range e.Roles {
		if r.Field == "" {
			return fmt.Errorf("roles.%s: field is required (the provider takes the file's URL in an input field)", role)
		}
	}
	return nil
}

// Merge applies override onto base: an entry with a known modelId
// replaces it (or removes it when disabled), new ones are appended.
func Merge(base, override []Entry) []Entry {
	out := slices.Clone(base)
	for _, o := range override {
		i := slices.IndexFunc(out, func(e Entry) bool { return e.ID == o.ID })
		switch {
		case i >= 0 && o.Disabled:
			out = slices.Delete(out, i, i+1)
		case i >= 0:
			out[i] = o
		case !o.Disabled:
			out = append(out, o)
		}
	}
	return out
}

// ForProvider returns the enabled entries of one provider.
func ForProvider(es []Entry, name string) []Entry {
	var out []Entry
	for _, e := range es {
		if e.Provider == name && !e.Disabled {
			out = append(out, e)
		}
	}
	return out
}

// Set is one provider's enabled entries, looked up by model id. Copies
// share one retargeting.
type Set struct {
	entries []Entry
	byID    map[string]Entry
	runs    *atomic.Pointer[map[string]string] // id → the target it runs now
}

// NewSet keeps the enabled entries of provider name.
func NewSet(es []Entry, name string) Set {
	s := Set{byID: map[string]Entry{}, runs: new(atomic.Pointer[map[string]string])}
	for _, e := range ForProvider(es, name) {
		s.entries = append(s.entries, e)
		s.byID[e.ID] = e
	}
	return s
}

// Entries lists the set in catalog order, each with the vendor model it
// runs now.
func (s Set) Entries() []Entry {
	out := slices.Clone(s.entries)
	for i := range out {
		out[i] = s.retargeted(out[i])
	}
	return out
}

// Get returns the entry for a model id, with the vendor model it runs now.
func (s Set) Get(id string) (Entry, bool) {
	e, ok := s.byID[id]
	return s.retargeted(e), ok
}

// Vendors lists every vendor model the set's entries may run (each
// Endpoint, or pinned Version, and its Targets), once each.
func (s Set) Vendors() []string {
	var out []string
	for _, e := range s.entries {
		for _, v := range e.Candidates() {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// Candidates are the vendor models e may run, in order: its Endpoint,
// then its Targets; a pinned Version alone, as "owner/name:version" where
// the endpoint names the model.
func (e Entry) Candidates() []string {
	switch {
	case e.Version == "":
		return append([]string{e.Endpoint}, e.Targets...)
	case e.Endpoint != "" && !strings.Contains(e.Version, ":"):
		return []string{e.Endpoint + ":" + e.Version}
	default:
		return []string{e.Version}
	}
}

// Retarget makes each id in runs run that target instead of its Endpoint
// (an id not in runs runs its Endpoint); a target the entry does not name
// is ignored.
func (s Set) Retarget(runs map[string]string) {
	m := map[string]string{}
	for id, t := range runs {
		if e, ok := s.byID[id]; ok && slices.Contains(e.Targets, t) {
			m[id] = t
		}
	}
	s.runs.Store(&m)
}

func (s Set) retargeted(e Entry) Entry {
	if s.runs == nil {
		return e
	}
	if m := s.runs.Load(); m != nil {
		if t, ok := (*m)[e.ID]; ok {
			e.Endpoint = t
		}
	}
	return e
}

// Models lists the set as darkroom's provider.Models.
func (s Set) Models() []provider.Model {
	out := make([]provider.Model, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, e.Model())
	}
	return out
}

// Expected is ExpectedSeconds as a duration.
func (e Entry) Expected() time.Duration {
	return time.Duration(e.ExpectedSeconds * float64(time.Second))
}

// Model is the entry as darkroom's provider.Model.
func (e Entry) Model() provider.Model {
	return provider.Model{
		ID: e.ID, Provider: e.Provider, Kind: e.Kind, Title: e.Title, Description: e.Description,
		Credits: e.Credits, AspectRatios: slices.Clone(e.AspectRatios), Durations: slices.Clone(e.Durations),
		NeedsInputImage: e.NeedsInputImage, AcceptsInputImage: e.Input.InputImage != "", ExpectedDuration: e.Expected(),
		MaxCount: e.MaxCount, Roles: e.roleCounts(), PriceUnit: "run",
	}
}

// roleCounts is how many inputs of each further role the model takes.
func (e Entry) roleCounts() map[string]int {
	if len(e.Roles) == 0 {
		return nil
	}
	out := make(map[string]int, len(e.Roles))
	for role, r := range e.Roles {
		out[role] = max(r.Max, 1)
	}
	return out
}

// DerivedSeed is the seed sent when a request has none: a hash of the
// idempotency key, 31 bits so every model's seed field accepts it. It
// makes the submission recognisable later (Replicate's Find) and the
// generation reproducible.
func DerivedSeed(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte("darkroom-seed\x00" + key))
	return int64(h.Sum64() & 0x7fffffff)
}

// BuildInput maps a request onto the provider's input object. Invalid
// requests (unknown ratio or duration, missing input image) return a
// *provider.PermanentError.
func (e Entry) BuildInput(req provider.Request) (map[string]any, error) {
	in := map[string]any{}
	for k, v := range e.Defaults {
		in[k] = v
	}
	for k, v := range req.Input { // validated against the schema; never a field darkroom maps
		in[k] = v
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return nil, &provider.PermanentError{Message: "a prompt is required"}
	}
	in[e.Input.Prompt] = req.Prompt
	if req.NegativePrompt != "" && e.Input.NegativePrompt != "" {
		in[e.Input.NegativePrompt] = req.NegativePrompt
	}
	if req.AspectRatio != "" && e.Input.AspectRatio != "" {
		if len(e.AspectRatios) > 0 && !slices.Contains(e.AspectRatios, req.AspectRatio) {
			return nil, &provider.PermanentError{Message: fmt.Sprintf("model %s does not offer aspect ratio %q (choose %s)", e.ID, req.AspectRatio, words.Or(e.AspectRatios))}
		}
		var v any = req.AspectRatio
		if e.Input.AspectRatioValues != nil {
			v = e.Input.AspectRatioValues[req.AspectRatio]
		}
		in[e.Input.AspectRatio] = v
	}
	if req.DurationSeconds > 0 && e.Input.Duration != "" {
		if len(e.Durations) > 0 && !slices.Contains(e.Durations, req.DurationSeconds) {
			return nil, &provider.PermanentError{Message: fmt.Sprintf("model %s does not offer a %d s duration (choose %s)", e.ID, req.DurationSeconds, words.Or(e.Durations))}
		}
		switch e.Input.DurationFormat {
		case "string":
			in[e.Input.Duration] = strconv.Itoa(req.DurationSeconds)
		case "seconds":
			in[e.Input.Duration] = strconv.Itoa(req.DurationSeconds) + "s"
		default:
			in[e.Input.Duration] = req.DurationSeconds
		}
	}
	if e.Input.Seed != "" {
		seed := req.Seed
		if seed == 0 {
			seed = DerivedSeed(req.IdempotencyKey)
		}
		in[e.Input.Seed] = seed
	}
	if req.InputImage != nil && req.InputImage.URL != "" {
		if e.Input.InputImage == "" {
			return nil, &provider.PermanentError{Message: fmt.Sprintf("model %s takes no input image", e.ID)}
		}
		in[e.Input.InputImage] = req.InputImage.URL
	} else if e.NeedsInputImage {
		return nil, &provider.PermanentError{Message: fmt.Sprintf("model %s needs an input image", e.ID)}
	}
	if err := e.roleInputs(in, req.Extra); err != nil {
		return nil, err
	}
	if req.Count > 1 {
		if req.Count > max(e.MaxCount, 1) || e.Input.Count == "" {
			return nil, &provider.PermanentError{Message: fmt.Sprintf("model %s makes at most %d outputs per call", e.ID, max(e.MaxCount, 1))}
		}
		in[e.Input.Count] = req.Count
	}
	return in, nil
}

// roleInputs puts each further input's URL in its role's field: one URL,
// or a list for a role that takes several. A role without a field is the
// provider's to send (Google and OpenAI inline the bytes).
func (e Entry) roleInputs(in map[string]any, extra []provider.Input) error {
	for _, x := range extra {
		r, ok := e.Roles[x.Role]
		if !ok {
			return &provider.PermanentError{Message: fmt.Sprintf("model %s takes no %s input", e.ID, x.Role)}
		}
		if r.Field == "" {
			continue
		}
		if !r.List {
			in[r.Field] = x.URL
			continue
		}
		list, _ := in[r.Field].([]any)
		in[r.Field] = append(list, x.URL)
	}
	return nil
}

// Outputs extracts the output files from a result value (decoded JSON).
func (e Entry) Outputs(v any) []provider.Output {
	return ExtractOutputs(v, e.Output.Path, e.Output.MimeType)
}

// Blocked reports whether the result flags an output as blocked by the
// provider's safety checker.
func (e Entry) Blocked(v any) bool {
	if e.Output.SafetyPath == "" {
		return false
	}
	segs, _ := splitPath(e.Output.SafetyPath)
	blocked := false
	walk(v, segs, func(x any) {
		if b, ok := x.(bool); ok && b {
			blocked = true
		}
	})
	return blocked
}

// ExtractOutputs finds output files at path in v (see OutputMap.Path).
func ExtractOutputs(v any, path, mime string) []provider.Output {
	segs, err := splitPath(path)
	if err != nil {
		return nil
	}
	var outs []provider.Output
	walk(v, segs, func(x any) {
		switch t := x.(type) {
		case string:
			if looksURL(t) {
				outs = append(outs, provider.Output{URL: t, MimeType: mime})
			}
		case map[string]any:
			u, _ := t["url"].(string)
			if !looksURL(u) {
				return
			}
			m := mime
			if ct, ok := t["content_type"].(string); ok && strings.Contains(ct, "/") {
				m = ct
			}
			outs = append(outs, provider.Output{URL: u, MimeType: m})
		}
	})
	return outs
}

func looksURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// seg is one path step: a key, every element ("[*]") or one index.
type seg struct {
	key   string
	index int // -1: every element; -2: not an index
}

func splitPath(p string) ([]seg, error) {
	var out []seg
	if p == "" {
		return nil, nil
	}
	for _, part := range strings.Split(p, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key != "" {
			out = append(out, seg{key: key, index: -2})
		}
		for rest != "" {
			inner, after, ok := strings.Cut(rest, "]")
			if !ok {
				return nil, fmt.Errorf("unclosed [ in %q", p)
			}
			if inner == "*" {
				out = append(out, seg{index: -1})
			} else {
				n, err := strconv.Atoi(inner)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("bad index %q in %q", inner, p)
				}
				out = append(out, seg{index: n})
			}
			rest = strings.TrimPrefix(after, "[")
			if after != "" && !strings.HasPrefix(after, "[") {
				return nil, fmt.Errorf("unexpected %q in %q", after, p)
			}
		}
		if key == "" && !strings.Contains(part, "[") {
			return nil, fmt.Errorf("empty key in %q", p)
		}
	}
	return out, nil
}

// walk visits the values at segs; at the end, arrays are flattened so a
// path to a list of URLs (or a single URL) works the same.
func walk(v any, segs []seg, visit func(any)) {
	if len(segs) == 0 {
		if arr, ok := v.([]any); ok {
			for _, x := range arr {
				walk(x, nil, visit)
			}
			return
		}
		visit(v)
		return
	}
	s := segs[0]
	switch {
	case s.index == -2:
		if m, ok := v.(map[string]any); ok {
			walk(m[s.key], segs[1:], visit)
		}
	case s.index == -1:
		if arr, ok := v.([]any); ok {
			for _, x := range arr {
				walk(x, segs[1:], visit)
			}
		}
	default:
		if arr, ok := v.([]any); ok && s.index < len(arr) {
			walk(arr[s.index], segs[1:], visit)
		}
	}
}
