package modelschema

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
)

// Info is what a provider publishes about one model: the document its
// schema comes from, and the metadata darkroom reads beside it.
type Info struct {
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Format      Format `json:"format"`
	// Doc is the provider's OpenAPI document (bounded: MaxSchemaBytes).
	Doc json.RawMessage `json:"doc"`
	// Version is the model version the document belongs to, for a
	// provider that versions its models (Replicate).
	Version string `json:"version,omitempty"`
	// Official is Replicate's is_official: an official model is run
	// through its model endpoint and refuses a version (Replicate's
	// OpenAPI document, predictions.create "version"). nil in an Info
	// stored before darkroom read it (its Dialect's Stale).
	Official *bool `json:"official,omitempty"`
	// Kind is what the provider's metadata says the model makes (fal's
	// category, the file type of Replicate's default example), if it says.
	Kind provider.Kind `json:"kind,omitempty"`
	// Price is the provider's published price, if it publishes one.
	Price *Price `json:"price,omitempty"`
}

// Price is a provider's unit price.
type Price struct {
	USD  float64 `json:"usd"`
	Unit string  `json:"unit"` // the provider's word: "image", "video_second", "megapixel", ...
}

// Price units darkroom states (provider.Model.PriceUnit).
const (
	UnitRun       = "run"
	UnitImage     = "image"
	UnitSecond    = "second"
	UnitMegapixel = "megapixel"
)

// Pricing turns a provider's price into credits.
type Pricing struct {
	// CreditsPerUSD converts a published price (DARKROOM_CREDITS_PER_USD).
	CreditsPerUSD float64
	// Default is the price per run of a model whose provider publishes
	// none, per kind (DARKROOM_DEFAULT_CREDITS).
	Default map[provider.Kind]int64
}

// DefaultPricing is 100 credits per US dollar, 10 credits an image run and
// 300 a video run.
var DefaultPricing = Pricing{CreditsPerUSD: 100, Default: map[provider.Kind]int64{provider.KindImage: 10, provider.KindVideo: 300}}

// Bounds on prices, so a published price can neither wrap credits nor be
// guessed at: a model priced outside them is not run (Entry says why).
const (
	// MaxUnitUSD is the highest unit price darkroom believes (a run,
	// image, second or megapixel); no real one comes near it.
	MaxUnitUSD = 1000
	// MaxCredits bounds one output's credits: credits × count then fits an
	// int64 for any count up to 2^23 (a model makes at most 16).
	MaxCredits int64 = 1 << 40
)

// Check refuses a published price darkroom cannot charge by: negative,
// not a number, infinite or above MaxUnitUSD. No price (nil) and a zero
// one pass: darkroom then charges its default.
func (p *Price) Check() error {
	if p == nil || p.USD == 0 {
		return nil
	}
	if !(p.USD > 0 && p.USD <= MaxUnitUSD) { // NaN fails both
		return fmt.Errorf("its published price (%g USD per %s) is not one darkroom charges by (above 0 and at most %d USD a unit)", p.USD, clip(p.Unit, 40), MaxUnitUSD)
	}
	return nil
}

// published reports whether a quote uses the provider's price (else the
// default per kind).
func (p Pricing) published(price *Price) bool {
	return price != nil && price.USD > 0 && p.CreditsPerUSD > 0
}

// unit is what a quote's credits are the price of.
func (p Pricing) unit(price *Price) string {
	if !p.published(price) {
		return UnitRun
	}
	switch u := strings.ToLower(price.Unit); {
	case strings.Contains(u, "second"):
		return UnitSecond
	case strings.Contains(u, "megapixel"):
		return UnitMegapixel
	case strings.Contains(u, "image"):
		return UnitImage
	}
	return UnitRun
}

// Quote prices one call: the credits charged for it and the unit the
// price is stated in. A per-image price is one image's (the count
// multiplies it), a per-second price is for the model's default duration
// (seconds), a per-megapixel price is for one megapixel. A price Check
// refuses, or credits above MaxCredits, is an error: the arithmetic is
// done in float64 and checked before it becomes an int64.
func (p Pricing) Quote(kind provider.Kind, price *Price, seconds int) (credits int64, unit string, err error) {
	if err := price.Check(); err != nil {
		return 0, "", err
	}
	unit = p.unit(price)
	c := float64(p.Default[kind])
	if p.published(price) {
		units := 1.0
		if unit == UnitSecond {
			units = float64(max(seconds, 1))
		}
		c = math.Max(math.Ceil(price.USD*p.CreditsPerUSD*units), 1)
	}
	if !(c <= float64(MaxCredits)) { // NaN fails too
		return 0, "", fmt.Errorf("one output would cost %.3g credits; darkroom charges at most %d", c, MaxCredits)
	}
	return int64(c), unit, nil
}

// Field names darkroom maps its own arguments onto, in preference order.
var (
	promptFields     = []string{"prompt", "text_prompt", "text"}
	negativeFields   = []string{"negative_prompt"}
	aspectFields     = []string{"aspect_ratio"}
	seedFields       = []string{"seed"}
	durationFields   = []string{"duration", "duration_seconds", "seconds"}
	imageFields      = []string{"image", "input_image", "image_url", "start_image", "start_image_url", "first_frame_image", "init_image"}
	maskFields       = []string{"mask", "mask_url", "mask_image", "mask_image_url"}
	lastFrameFields  = []string{"end_image", "end_image_url", "last_frame_image", "last_image", "tail_image_url"}
	referenceFields  = []string{"reference_images", "reference_image_urls", "image_urls", "input_images"}
	falImageSizeEnum = map[string]string{"1:1": "square_hd", "16:9": "landscape_16_9", "9:16": "portrait_16_9", "4:3": "landscape_4_3", "3:4": "portrait_4_3"}
)

// countFields are the names models give the number of outputs one call
// makes, folded (fold), in the order darkroom prefers one to map count
// onto. Every one a schema has is darkroom's: count is the only way to
// ask for several outputs, since it is what a generation is charged for.
var countFields = []string{"numoutputs", "numimages", "numberofimages", "numberofoutputs", "numsamples", "samples", "nsamples",
	"samplecount", "batchsize", "batchcount", "numvideos", "numberofvideos", "numgenerations", "numimagesperprompt", "imagecount",
	"outputcount", "n", "niter"}

// fold lower-cases a field name and drops its separators, so that
// num_outputs, numOutputs and Num-Outputs are one name.
func fold(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == ' ' {
			return -1
		}
		return unicode.ToLower(r)
	}, name)
}

// countField is the count field darkroom maps count onto: the first of
// countFields the schema has as an integer.
func (s *Schema) countField() (Field, bool) {
	for _, c := range countFields {
		for _, f := range s.Fields {
			if fold(f.Name) == c && (f.Type == "" || f.Type == "integer") {
				return f, true
			}
		}
	}
	return Field{}, false
}

// imageWords are the words of a name that speaks of an image; with a
// URI they make a field an image field (imageField).
var imageWords = []string{"image", "img", "mask", "frame", "photo", "picture", "reference", "control", "sketch"}

// imageField reports whether a field carries an image, as a URL or data
// URI: one of the names darkroom maps an input image or role onto, or a
// string (or list of strings) with no enum whose name speaks of an image
// (imageWord) and that is a URI (format uri, or a name ending in url,
// urls or uri). Images reach a model only through inputImage and inputs,
// which darkroom checks and stores, so input sets none.
func imageField(f Field) bool {
	n := strings.ToLower(f.Name)
	if slices.Contains(imageFields, n) || slices.Contains(maskFields, n) || slices.Contains(lastFrameFields, n) || slices.Contains(referenceFields, n) {
		return true
	}
	if len(f.Enum) > 0 || !slices.ContainsFunc(imageWords, func(w string) bool { return strings.Contains(n, w) }) {
		return false
	}
	switch f.Type {
	case "", "string":
		if uriFormat(f.Format) {
			return true
		}
	case "array":
		if f.Items != "" && !strings.HasPrefix(f.Items, "string") {
			return false
		}
		if _, fm, ok := strings.Cut(f.Items, "("); ok && uriFormat(strings.TrimSuffix(fm, ")")) {
			return true
		}
	default:
		return false
	}
	return strings.HasSuffix(n, "url") || strings.HasSuffix(n, "urls") || strings.HasSuffix(n, "uri")
}

func uriFormat(f string) bool {
	switch f {
	case "uri", "uri-reference", "iri", "iri-reference", "data-url", "binary":
		return true
	}
	return false
}

// Entry derives the catalog entry of a qualified model from its schema:
// the field map by the field names above (prompt → "prompt", aspect ratio
// → "aspect_ratio" with its enum, seed → "seed", count → the first of
// countFields with its maximum, the main image → the first URI field
// named like image/input_image/image_url/start_image), the kind (the
// output schema's files, then the provider's metadata, then "image"), and
// the price (Pricing.Quote); then the provider's own rules (d's
// EntryHints; d nil: none).
func Entry(ref Ref, info Info, s *Schema, pricing Pricing, d Dialect) (catalog.Entry, error) {
	e := catalog.Entry{
		ID: ref.ID(), Provider: ref.Provider, Title: info.Title, Description: info.Description,
		Endpoint: ref.Path,
	}
	if e.Title == "" {
		e.Title = ref.Path
	}
	e.Kind = s.OutputKind
	if e.Kind == "" {
		e.Kind = info.Kind
	}
	if e.Kind == "" {
		e.Kind = provider.KindImage
	}
	e.Input.Prompt = s.first(promptFields, "string")
	if e.Input.Prompt == "" {
		return catalog.Entry{}, fmt.Errorf("%s has no prompt field darkroom can fill (it looks for %s)", ref.ID(), strings.Join(promptFields, ", "))
	}
	e.Input.NegativePrompt = s.first(negativeFields, "string")
	e.Input.Seed = s.first(seedFields, "integer")
	if f, ok := s.countField(); ok {
		e.Input.Count = f.Name
		e.MaxCount = 4
		if f.Maximum != nil && *f.Maximum >= 1 {
			e.MaxCount = int(min(*f.Maximum, 16))
		}
	}
	if f, ok := s.Field(s.first(aspectFields, "")); ok {
		for _, v := range f.Enum {
			if r, ok := v.(string); ok && strings.Contains(r, ":") {
				e.AspectRatios = append(e.AspectRatios, r)
			}
		}
		if len(e.AspectRatios) > 0 || len(f.Enum) == 0 {
			e.Input.AspectRatio = f.Name
		}
	} else if f, ok := s.Field("image_size"); ok && len(f.Enum) > 0 {
		e.Input.AspectRatio = f.Name
		e.Input.AspectRatioValues = map[string]any{}
		for _, r := range []string{"1:1", "16:9", "9:16", "4:3", "3:4"} {
			if slices.Contains(f.Enum, any(falImageSizeEnum[r])) {
				e.AspectRatios = append(e.AspectRatios, r)
				e.Input.AspectRatioValues[r] = falImageSizeEnum[r]
			}
		}
		if len(e.AspectRatios) == 0 {
			e.Input.AspectRatio, e.Input.AspectRatioValues = "", nil
		}
	}
	seconds := 5
	if e.Kind == provider.KindVideo {
		if f, ok := s.Field(s.first(durationFields, "")); ok {
			e.Input.Duration = f.Name
			for _, v := range f.Enum {
				if n, format, ok := parseSeconds(v); ok {
					e.Durations = append(e.Durations, n)
					e.Input.DurationFormat = format
				}
			}
			if n, _, ok := parseSeconds(f.Default); ok {
				seconds = n
			} else if len(e.Durations) > 0 {
				seconds = e.Durations[0]
			}
			if len(e.Durations) > 0 && e.Durations[0] != seconds && slices.Contains(e.Durations, seconds) {
				// darkroom's default duration is the first offered: the schema's default.
				e.Durations = append([]int{seconds}, slices.DeleteFunc(e.Durations, func(n int) bool { return n == seconds })...)
			}
			if f.Type == "string" && e.Input.DurationFormat == "" {
				e.Input.DurationFormat = "string"
			}
		}
	}
	if f, ok := s.Field(s.first(imageFields, "string")); ok {
		e.Input.InputImage = f.Name
		e.NeedsInputImage = f.Required && f.Default == nil
	}
	roles := map[string]catalog.Role{}
	if n := s.first(maskFields, "string"); n != "" {
		roles[provider.RoleMask] = catalog.Role{Field: n}
	}
	if n := s.first(lastFrameFields, "string"); n != "" && e.Kind == provider.KindVideo {
		roles[provider.RoleLastFrame] = catalog.Role{Field: n}
	}
	if f, ok := s.Field(s.first(referenceFields, "array")); ok && f.Name != e.Input.InputImage {
		roles[provider.RoleReference] = catalog.Role{Field: f.Name, List: true, Max: 4}
	}
	if len(roles) > 0 {
		e.Roles = roles
	}
	e.Output.Path = s.OutputPath
	if d != nil {
		d.EntryHints(&e, ref, info)
	}
	e.ExpectedSeconds = 15
	if e.Kind == provider.KindVideo {
		e.ExpectedSeconds = 180
	}
	credits, _, err := pricing.Quote(e.Kind, info.Price, seconds)
	if err != nil {
		return catalog.Entry{}, fmt.Errorf("%s is not run: %w", ref.ID(), err)
	}
	e.Credits = credits
	return e, nil
}

// first is the first of names the schema has (of type typ, when given).
func (s *Schema) first(names []string, typ string) string {
	for _, n := range names {
		if f, ok := s.Field(n); ok && (typ == "" || f.Type == "" || f.Type == typ) {
			return n
		}
	}
	return ""
}

// parseSeconds reads a duration enum value: 5, "5" or "5s".
func parseSeconds(v any) (int, string, bool) {
	switch t := v.(type) {
	case float64:
		if t > 0 && t == math.Trunc(t) {
			return int(t), "int", true
		}
	case string:
		format := "string"
		if s, ok := strings.CutSuffix(t, "s"); ok {
			t, format = s, "seconds"
		}
		if n, err := strconv.Atoi(t); err == nil && n > 0 {
			return n, format, true
		}
	}
	return 0, "", false
}

// Owned maps each field a caller's input may not set to the argument of
// generate that sets it instead: the entry's own fields (Owned), and every
// count and image field of the schema, mapped or not (countFields,
// imageField). Built once with the model; callers only read it.
func (m *Model) Owned() map[string]string {
	if m.owned == nil { // a Model not built by the Registry
		return owned(m.Entry, m.Schema)
	}
	return m.owned
}

func owned(e catalog.Entry, s *Schema) map[string]string {
	o := Owned(e)
	if s == nil {
		return o
	}
	for _, f := range s.Fields {
		if _, ok := o[f.Name]; ok {
			continue
		}
		switch {
		case slices.Contains(countFields, fold(f.Name)):
			o[f.Name] = "count (the only way to ask for several outputs)"
		case imageField(f):
			o[f.Name] = "inputImage or inputs (images reach a model only through them, or upload_input)"
		}
	}
	return o
}

// Owned maps the fields an entry's own arguments set to those arguments:
// a caller's input may not set them too.
func Owned(e catalog.Entry) map[string]string {
	o := map[string]string{}
	add := func(field, arg string) {
		if field != "" {
			o[field] = arg
		}
	}
	add(e.Input.Prompt, "prompt")
	add(e.Input.NegativePrompt, "negativePrompt")
	add(e.Input.AspectRatio, "aspectRatio")
	add(e.Input.Seed, "seed")
	add(e.Input.Duration, "durationSeconds")
	add(e.Input.Count, "count")
	add(e.Input.InputImage, "inputImage (or inputs)")
	for role, r := range e.Roles {
		add(r.Field, "inputs (role "+role+")")
	}
	return o
}
