package google

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	ia "google.golang.org/genai/interactions/models/interactions"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
)

// maxInputImage bounds an input image sent inline: 7 MB, the Gemini image
// models' "Maximum image size" (gemini-2.5-flash-image's model card; the
// same limit is kept for the models after it and for Omni's images).
const maxInputImage = 7 << 20

// geminiBody builds a generateContent body from the catalog's field map:
// the prompt and the images (the input image first, then references) as
// parts, aspectRatio and imageSize in generationConfig.imageConfig, the
// other mapped fields and the defaults in generationConfig.
func geminiBody(ctx context.Context, e catalog.Entry, req provider.Request) (map[string]any, error) {
	in, prompt, images, err := inputs(ctx, e, req)
	if err != nil {
		return nil, err
	}
	parts := []any{map[string]any{"text": prompt}}
	for _, img := range images {
		parts = append(parts, map[string]any{"inlineData": map[string]any{"mimeType": img.mime, "data": img.data}})
	}
	gc := map[string]any{"responseModalities": []string{"TEXT", "IMAGE"}}
	imageConfig := map[string]any{}
	for k, v := range in {
		if k == "aspectRatio" || k == "imageSize" {
			imageConfig[k] = v
		} else {
			gc[k] = v
		}
	}
	if len(imageConfig) > 0 {
		gc["imageConfig"] = imageConfig
	}
	return map[string]any{"contents": []any{map[string]any{"role": "user", "parts": parts}}, "generationConfig": gc}, nil
}

// interactionBody builds a background video interaction with the SDK's
// own types: the prompt and images as input content, the mapped
// aspect_ratio, duration and resolution as the video response format
// (delivered as a uri, fetched later like any output), and the task the
// images make it.
func interactionBody(ctx context.Context, e catalog.Entry, req provider.Request) (ia.CreateModelInteraction, error) {
	in, prompt, images, err := inputs(ctx, e, req)
	if err != nil {
		return ia.CreateModelInteraction{}, err
	}
	content := []ia.Content{ia.NewContent(ia.TextContent{Text: prompt})}
	for _, img := range images {
		mime := ia.ImageContentMimeType(img.mime)
		content = append(content, ia.NewContent(ia.ImageContent{Data: &img.data, MimeType: &mime}))
	}
	format := ia.VideoResponseFormat{Delivery: ia.VideoResponseFormatDeliveryURI.ToPointer()}
	for k, v := range in {
		s, ok := v.(string)
		if !ok {
			return ia.CreateModelInteraction{}, &provider.PermanentError{Message: fmt.Sprintf("google: %s's field %s must be text, not %v", e.ID, k, v)}
		}
		switch k {
		case "aspect_ratio":
			format.AspectRatio = ia.VideoResponseFormatAspectRatio(s).ToPointer()
		case "duration":
			format.Duration = &s
		case "resolution":
			format.Resolution = ia.Resolution(s).ToPointer()
		default:
			return ia.CreateModelInteraction{}, &provider.PermanentError{Message: fmt.Sprintf("google: %s maps field %s, which a video interaction does not take", e.ID, k)}
		}
	}
	body := ia.CreateModelInteraction{
		Model:          ia.Model(e.Endpoint),
		Background:     new(true),
		Input:          new(ia.NewInteractionsInput(content)),
		ResponseFormat: new(ia.NewCreateModelInteractionResponseFormat(ia.NewResponseFormat(format))),
	}
	if task := videoTask(req, len(images)); task != "" {
		body.GenerationConfig = &ia.GenerationConfig{VideoConfig: &ia.VideoConfig{Task: task.ToPointer()}}
	}
	return body, nil
}

// videoTask is the SDK's VideoConfig task the request's images make: the
// input image is the first frame; references alone guide the subject.
func videoTask(req provider.Request, images int) ia.Task {
	switch {
	case images == 0:
		return ""
	case req.InputImage != nil:
		return ia.TaskImageToVideo
	default:
		return ia.TaskReferenceToVideo
	}
}

// image is one input image, base64 encoded.
type image struct{ mime, data string }

// inputs maps req through e's field map: the fields left for the body,
// the prompt, and the images to send inline (the input image first, then
// the references, in order).
func inputs(ctx context.Context, e catalog.Entry, req provider.Request) (map[string]any, string, []image, error) {
	in, err := e.BuildInput(req)
	if err != nil {
		return nil, "", nil, err
	}
	prompt, _ := in[e.Input.Prompt].(string)
	delete(in, e.Input.Prompt)
	var images []image
	if req.InputImage != nil && e.Input.InputImage != "" {
		delete(in, e.Input.InputImage)
		img, err := inline(ctx, req.InputImage)
		if err != nil {
			return nil, "", nil, err
		}
		images = append(images, img)
	}
	for i := range req.Extra {
		if req.Extra[i].Role != provider.RoleReference {
			continue
		}
		img, err := inline(ctx, &req.Extra[i])
		if err != nil {
			return nil, "", nil, err
		}
		images = append(images, img)
	}
	return in, prompt, images, nil
}

// inline reads an input image and base64-encodes it.
func inline(ctx context.Context, in *provider.Input) (image, error) {
	if in.Open == nil {
		return image{}, &provider.PermanentError{Message: "google: the input image cannot be read"}
	}
	rc, err := in.Open(ctx)
	if err != nil {
		return image{}, &provider.RetryableError{Err: fmt.Errorf("%w: google: read input image: %w", provider.ErrNotCreated, err)}
	}
	defer rc.Close()
	var sb strings.Builder
	enc := base64.NewEncoder(base64.StdEncoding, &sb)
	n, err := io.Copy(enc, io.LimitReader(rc, maxInputImage+1))
	enc.Close()
	if err != nil {
		return image{}, &provider.RetryableError{Err: fmt.Errorf("%w: google: read input image: %w", provider.ErrNotCreated, err)}
	}
	if n > maxInputImage {
		return image{}, &provider.PermanentError{Message: fmt.Sprintf("an input image is larger than the %d MB the Gemini API takes inline", maxInputImage>>20)}
	}
	mime := in.MimeType
	if mime == "" {
		mime = "image/png"
	}
	return image{mime: mime, data: sb.String()}, nil
}
