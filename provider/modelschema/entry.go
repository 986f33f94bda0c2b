package modelschema

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

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
	// Version is the Replicate version the document belongs to.
	Version string `json:"version,omitempty"`
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

// Quote prices one call: the credits charged for it and the unit the
// price is stated in. A per-image price is one image's (the count
// multiplies it), a per-second price is for the model's default duration
// (seconds), a per-megapixel price is for one megapixel.
func (p Pricing) Quote(kind provider.Kind, price *Price, seconds int) (credits int64, unit string) {
	if price == nil || price.USD <= 0 || p.CreditsPerUSD <= 0 {
		return p.Default[kind], UnitRun
	}
	units := 1.0
	switch u := strings.ToLower(price.Unit); {
	case strings.Contains(u, "second"):
		unit = UnitSecond
		units = float64(max(seconds, 1))
	case strings.Contains(u, "megapixel"):
		unit = UnitMegapixel
	case strings.Contains(u, "image"):
		unit = UnitImage
	default:
		unit = UnitRun
	}
	return max(int64(math.Ceil(price.USD*p.CreditsPerUSD*units)), 1), unit
}

// Field names darkroom maps its own arguments onto, in preference order.
var (
	promptFields     = []string{"prompt", "text_prompt", "text"}
	negativeFields   = []string{"negative_prompt"}
	aspectFields     = []string{"aspect_ratio"}
	seedFields       = []string{"seed"}
	countFields      = []string{"num_outputs", "num_images", "number_of_images"}
	durationFields   = []string{"duration", "duration_seconds", "seconds"}
	imageFields      = []string{"image", "input_image", "image_url", "start_image", "start_image_url", "first_frame_image", "init_image"}
	maskFields       = []string{"mask", "mask_url", "mask_image", "mask_image_url"}
	lastFrameFields  = []string{"end_image", "end_image_url", "last_frame_image", "last_image", "tail_image_url"}
	referenceFields  = []string{"reference_images", "reference_image_urls", "image_urls", "input_images"}
	falImageSizeEnum = map[string]string{"1:1": "square_hd", "16:9": "landscape_16_9", "9:16": "portrait_16_9", "4:3": "landscape_4_3", "3:4": "portrait_4_3"}
)

// Entry derives the catalog entry of a qualified model from its schema:
// the field map by the field names above (prompt → "prompt", aspect ratio
// → "aspect_ratio" with its enum, seed → "seed", count → "num_outputs" or
// "num_images" with its maximum, the main image → the first URI field
// named like image/input_image/image_url/start_image), the kind (the
// output schema's files, then the provider's metadata, then "image"), and
// the price (Pricing.Quote).
func Entry(ref Ref, info Info, s *Schema, pricing Pricing) (catalog.Entry, error) {
	e := catalog.Entry{
		ID: ref.ID(), Provider: ref.Provider, Title: info.Title, Description: info.Description,
		Endpoint: ref.Path,
	}
	if e.Title == "" {
		e.Title = ref.Path
	}
	if ref.Provider == "replicate" && info.Version != "" {
		e.Version = ref.Path + ":" + info.Version
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
	if f, ok := s.Field(s.first(countFields, "integer")); ok {
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
	if ref.Provider == "fal" && e.Output.Path == "" {
		e.Output.Path = map[provider.Kind]string{provider.KindImage: "images[*]", provider.KindVideo: "video"}[e.Kind]
	}
	e.ExpectedSeconds = 15
	if e.Kind == provider.KindVideo {
		e.ExpectedSeconds = 180
	}
	e.Credits, _ = pricing.Quote(e.Kind, info.Price, seconds)
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
