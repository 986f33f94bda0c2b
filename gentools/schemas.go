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
	maxWaitSeconds = MaxWaitSeconds
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
	"MAX_WAIT", strconv.Itoa(maxWaitSeconds),
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

const generationIDSchema = `{"type":"string","description":"The generationId returned by generate.","minLength":1,"maxLength":MAX_ID}`

const inputImageSchema = `{"type":"object","additionalProperties":false,"description":"An input image: either {url} (http or https) or {data (base64), mimeType}. PNG, JPEG or WebP.",
 "properties":{"url":{"type":"string"},"data":{"type":"string","description":"base64-encoded image bytes"},"mimeType":{"type":"string","enum":["image/png","image/jpeg","image/webp"]}}}`

const outputSchema = `{"type":"object","properties":{
 "url":{"type":"string"},"expiresAt":{"type":"string"},"mimeType":{"type":"string"},
 "bytes":{"type":"integer"},"sha256":{"type":"string"},"width":{"type":"integer"},
 "height":{"type":"integer"},"durationSeconds":{"type":"number"}},
 "required":["url","expiresAt","mimeType","bytes","sha256"]}`

const generationSchema = `{"type":"object","properties":{
 "generationId":{"type":"string"},"modelId":{"type":"string"},"kind":{"type":"string","enum":["image","video"]},
 "status":{"type":"string","enum":["reserved","queued","running","completed","failed","cancelled"]},
 "statusMessage":{"type":"string"},"progress":{"type":"number","minimum":0,"maximum":1},
 "createdAt":{"type":"string"},"updatedAt":{"type":"string"},
 "outputs":{"type":"array","items":` + outputSchema + `},
 "inputs":{"type":"array","items":` + inputViewSchema + `},
 "error":{"type":"object","properties":{"kind":{"type":"string"},"message":{"type":"string"}},"required":["kind","message"]},
 "credits":{"type":"integer"},"outputsExpired":{"type":"boolean"},"uploadRequired":{"type":"boolean"},"cancelRequested":{"type":"boolean"},"timedOut":{"type":"boolean"}},
 "required":["generationId","modelId","kind","status","statusMessage","progress","createdAt","updatedAt","outputs","credits"]}`

const inputViewSchema = `{"type":"object","properties":{
 "role":{"type":"string"},"uri":{"type":"string"},"from":{"type":"string"},"url":{"type":"string"},"expiresAt":{"type":"string"},"mimeType":{"type":"string"},
 "width":{"type":"integer"},"height":{"type":"integer"}},"required":["role","uri","url","mimeType"]}`

const dryRunOut = `{"type":"object","properties":{
 "dryRun":{"type":"boolean"},"modelId":{"type":"string"},"kind":{"type":"string"},"count":{"type":"integer"},
 "creditsPerOutput":{"type":"integer"},"credits":{"type":"integer"},
 "budget":{"type":"object","properties":{"spent":{"type":"integer"},"limit":{"type":["integer","null"]},"balance":{"type":["integer","null"]},"allowed":{"type":"boolean"}}},
 "approval":{"type":"object","properties":{"threshold":{"type":["integer","null"]},"required":{"type":"boolean"}}}},
 "required":["dryRun","modelId","count","credits","budget","approval"]}`

// raw is a schema with its bounds filled in.
func raw(s string) json.RawMessage { return json.RawMessage(bounds.Replace(s)) }

// generateInputSchema offers every aspect ratio some model supports.
func generateInputSchema(ratios []string) json.RawMessage {
	enum, _ := json.Marshal(ratios)
	return raw(strings.NewReplacer("RATIOS", string(enum), "INPUT", inputImageSchema).Replace(`{"type":"object","properties":{
 "modelId":{"type":"string","description":"A modelId from list_models."},
 "prompt":{"type":"string","minLength":1,"maxLength":MAX_PROMPT},
 "aspectRatio":{"type":"string","enum":RATIOS,"default":"16:9"},
 "negativePrompt":{"type":"string","maxLength":MAX_NEGATIVE},
 "seed":{"type":"integer","description":"Same model, prompt, parameters and seed give the same result where the model allows."},
 "durationSeconds":{"type":"integer","minimum":1,"maximum":MAX_DURATION,"description":"Video models only; see durations in list_models."},
 "inputImage":INPUT,
 "inputs":{"type":"array","maxItems":MAX_FILES,"description":"Input files by role, for models that take them (see roles in list_models): the image to edit (image) and its mask (white where it may change; the image's size), style or subject references, a video's first_frame and last_frame. Give each as uri (the darkroom://generations/{generationId}/outputs/{index} of one of your outputs: no download needed), as image, or by role alone to upload it next with upload_input.",
  "items":{"type":"object","additionalProperties":false,"required":["role"],"properties":{"role":{"type":"string","enum":ROLES},"uri":{"type":"string"},"image":INPUT}}},
 "count":{"type":"integer","minimum":1,"default":1,"description":"How many outputs to make, up to the model's maxCount (list_models); each is charged."},
 "dryRun":{"type":"boolean","default":false,"description":"Check everything and say what it would cost and whether the budget and approval rule allow it; creates nothing."},
 "idempotencyKey":{"type":"string","maxLength":MAX_KEY,"description":"Repeat a generate safely: the same key returns the same generation."},
 "wait":{"type":"boolean","default":false,"description":"Wait for the result (up to waitSeconds) before answering."},
 "waitSeconds":{"type":"integer","minimum":MIN_WAIT,"maximum":MAX_WAIT,"default":DEF_WAIT},
 "confirmSpend":{"type":"boolean","description":"Confirm spending credits above your approval threshold."},
 "input":{"type":"object","description":"The model's own input fields (describe_model lists them), validated before anything is charged. Fields generate's own arguments set (prompt, aspectRatio, seed, images…) are refused here: pass them once, as those arguments."}},
 "required":["modelId","prompt"],"additionalProperties":false}`))
}

const (
	emptyInput         = `{"type":"object","additionalProperties":false}`
	getInput           = `{"type":"object","additionalProperties":false,"properties":{"generationId":` + generationIDSchema + `},"required":["generationId"]}`
	waitInput          = `{"type":"object","additionalProperties":false,"properties":{"generationId":` + generationIDSchema + `,"timeoutSeconds":{"type":"integer","minimum":MIN_WAIT,"maximum":MAX_WAIT,"default":DEF_WAIT}},"required":["generationId"]}`
	downloadInput      = `{"type":"object","additionalProperties":false,"properties":{"generationId":` + generationIDSchema + `,"index":{"type":"integer","minimum":0,"default":0}},"required":["generationId"]}`
	uploadInput        = `{"type":"object","additionalProperties":false,"properties":{"generationId":` + generationIDSchema + `,"image":` + inputImageSchema + `,"role":{"type":"string","enum":ROLES,"description":"What the image is for; default: the first input the generation waits for."}},"required":["generationId","image"]}`
	listGenerationsIn  = `{"type":"object","additionalProperties":false,"properties":{"limit":{"type":"integer","minimum":1,"maximum":MAX_LIMIT,"default":DEF_LIMIT},"cursor":{"type":"string"},"status":{"type":"string","enum":["reserved","queued","running","completed","failed","cancelled"]}}}`
	listGenerationsOut = `{"type":"object","properties":{"generations":{"type":"array","items":` + generationSchema + `},"nextCursor":{"type":"string"}},"required":["generations"]}`
	listModelsOut      = `{"type":"object","properties":{"models":{"type":"array","items":{"type":"object","properties":{
 "modelId":{"type":"string"},"provider":{"type":"string"},"kind":{"type":"string","enum":["image","video"]},"title":{"type":"string"},
 "description":{"type":"string"},"credits":{"type":"integer"},"priceUnit":{"type":"string","enum":["run","image","second","megapixel"]},"aspectRatios":{"type":"array","items":{"type":"string"}},
 "durations":{"type":"array","items":{"type":"integer"}},"needsInputImage":{"type":"boolean"},"acceptsInputImage":{"type":"boolean"},
 "maxCount":{"type":"integer"},"roles":{"type":"object","additionalProperties":{"type":"integer"}}},
 "required":["modelId","provider","kind","title","description","credits","aspectRatios","needsInputImage"]}}},"required":["models"]}`
	describeModelIn = `{"type":"object","properties":{"modelId":{"type":"string","minLength":1,"maxLength":MAX_MODEL_ID,"description":"A modelId from list_models or search_models, or a provider-qualified id (replicate:owner/name[:version], fal:owner/app[/path]) the server allows."}},"required":["modelId"],"additionalProperties":false}`
	fieldSchema     = `{"type":"object","properties":{"name":{"type":"string"},"type":{"type":"string"},"format":{"type":"string"},"description":{"type":"string"},
 "enum":{"type":"array"},"minimum":{"type":"number"},"maximum":{"type":"number"},"default":{},"required":{"type":"boolean"},"items":{"type":"string"}},"required":["name"]}`
	describeModelOut = `{"type":"object","properties":{
 "modelId":{"type":"string"},"provider":{"type":"string"},"kind":{"type":"string","enum":["image","video"]},"title":{"type":"string"},"description":{"type":"string"},
 "credits":{"type":"integer","description":"The price of one call, per priceUnit."},"priceUnit":{"type":"string","enum":["run","image","second","megapixel"]},
 "curated":{"type":"boolean"},"aspectRatios":{"type":"array","items":{"type":"string"}},"durations":{"type":"array","items":{"type":"integer"}},"maxCount":{"type":"integer"},
 "mapping":{"type":"object","description":"Which provider field each of generate's own arguments sets.","properties":{"prompt":{"type":"string"},"negativePrompt":{"type":"string"},
  "aspectRatio":{"type":"string"},"seed":{"type":"string"},"durationSeconds":{"type":"string"},"count":{"type":"string"},"inputImage":{"type":"string"},
  "roles":{"type":"object","additionalProperties":{"type":"object","properties":{"field":{"type":"string"},"max":{"type":"integer"}},"required":["field","max"]}}},"required":["prompt"]},
 "input":{"type":["array","null"],"items":` + fieldSchema + `,"description":"The fields generate's input may set; null when the provider publishes no schema."},
 "schemaFetchedAt":{"type":"string"}},
 "required":["modelId","provider","kind","title","description","credits","priceUnit","curated","aspectRatios","maxCount","mapping","input"]}`
	searchModelsIn = `{"type":"object","properties":{"query":{"type":"string","maxLength":MAX_QUERY,"description":"Words to look for in model ids, titles and descriptions."},
 "kind":{"type":"string","enum":["image","video"]},"cursor":{"type":"string","description":"nextCursor from the previous page."},
 "limit":{"type":"integer","minimum":1,"maximum":MAX_SEARCH,"default":DEF_SEARCH}},"required":["query"],"additionalProperties":false}`
	searchModelsOut = `{"type":"object","properties":{"models":{"type":"array","items":{"type":"object","properties":{
 "modelId":{"type":"string"},"title":{"type":"string"},"description":{"type":"string"},"kind":{"type":"string"},"source":{"type":"string"}},"required":["modelId","source"]}},
 "nextCursor":{"type":"string"},"sources":{"type":"array","items":{"type":"string"}}},"required":["models","sources"]}`
	creditsOut  = `{"type":"object","properties":{"balance":{"type":["integer","null"]},"currency":{"type":"string"},"spent":{"type":"integer"},"limit":{"type":["integer","null"]}},"required":["balance","currency","spent","limit"]}`
	downloadOut = outputSchema
)
