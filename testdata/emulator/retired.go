package emulator

// The vendor model ids that no longer answer, so the emulator refuses them
// as the vendor does instead of certifying calls that would fail for real.
// A retirement recorded here fails the catalog's test until the curated
// entries move on (provider/catalog's TestNoRetiredModels).

// retiredOpenAI is OpenAI's image models past their shutdown, with the date.
// Sources, checked 2026-12-07: openai-go v3.105.0 image.go (ImageModel
// constants: gpt-image-1 "shut down on October 23, 2026", dall-e-2 and
// dall-e-3 "retired on May 12, 2026"); gpt-image-1-mini, gpt-image-1.5 and
// chatgpt-image-latest shut down 2026-12-01 per OpenAI's deprecations page
// (platform.openai.com/docs/deprecations, as quoted 2026-12-07; the SDK
// still lists them).
var retiredOpenAI = map[string]string{
	"gpt-image-1":          "2026-10-23",
	"gpt-image-1-mini":     "2026-12-01",
	"gpt-image-1.5":        "2026-12-01",
	"chatgpt-image-latest": "2026-12-01",
	"dall-e-2":             "2026-05-12",
	"dall-e-3":             "2026-05-12",
}

// Retired reports whether the emulator refuses provider's model id as
// retired ("openai", "google" for the Gemini API or "vertex" for Vertex
// AI, and the vendor's model name, as sent on the wire).
func Retired(provider, model string) bool {
	switch provider {
	case "openai":
		_, ok := retiredOpenAI[model]
		return ok
	case "google":
		_, ok := retiredGoogle[model]
		return ok
	case "vertex":
		_, ok := retiredVertex[model]
		return ok
	}
	return false
}

// openaiRetiredMessage is OpenAI's text for a model it has shut down
// (HTTP 404, invalid_request_error, code model_not_found; the body's
// shape is held to the SDK's openai.Error by provider/openai's
// TestSDKTypesAgree). Only "The model `<id>` has been deprecated" is
// quoted from the vendor; the link after it is OpenAI's usual wording,
// not confirmed by a live call.
func openaiRetiredMessage(model string) string {
	return "The model `" + model + "` has been deprecated, learn more here: https://platform.openai.com/docs/deprecations"
}

// retiredGoogle is the Gemini API's media models past their shutdown,
// with the date. Sources, checked 2026-12-07: the Gemini API changelog
// entry of 2026-06-15 (Veo 2 and 3.0 shut down 2026-06-30; Imagen 4 shut
// down 2026-08-17); the Gemini deprecations page
// (ai.google.dev/gemini-api/docs/deprecations: gemini-2.5-flash-image
// 2026-10-02, the Veo 3.1 previews 2026-10-22 with gemini-omni-1.1-flash
// as their replacement, the Gemini 3 image previews 2026-06-25);
// gemini-omni-flash-preview, an alias until 2026-09-30. go-genai v1.79.1
// still lists some of them (interactions.Model), so the SDK alone does
// not say what is served.
var retiredGoogle = map[string]string{
	"veo-2.0-generate-001":           "2026-06-30",
	"veo-3.0-generate-001":           "2026-06-30",
	"veo-3.0-fast-generate-001":      "2026-06-30",
	"veo-3.1-generate-preview":       "2026-10-22",
	"veo-3.1-fast-generate-preview":  "2026-10-22",
	"veo-3.1-lite-generate-preview":  "2026-10-22",
	"imagen-4.0-generate-001":        "2026-08-17",
	"imagen-4.0-fast-generate-001":   "2026-08-17",
	"imagen-4.0-ultra-generate-001":  "2026-08-17",
	"gemini-2.5-flash-image":         "2026-10-02",
	"gemini-3-pro-image-preview":     "2026-06-25",
	"gemini-3.1-flash-image-preview": "2026-06-25",
	"gemini-omni-flash-preview":      "2026-09-30",
}

// retiredVertex is Vertex AI's Veo models past their retirement: Vertex's
// Veo 3 model card (docs.cloud.google.com, generative AI models, Veo 3,
// read 2026-12-07 as quoted in the project's vendor review): "Retirement
// date: June 30, 2026" for both 3.0 ids, migrate to veo-3.1-*-001.
var retiredVertex = map[string]string{
	"veo-3.0-generate-001":      "2026-06-30",
	"veo-3.0-fast-generate-001": "2026-06-30",
}
