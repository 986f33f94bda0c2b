package gentools

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
)

// Schemas are written out by hand: they are the contract models read, and
// every bound in them is also checked in the handler (or in generation)
// with a clear message. Each bound is one constant, used by both.

// MaxWaitSeconds is the most timeoutSeconds or waitSeconds may ask, and
// the most Config.MaxWait may be.
const MaxWaitSeconds = 300

// Argument bounds checked here; the request's own (prompt, negativePrompt,
// idempotencyKey, durationSeconds) are generation's.
const (
	maxIDChars     = 128 // generationId, in characters
	minWaitSeconds = 5
	defWaitSeconds = 50
	maxListLimit   = 100
	defListLimit   = 20
	// describe_model and search_models
	maxModelIDChars = 300
	maxQueryChars   = 200
	defSearchLimit  = 20
)

// bounds fills the schema placeholders with the constants.
var bounds = strings.NewReplacer(
	"MAX_ID", strconv.Itoa(maxIDChars),
	"MIN_WAIT", strconv.Itoa(minWaitSeconds),
	"MAX_WAIT", strconv.Itoa(MaxWaitSeconds),
	"DEF_WAIT", strconv.Itoa(defWaitSeconds),
	"MAX_LIMIT", strconv.Itoa(maxListLimit),
	"DEF_LIMIT", strconv.Itoa(defListLimit),
	"MAX_PROMPT", strconv.Itoa(generation.MaxPromptChars),
	"MAX_NEGATIVE", strconv.Itoa(generation.MaxNegativePromptChars),
	"MAX_KEY", strconv.Itoa(generation.MaxIdempotencyKeyChars),
	"MAX_DURATION", strconv.Itoa(generation.MaxDurationSeconds),
	"MAX_FILES", strconv.Itoa(generation.MaxInputs),
	"ROLES", `["image","mask","reference","first_frame","last_frame"]`,
	"MAX_MODEL_ID", strconv.Itoa(maxModelIDChars),
	"MAX_QUERY", strconv.Itoa(maxQueryChars),
	"MAX_SEARCH", strconv.Itoa(modelschema.MaxSearchLimit),
	"DEF_SEARCH", strconv.Itoa(defSearchLimit),
)

// Every byte here is read by the assistant on every turn it is connected
// (tools/list; TestToolsListSize holds the whole list to 12 KB): the
// descriptions say when to use each tool and argument, every bound
// stays, and output schemas name the top-level fields with their types
// (a result's JSON carries the rest, nested fields included).

const generationIDSchema = `{"type":"string","minLength":1,"maxLength":MAX_ID}`

const inputImageSchema = `{"type":"object","additionalProperties":false,"description":"{url} (http or https) or {data (base64), mimeType}; PNG, JPEG or WebP.",
 "properties":{"url":{"type":"string"},"data":{"type":"string"},"mimeType":{"type":"string","enum":["image/png","image/jpeg","image/webp"]}}}`

// generationProps are the fields of a generation (GenerationView) a
// model acts on; its JSON carries the others (modelId, kind, times,
// inputs, credits). The statuses are list_generations' status enum.
const generationProps = `"generationId":{"type":"string"},"status":{"type":"string"},
 "statusMessage":{"type":"string"},"progress":{"type":"number"},"outputs":{"type":"array"},"error":{"type":"object"},
 "uploadRequired":{"type":"boolean"},"timedOut":{"type":"boolean"}`

const generationSchema = `{"type":"object","properties":{` + generationProps + `},"required":["generationId","status"]}`

// generateOut is a generation, or a dry run's price and verdicts.
const generateOut = `{"type":"object","properties":{` + generationProps + `,
 "dryRun":{"type":"boolean"},"credits":{"type":"integer"},"budget":{"type":"object"},"approval":{"type":"object"}}}`

// raw is a schema with its bounds filled in.
func raw(s string) json.RawMessage { return json.RawMessage(bounds.Replace(s)) }

// generateInputSchema offers every aspect ratio some model supports (def
// fills its bounds).
func generateInputSchema(ratios []string) string {
	enum, _ := json.Marshal(ratios)
	return strings.NewReplacer("RATIOS", string(enum), "INPUT", inputImageSchema).Replace(`{"type":"object","properties":{
 "modelId":{"type":"string","description":"From list_models or search_models."},
 "prompt":{"type":"string","minLength":1,"maxLength":MAX_PROMPT},
 "aspectRatio":{"type":"string","enum":RATIOS,"default":"16:9","description":"One the model offers."},
 "negativePrompt":{"type":"string","maxLength":MAX_NEGATIVE},
 "seed":{"type":"integer","description":"Repeats a result where the model allows."},
 "durationSeconds":{"type":"integer","minimum":1,"maximum":MAX_DURATION,"description":"Video only: one of the model's durations."},
 "inputImage":{"type":"object","description":"The main image, as an inputs image (role image; first_frame for video)."},
 "inputs":{"type":"array","maxItems":MAX_FILES,"description":"Files by role, as the model's roles allow: image (to edit), mask (white where it may change; the image's size), reference, first_frame, last_frame. Each as uri (darkroom://generations/{id}/outputs/{n}: your output), image, or role alone to upload_input next.",
  "items":{"type":"object","additionalProperties":false,"required":["role"],"properties":{"role":{"type":"string","enum":ROLES},"uri":{"type":"string"},"image":INPUT}}},
 "count":{"type":"integer","minimum":1,"default":1,"description":"Outputs to make, up to the model's maxCount; each charged."},
 "dryRun":{"type":"boolean","description":"Price and check it; creates nothing."},
 "idempotencyKey":{"type":"string","maxLength":MAX_KEY,"description":"Same key, same generation: makes a retry safe."},
 "wait":{"type":"boolean","description":"Answer when done, up to waitSeconds."},
 "waitSeconds":{"type":"integer","minimum":MIN_WAIT,"maximum":MAX_WAIT,"default":DEF_WAIT},
 "confirmSpend":{"type":"boolean","description":"Approve a spend above your approval threshold."},
 "input":{"type":"object","description":"The model's own fields (describe_model), checked before any charge; not those generate's arguments set."}},
 "required":["modelId","prompt"],"additionalProperties":false}`)
}

const (
	emptyInput         = `{"type":"object","additionalProperties":false}`
	getInput           = `{"type":"object","additionalProperties":false,"properties":{"generationId":` + generationIDSchema + `},"required":["generationId"]}`
	waitInput          = `{"type":"object","additionalProperties":false,"properties":{"generationId":` + generationIDSchema + `,"timeoutSeconds":{"type":"integer","minimum":MIN_WAIT,"maximum":MAX_WAIT,"default":DEF_WAIT}},"required":["generationId"]}`
	downloadInput      = `{"type":"object","additionalProperties":false,"properties":{"generationId":` + generationIDSchema + `,"index":{"type":"integer","minimum":0,"default":0}},"required":["generationId"]}`
	uploadInput        = `{"type":"object","additionalProperties":false,"properties":{"generationId":` + generationIDSchema + `,"image":` + inputImageSchema + `,"role":{"type":"string","enum":ROLES,"description":"Default: the first input it waits for."}},"required":["generationId","image"]}`
	listGenerationsIn  = `{"type":"object","additionalProperties":false,"properties":{"limit":{"type":"integer","minimum":1,"maximum":MAX_LIMIT,"default":DEF_LIMIT},"cursor":{"type":"string"},"status":{"type":"string","enum":["reserved","queued","running","completed","failed","cancelled"]}}}`
	listGenerationsOut = `{"type":"object","properties":{"generations":{"type":"array","items":{"type":"object"}},"nextCursor":{"type":"string"}},"required":["generations"]}`
	listModelsOut      = `{"type":"object","properties":{"models":{"type":"array","items":{"type":"object","properties":{
 "modelId":{"type":"string"},"kind":{"type":"string"},"credits":{"type":"integer"},"aspectRatios":{"type":"array"},"durations":{"type":"array"},
 "maxCount":{"type":"integer"},"needsInputImage":{"type":"boolean"},"roles":{"type":"object"}}}}},"required":["models"]}`
	describeModelIn  = `{"type":"object","properties":{"modelId":{"type":"string","minLength":1,"maxLength":MAX_MODEL_ID,"description":"From list_models or search_models, or a provider-qualified id the server allows (replicate:owner/name[:version], fal:owner/app[/path])."}},"required":["modelId"],"additionalProperties":false}`
	describeModelOut = `{"type":"object","properties":{"modelId":{"type":"string"},"kind":{"type":"string"},"credits":{"type":"integer"},"priceUnit":{"type":"string"},
 "maxCount":{"type":"integer"},"needsInputImage":{"type":"boolean"},"roles":{"type":"object"},"mapping":{"type":"object"},"input":{"type":["array","null"]},"available":{"type":"boolean"}},"required":["modelId","input","available"]}`
	searchModelsIn = `{"type":"object","properties":{"query":{"type":"string","maxLength":MAX_QUERY,"description":"Words to find in ids, titles, descriptions."},
 "kind":{"type":"string","enum":["image","video"]},"cursor":{"type":"string"},
 "limit":{"type":"integer","minimum":1,"maximum":MAX_SEARCH,"default":DEF_SEARCH}},"required":["query"],"additionalProperties":false}`
	searchModelsOut = `{"type":"object","properties":{"models":{"type":"array"},"nextCursor":{"type":"string"},"sources":{"type":"array"}},"required":["models","sources"]}`
	creditsOut      = `{"type":"object","properties":{"balance":{"type":["integer","null"]},"currency":{"type":"string"},"spent":{"type":"integer"},"limit":{"type":["integer","null"]}},"required":["balance","currency","spent","limit"]}`
	downloadOut     = `{"type":"object","properties":{"url":{"type":"string"},"expiresAt":{"type":"string"},"mimeType":{"type":"string"},"bytes":{"type":"integer"},"sha256":{"type":"string"}},"required":["url","expiresAt"]}`
)
