# Writes the models' published input schemas (trimmed) that the emulator
# serves: Cog's openapi_schema for Replicate, fal's per-endpoint OpenAPI
# document. Run: python3 gen.py (the output is committed).
import json

def cog(props, required, output, enums):
    schemas = {"Input": {"type": "object", "title": "Input", "required": required, "properties": {}}, "Output": output}
    for i, (name, p) in enumerate(props):
        p = dict(p); p["x-order"] = i; p.setdefault("title", name.replace("_", " ").title())
        if name in enums:
            schemas[name] = {"enum": enums[name], "type": p.pop("type", "string"), "title": name, "description": "An enumeration."}
            p["allOf"] = [{"$ref": "#/components/schemas/" + name}]
        schemas["Input"]["properties"][name] = p
    return {"openapi": "3.0.2", "info": {"title": "Cog", "version": "0.1.0"}, "paths": {}, "components": {"schemas": schemas}}

IMG = {"type": "array", "items": {"type": "string", "format": "uri"}, "title": "Output"}
ONE = {"type": "string", "format": "uri", "title": "Output"}
FLUX_AR = ["1:1", "16:9", "21:9", "3:2", "2:3", "4:5", "5:4", "3:4", "4:3", "9:16", "9:21"]

replicate = {
  "black-forest-labs/flux-schnell": ("The fastest image generation model tailored for local development and personal use", "image", cog([
    ("prompt", {"type": "string", "description": "Prompt for generated image"}),
    ("aspect_ratio", {"type": "string", "default": "1:1", "description": "Aspect ratio for the generated image"}),
    ("num_outputs", {"type": "integer", "default": 1, "minimum": 1, "maximum": 4, "description": "Number of outputs to generate"}),
    ("num_inference_steps", {"type": "integer", "default": 4, "minimum": 1, "maximum": 4, "description": "Number of denoising steps. 4 is recommended, and lower number of steps produce lower quality outputs, faster."}),
    ("seed", {"type": "integer", "description": "Random seed. Set for reproducible generation"}),
    ("output_format", {"type": "string", "default": "webp", "description": "Format of the output images"}),
    ("output_quality", {"type": "integer", "default": 80, "minimum": 0, "maximum": 100, "description": "Quality when saving the output images, from 0 to 100. 100 is best quality, 0 is lowest quality. Not relevant for .png outputs"}),
    ("disable_safety_checker", {"type": "boolean", "default": False, "description": "Disable safety checker for generated images."}),
    ("go_fast", {"type": "boolean", "default": True, "description": "Run faster predictions with model optimized for speed (currently fp8 quantized); disable to run in original bf16"}),
    ("megapixels", {"type": "string", "default": "1", "description": "Approximate number of megapixels for generated image"}),
  ], ["prompt"], IMG, {"aspect_ratio": FLUX_AR, "output_format": ["webp", "jpg", "png"], "megapixels": ["1", "0.25"]})),
  "black-forest-labs/flux-dev": ("A 12 billion parameter rectified flow transformer capable of generating images from text descriptions", "image", cog([
    ("prompt", {"type": "string", "description": "Prompt for generated image"}),
    ("aspect_ratio", {"type": "string", "default": "1:1", "description": "Aspect ratio for the generated image"}),
    ("image", {"type": "string", "format": "uri", "description": "Input image for image to image mode. The aspect ratio of your output will match this image"}),
    ("prompt_strength", {"type": "number", "default": 0.8, "minimum": 0, "maximum": 1, "description": "Prompt strength when using img2img. 1.0 corresponds to full destruction of information in image"}),
    ("num_outputs", {"type": "integer", "default": 1, "minimum": 1, "maximum": 4, "description": "Number of outputs to generate"}),
    ("num_inference_steps", {"type": "integer", "default": 28, "minimum": 1, "maximum": 50, "description": "Number of denoising steps. Recommended range is 28-50"}),
    ("guidance", {"type": "number", "default": 3, "minimum": 0, "maximum": 10, "description": "Guidance for generated image"}),
    ("seed", {"type": "integer", "description": "Random seed. Set for reproducible generation"}),
    ("output_format", {"type": "string", "default": "webp", "description": "Format of the output images"}),
    ("output_quality", {"type": "integer", "default": 80, "minimum": 0, "maximum": 100}),
    ("disable_safety_checker", {"type": "boolean", "default": False}),
    ("go_fast", {"type": "boolean", "default": True}),
    ("megapixels", {"type": "string", "default": "1"}),
  ], ["prompt"], IMG, {"aspect_ratio": FLUX_AR, "output_format": ["webp", "jpg", "png"], "megapixels": ["1", "0.25"]})),
  "kwaivgi/kling-v1.6-standard": ("Generate 5s and 10s videos in 720p resolution at 30fps", "video", cog([
    ("prompt", {"type": "string", "description": "Text prompt for video generation"}),
    ("negative_prompt", {"type": "string", "default": "", "description": "Things you do not want to see in the video"}),
    ("aspect_ratio", {"type": "string", "default": "16:9", "description": "Aspect ratio of the video. Ignored if start_image is provided."}),
    ("start_image", {"type": "string", "format": "uri", "description": "First frame of the video"}),
    ("reference_images", {"type": "array", "items": {"type": "string", "format": "uri"}, "description": "Reference images to use in video generation (images of objects, people, etc.)"}),
    ("cfg_scale", {"type": "number", "default": 0.5, "minimum": 0, "maximum": 1, "description": "Flexibility in video generation; The higher the value, the lower the model's degree of flexibility, and the stronger the relevance to the user's prompt."}),
    ("duration", {"type": "integer", "default": 5, "description": "Duration of the video in seconds"}),
  ], ["prompt"], ONE, {"aspect_ratio": ["16:9", "9:16", "1:1"], "duration": [5, 10]})),
  # Emulator-only: a community video model, pinned by version in tests.
  "acme/clip-maker": ("A community text-to-video model (emulator only)", "video", cog([
    ("prompt", {"type": "string"}),
    ("seconds", {"type": "integer", "default": 4, "minimum": 1, "maximum": 8}),
    ("fps", {"type": "integer", "default": 24, "minimum": 8, "maximum": 30}),
  ], ["prompt"], ONE, {})),
}

def fal_doc(endpoint, title, category, inp, out, extra):
    name = "".join(w.capitalize() for w in endpoint.replace("-", "/").replace(".", "").split("/")[1:])
    schemas = {"QueueStatus": {"type": "object", "title": "QueueStatus", "required": ["status", "request_id"], "properties": {
        "status": {"type": "string", "enum": ["IN_QUEUE", "IN_PROGRESS", "COMPLETED"]}, "request_id": {"type": "string"},
        "response_url": {"type": "string", "format": "uri"}, "status_url": {"type": "string", "format": "uri"},
        "cancel_url": {"type": "string", "format": "uri"}, "logs": {"type": "object", "additionalProperties": True}, "queue_position": {"type": "integer"}}},
        name + "Input": inp, name + "Output": out}
    schemas.update(extra)
    ref = lambda n: {"$ref": "#/components/schemas/" + n}
    json_of = lambda s: {"application/json": {"schema": s}}
    return {"openapi": "3.0.4", "info": {"title": "Queue OpenAPI for " + endpoint, "version": "1.0.0", "description": title,
            "x-fal-metadata": {"endpointId": endpoint, "category": category, "thumbnailUrl": "https://fal.media/files/thumb.jpg",
                               "playgroundUrl": "https://fal.ai/models/" + endpoint, "documentationUrl": "https://fal.ai/models/" + endpoint + "/api"}},
        "components": {"securitySchemes": {"apiKeyAuth": {"type": "apiKey", "in": "header", "name": "Authorization", "description": "Fal Key"}}, "schemas": schemas},
        "paths": {
            "/" + endpoint + "/requests/{request_id}/status": {"get": {"parameters": [{"name": "request_id", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "logs", "in": "query", "required": False, "schema": {"type": "number"}}], "responses": {"200": {"description": "The request status.", "content": json_of(ref("QueueStatus"))}}}},
            "/" + endpoint + "/requests/{request_id}/cancel": {"put": {"parameters": [{"name": "request_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "The request was cancelled.", "content": json_of({"type": "object", "properties": {"success": {"type": "boolean"}}})}}}},
            "/" + endpoint: {"post": {"requestBody": {"required": True, "content": json_of(ref(name + "Input"))},
                "responses": {"200": {"description": "The request status.", "content": json_of(ref("QueueStatus"))}}}},
            "/" + endpoint + "/requests/{request_id}": {"get": {"parameters": [{"name": "request_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "Result of the request.", "content": json_of(ref(name + "Output"))}}}},
        },
        "servers": [{"url": "https://queue.fal.run"}], "security": [{"apiKeyAuth": []}]}

IMAGE = {"Image": {"type": "object", "title": "Image", "required": ["url"], "properties": {"url": {"type": "string"}, "width": {"type": "integer"}, "height": {"type": "integer"}, "content_type": {"type": "string", "default": "image/jpeg"}}},
         "ImageSize": {"type": "object", "title": "ImageSize", "properties": {"width": {"type": "integer", "default": 512, "maximum": 14142, "exclusiveMinimum": 0}, "height": {"type": "integer", "default": 512, "maximum": 14142, "exclusiveMinimum": 0}}}}
SIZES = ["square_hd", "square", "portrait_4_3", "portrait_16_9", "landscape_4_3", "landscape_16_9"]

def flux_in(steps_default, steps_max, guidance):
    props = {
        "prompt": {"type": "string", "title": "Prompt", "description": "The prompt to generate an image from."},
        "image_size": {"title": "Image Size", "description": "The size of the generated image.", "default": "landscape_4_3",
                       "anyOf": [{"$ref": "#/components/schemas/ImageSize"}, {"type": "string", "enum": SIZES}]},
        "num_inference_steps": {"type": "integer", "title": "Num Inference Steps", "default": steps_default, "minimum": 1, "maximum": steps_max, "description": "The number of inference steps to perform."},
        "seed": {"type": "integer", "title": "Seed", "description": "The same seed and the same prompt given to the same version of the model will output the same image every time."},
        "sync_mode": {"type": "boolean", "title": "Sync Mode", "default": False, "description": "If set to true, the function will wait for the image to be generated and uploaded before returning the response."},
        "num_images": {"type": "integer", "title": "Num Images", "default": 1, "minimum": 1, "maximum": 4, "description": "The number of images to generate."},
        "enable_safety_checker": {"type": "boolean", "title": "Enable Safety Checker", "default": True, "description": "If set to true, the safety checker will be enabled."},
        "output_format": {"type": "string", "title": "Output Format", "enum": ["jpeg", "png"], "default": "jpeg", "description": "The format of the generated image."},
        "acceleration": {"type": "string", "title": "Acceleration", "enum": ["none", "regular", "high"], "default": "none", "description": "The speed of the generation. The higher the speed, the faster the generation."},
    }
    if guidance:
        props["guidance_scale"] = {"type": "number", "title": "Guidance scale (CFG)", "default": 3.5, "minimum": 1, "maximum": 20, "description": "The CFG (Classifier Free Guidance) scale is a measure of how close you want the model to stick to your prompt when looking for a related image to show you."}
    return {"type": "object", "title": "Input", "required": ["prompt"], "properties": props}

FLUX_OUT = {"type": "object", "title": "Output", "required": ["images", "timings", "seed", "has_nsfw_concepts", "prompt"], "properties": {
    "images": {"type": "array", "items": {"$ref": "#/components/schemas/Image"}, "description": "The generated image files info."},
    "timings": {"type": "object", "additionalProperties": {"type": "number"}}, "seed": {"type": "integer"},
    "has_nsfw_concepts": {"type": "array", "items": {"type": "boolean"}}, "prompt": {"type": "string"}}}
KLING_IN = {"type": "object", "title": "TextToVideoRequest", "required": ["prompt"], "properties": {
    "prompt": {"type": "string", "maxLength": 2500},
    "duration": {"type": "string", "enum": ["5", "10"], "default": "5", "description": "The duration of the generated video in seconds"},
    "aspect_ratio": {"type": "string", "enum": ["16:9", "9:16", "1:1"], "default": "16:9", "description": "The aspect ratio of the generated video frame"},
    "negative_prompt": {"type": "string", "default": "blur, distort, and low quality", "maxLength": 2500},
    "cfg_scale": {"type": "number", "default": 0.5, "minimum": 0, "maximum": 1, "description": "The CFG (Classifier Free Guidance) scale is a measure of how close you want the model to stick to your prompt."}}}
VIDEO_OUT = {"type": "object", "title": "TextToVideoOutput", "required": ["video"], "properties": {"video": {"$ref": "#/components/schemas/File"}}}
FILE = {"File": {"type": "object", "title": "File", "required": ["url"], "properties": {"url": {"type": "string"}, "content_type": {"type": "string"}, "file_name": {"type": "string"}, "file_size": {"type": "integer"}}}}

fal = {
  "fal-ai/flux/schnell": fal_doc("fal-ai/flux/schnell", "FLUX.1 [schnell] is a 12 billion parameter flow transformer that generates high-quality images from text in 1 to 4 steps", "text-to-image", flux_in(4, 12, False), FLUX_OUT, IMAGE),
  "fal-ai/flux/dev": fal_doc("fal-ai/flux/dev", "FLUX.1 [dev] is a 12 billion parameter flow transformer that generates high-quality images from text.", "text-to-image", flux_in(28, 50, True), FLUX_OUT, IMAGE),
  "fal-ai/kling-video/v1.6/standard/text-to-video": fal_doc("fal-ai/kling-video/v1.6/standard/text-to-video", "Generate video clips from your prompts using Kling 1.6 (std)", "text-to-video", KLING_IN, VIDEO_OUT, FILE),
}
pricing = [
  {"endpoint_id": "fal-ai/flux/schnell", "unit_price": 0.003, "unit": "megapixels", "currency": "USD"},
  {"endpoint_id": "fal-ai/flux/dev", "unit_price": 0.025, "unit": "megapixels", "currency": "USD"},
  {"endpoint_id": "fal-ai/kling-video/v1.6/standard/text-to-video", "unit_price": 0.045, "unit": "seconds", "currency": "USD"},
]

for path, (desc, kind, doc) in replicate.items():
    json.dump({"description": desc, "kind": kind, "openapi_schema": doc}, open("replicate/" + path.replace("/", "__") + ".json", "w"), indent=1, sort_keys=True)
for path, doc in fal.items():
    json.dump(doc, open("fal/" + path.replace("/", "__") + ".json", "w"), indent=1, sort_keys=True)
json.dump({"prices": pricing}, open("fal/pricing.json", "w"), indent=1)
