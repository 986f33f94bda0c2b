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
  "black-forest-labs/flux-1.1-pro": ("Faster, better FLUX Pro. Text-to-image model with excellent image quality, prompt adherence, and output diversity.", "image", cog([
    ("prompt", {"type": "string", "description": "Text prompt for image generation"}),
    ("aspect_ratio", {"type": "string", "default": "1:1", "description": "Aspect ratio for the generated image"}),
    ("width", {"type": "integer", "minimum": 256, "maximum": 1440, "description": "Width of the generated image in text-to-image mode. Only used when aspect_ratio=custom. Must be a multiple of 32."}),
    ("height", {"type": "integer", "minimum": 256, "maximum": 1440, "description": "Height of the generated image in text-to-image mode. Only used when aspect_ratio=custom. Must be a multiple of 32."}),
    ("image_prompt", {"type": "string", "format": "uri", "description": "Image to use with Flux Redux. This is used together with the text prompt to guide the generation towards the composition of the image_prompt. Must be jpeg, png, gif, or webp."}),
    ("safety_tolerance", {"type": "integer", "default": 2, "minimum": 1, "maximum": 6, "description": "Safety tolerance, 1 is most strict and 6 is most permissive"}),
    ("seed", {"type": "integer", "description": "Random seed. Set for reproducible generation"}),
    ("output_format", {"type": "string", "default": "webp", "description": "Format of the output images."}),
    ("output_quality", {"type": "integer", "default": 80, "minimum": 0, "maximum": 100}),
    ("prompt_upsampling", {"type": "boolean", "default": False, "description": "Automatically modify the prompt for more creative generation"}),
  ], ["prompt"], ONE, {"aspect_ratio": ["custom", "1:1", "16:9", "3:2", "2:3", "4:5", "5:4", "9:16", "3:4", "4:3"], "output_format": ["webp", "jpg", "png"]})),
  "black-forest-labs/flux-kontext-pro": ("A state-of-the-art text-based image editing model that delivers high-quality outputs with excellent prompt following and consistent results for transforming images through natural language", "image", cog([
    ("prompt", {"type": "string", "description": "Text description of what you want to generate, or the instruction on how to edit the given image."}),
    ("input_image", {"type": "string", "format": "uri", "description": "Image to use as reference. Must be jpeg, png, gif, or webp."}),
    ("aspect_ratio", {"type": "string", "default": "match_input_image", "description": "Aspect ratio of the generated image. Use 'match_input_image' to match the aspect ratio of the input image."}),
    ("seed", {"type": "integer", "description": "Random seed. Set for reproducible generation"}),
    ("output_format", {"type": "string", "default": "png", "description": "Output format for the generated image"}),
    ("safety_tolerance", {"type": "integer", "default": 2, "minimum": 0, "maximum": 6, "description": "Safety tolerance, 0 is most strict and 6 is most permissive. 2 is currently the maximum allowed when input images are used."}),
    ("prompt_upsampling", {"type": "boolean", "default": False, "description": "Automatic prompt improvement"}),
  ], ["prompt"], ONE, {"aspect_ratio": ["match_input_image", "1:1", "16:9", "9:16", "4:3", "3:4", "3:2", "2:3", "4:5", "5:4", "21:9", "9:21", "2:1", "1:2"], "output_format": ["jpg", "png"]})),
  "black-forest-labs/flux-fill-pro": ("Professional inpainting and outpainting model with state-of-the-art performance. Edit or extend images with natural, seamless results.", "image", cog([
    ("prompt", {"type": "string", "description": "Text prompt for image generation"}),
    ("image", {"type": "string", "format": "uri", "description": "The image to inpaint. Can contain alpha mask. If the image width or height are not multiples of 32, they will be scaled to the closest multiple of 32. If the image dimensions don't fit within 1440x1440, it will be scaled down to fit."}),
    ("mask", {"type": "string", "format": "uri", "description": "A black-and-white image that describes the part of the image to inpaint. Black areas will be preserved while white areas will be inpainted."}),
    ("outpaint", {"type": "string", "default": "None", "description": "A quick option for outpainting an input image. Mask will be ignored."}),
    ("steps", {"type": "integer", "default": 50, "minimum": 15, "maximum": 50, "description": "Number of diffusion steps. Higher values yield finer details but increase processing time."}),
    ("guidance", {"type": "number", "default": 60, "minimum": 1.5, "maximum": 100, "description": "Controls the balance between adherence to the text prompt and image quality/diversity."}),
    ("seed", {"type": "integer", "description": "Random seed. Set for reproducible generation"}),
    ("output_format", {"type": "string", "default": "jpg", "description": "Format of the output images."}),
    ("safety_tolerance", {"type": "integer", "default": 2, "minimum": 1, "maximum": 6, "description": "Safety tolerance, 1 is most strict and 6 is most permissive"}),
    ("prompt_upsampling", {"type": "boolean", "default": False}),
  ], ["prompt", "image"], ONE, {"outpaint": ["None", "Zoom out 1.5x", "Zoom out 2x", "Make square", "Left outpaint", "Right outpaint", "Top outpaint", "Bottom outpaint"], "output_format": ["jpg", "png"]})),
  "google/veo-3-fast": ("A faster and cheaper version of Google's Veo 3 video model, with audio", "video", cog([
    ("prompt", {"type": "string", "description": "Text prompt for video generation"}),
    ("aspect_ratio", {"type": "string", "default": "16:9", "description": "Video aspect ratio"}),
    ("duration", {"type": "integer", "default": 8, "description": "Video duration in seconds"}),
    ("image", {"type": "string", "format": "uri", "description": "Input image to start generating from. Ideal images are 16:9 or 9:16 and 1280x720 or 720x1280, depending on the aspect ratio you choose."}),
    ("negative_prompt", {"type": "string", "description": "Description of what to exclude from the generated video"}),
    ("resolution", {"type": "string", "default": "720p", "description": "Resolution of the generated video"}),
    ("generate_audio", {"type": "boolean", "default": True, "description": "Generate audio with the video"}),
    ("seed", {"type": "integer", "description": "Random seed. Omit for random generations"}),
  ], ["prompt"], ONE, {"aspect_ratio": ["16:9", "9:16"], "duration": [4, 6, 8], "resolution": ["720p", "1080p"]})),
  "kwaivgi/kling-v2.1": ("Use Kling v2.1 to generate 5s and 10s videos in 720p and 1080p resolution from a starting image (image-to-video)", "video", cog([
    ("prompt", {"type": "string", "description": "Text prompt for video generation"}),
    ("negative_prompt", {"type": "string", "default": "", "description": "Things you do not want to see in the video"}),
    ("start_image", {"type": "string", "format": "uri", "description": "First frame of the video. You must use a start image with kling-v2.1."}),
    ("end_image", {"type": "string", "format": "uri", "description": "Last frame of the video (pro mode is required when this parameter is set)"}),
    ("mode", {"type": "string", "default": "standard", "description": "Standard has a resolution of 720p, pro is 1080p. Both are 24fps."}),
    ("duration", {"type": "integer", "default": 5, "description": "Duration of the video in seconds"}),
  ], ["prompt", "start_image"], ONE, {"mode": ["standard", "pro"], "duration": [5, 10]})),
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

def obj(title, req, props): return {"type": "object", "title": title, "required": req, "properties": props}
SAFETY = {"type": "string", "title": "Safety Tolerance", "enum": ["1", "2", "3", "4", "5", "6"], "default": "2", "description": "The safety tolerance level for the generated image. 1 being the most strict and 5 being the most permissive."}
NUM = {"type": "integer", "title": "Num Images", "default": 1, "minimum": 1, "maximum": 4, "description": "The number of images to generate."}
SEED = {"type": "integer", "title": "Seed", "description": "The same seed and the same prompt given to the same version of the model will output the same image every time."}
FMT = {"type": "string", "title": "Output Format", "enum": ["jpeg", "png"], "default": "jpeg", "description": "The format of the generated image."}
SYNC = {"type": "boolean", "title": "Sync Mode", "default": False}
SAFE = {"type": "boolean", "title": "Enable Safety Checker", "default": True}
PRO_OUT = {"type": "object", "title": "Output", "required": ["images", "seed", "has_nsfw_concepts", "prompt"], "properties": {
    "images": {"type": "array", "items": {"$ref": "#/components/schemas/Image"}}, "seed": {"type": "integer"},
    "has_nsfw_concepts": {"type": "array", "items": {"type": "boolean"}}, "prompt": {"type": "string"}}}
KONTEXT_AR = ["21:9", "16:9", "4:3", "3:2", "1:1", "2:3", "3:4", "9:16", "9:21"]
fal.update({
  "fal-ai/flux-pro/v1.1": fal_doc("fal-ai/flux-pro/v1.1", "FLUX1.1 [pro] is an enhanced version of FLUX.1 [pro], improved image generation capabilities, delivering superior composition, detail, and artistic fidelity compared to its predecessor.", "text-to-image",
    obj("FluxProPlusTextToImageInput", ["prompt"], {"prompt": {"type": "string", "title": "Prompt"}, "image_size": flux_in(28, 50, False)["properties"]["image_size"],
        "seed": SEED, "sync_mode": SYNC, "num_images": NUM, "enable_safety_checker": SAFE, "safety_tolerance": SAFETY, "output_format": FMT}), PRO_OUT, IMAGE),
  "fal-ai/flux-pro/kontext": fal_doc("fal-ai/flux-pro/kontext", "FLUX.1 Kontext [pro] handles both text and reference images as inputs, seamlessly enabling targeted, local edits and complex transformations of entire scenes.", "image-to-image",
    obj("FluxKontextInput", ["prompt", "image_url"], {"prompt": {"type": "string", "title": "Prompt", "description": "The prompt to generate an image from."},
        "image_url": {"type": "string", "title": "Image URL", "description": "Image prompt for the omni model."},
        "seed": SEED, "guidance_scale": {"type": "number", "title": "Guidance scale (CFG)", "default": 3.5, "minimum": 1, "maximum": 20},
        "sync_mode": SYNC, "num_images": NUM, "safety_tolerance": SAFETY, "output_format": FMT,
        "aspect_ratio": {"type": "string", "title": "Aspect Ratio", "enum": KONTEXT_AR, "description": "The aspect ratio of the generated image."}}), PRO_OUT, IMAGE),
  "fal-ai/flux-pro/v1/fill": fal_doc("fal-ai/flux-pro/v1/fill", "FLUX.1 [pro] Fill is a high-performance endpoint for the FLUX.1 [pro] model that enables rapid transformation of existing images, delivering high-quality style transfers and image modifications with the core FLUX capabilities.", "image-to-image",
    obj("FluxProFillInput", ["prompt", "image_url", "mask_url"], {"prompt": {"type": "string", "title": "Prompt", "description": "The prompt to fill the masked part of the image."},
        "image_url": {"type": "string", "title": "Image URL", "description": "The image URL to generate an image from. Needs to match the dimensions of the mask."},
        "mask_url": {"type": "string", "title": "Mask URL", "description": "The mask URL to inpaint the image. Needs to match the dimensions of the input image."},
        "seed": SEED, "sync_mode": SYNC, "num_images": NUM, "enable_safety_checker": SAFE, "safety_tolerance": SAFETY, "output_format": FMT}), PRO_OUT, IMAGE),
  "fal-ai/veo3/fast": fal_doc("fal-ai/veo3/fast", "Faster and more cost effective version of Google's Veo 3!", "text-to-video",
    obj("Veo3TextToVideoInput", ["prompt"], {"prompt": {"type": "string", "title": "Prompt", "description": "The text prompt describing the video you want to generate"},
        "aspect_ratio": {"type": "string", "title": "Aspect Ratio", "enum": ["16:9", "9:16", "1:1"], "default": "16:9", "description": "The aspect ratio of the generated video. If it is set to 1:1, the video will be outpainted."},
        "duration": {"type": "string", "title": "Duration", "enum": ["4s", "6s", "8s"], "default": "8s", "description": "The duration of the generated video in seconds"},
        "negative_prompt": {"type": "string", "title": "Negative Prompt", "description": "A negative prompt to guide the video generation"},
        "enhance_prompt": {"type": "boolean", "title": "Enhance Prompt", "default": True}, "seed": {"type": "integer", "title": "Seed"},
        "auto_fix": {"type": "boolean", "title": "Auto Fix", "default": True},
        "resolution": {"type": "string", "title": "Resolution", "enum": ["720p", "1080p"], "default": "720p"},
        "generate_audio": {"type": "boolean", "title": "Generate Audio", "default": True, "description": "Whether to generate audio for the video. If false, 33% less credits will be used."}}), VIDEO_OUT, FILE),
  "fal-ai/kling-video/v2.1/pro/image-to-video": fal_doc("fal-ai/kling-video/v2.1/pro/image-to-video", "Kling 2.1 Pro is an advanced endpoint for the Kling 2.1 model, offering professional-grade videos with enhanced visual fidelity, precise camera movements, and dynamic motion control.", "image-to-video",
    obj("ImageToVideoV21ProRequest", ["prompt", "image_url"], {"prompt": {"type": "string", "maxLength": 2500},
        "image_url": {"type": "string", "title": "Image Url", "description": "URL of the image to be used for the video"},
        "duration": {"type": "string", "enum": ["5", "10"], "default": "5", "description": "The duration of the generated video in seconds"},
        "negative_prompt": {"type": "string", "default": "blur, distort, and low quality", "maxLength": 2500},
        "cfg_scale": {"type": "number", "default": 0.5, "minimum": 0, "maximum": 1},
        "tail_image_url": {"type": "string", "title": "Tail Image Url", "description": "URL of the image to be used for the end of the video"}}), VIDEO_OUT, FILE),
})
pricing += [
  {"endpoint_id": "fal-ai/flux-pro/v1.1", "unit_price": 0.04, "unit": "megapixels", "currency": "USD"},
  {"endpoint_id": "fal-ai/flux-pro/kontext", "unit_price": 0.04, "unit": "image", "currency": "USD"},
  {"endpoint_id": "fal-ai/flux-pro/v1/fill", "unit_price": 0.05, "unit": "megapixels", "currency": "USD"},
  {"endpoint_id": "fal-ai/veo3/fast", "unit_price": 0.4, "unit": "seconds", "currency": "USD"},
  {"endpoint_id": "fal-ai/kling-video/v2.1/pro/image-to-video", "unit_price": 0.09, "unit": "seconds", "currency": "USD"},
]

# Every Replicate model above is official (is_official: run through its
# model endpoint, no versions served) but the emulator-only community one.
COMMUNITY = {"acme/clip-maker"}
for path, (desc, kind, doc) in replicate.items():
    json.dump({"description": desc, "is_official": path not in COMMUNITY, "kind": kind, "openapi_schema": doc}, open("replicate/" + path.replace("/", "__") + ".json", "w"), indent=1, sort_keys=True)
for path, doc in fal.items():
    json.dump(doc, open("fal/" + path.replace("/", "__") + ".json", "w"), indent=1, sort_keys=True)
json.dump({"prices": pricing}, open("fal/pricing.json", "w"), indent=1)
