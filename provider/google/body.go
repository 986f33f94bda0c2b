package google

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
)

// maxInputImage bounds an input image sent inline (the Gemini API caps a
// whole request at 20 MB).
const maxInputImage = 14 << 20

// body builds the request body of e's API from the catalog's field map:
// the prompt goes in the instance (or the text part), the other mapped
// fields and the defaults in parameters (or generationConfig).
func (p *Provider) body(ctx context.Context, e catalog.Entry, req provider.Request) (map[string]any, error) {
	in, err := e.BuildInput(req)
	if err != nil {
		return nil, err
	}
	prompt := in[e.Input.Prompt]
	delete(in, e.Input.Prompt)
	var img map[string]any
	if req.InputImage != nil && e.Input.InputImage != "" {
		delete(in, e.Input.InputImage)
		if img, err = inline(ctx, req.InputImage); err != nil {
			return nil, err
		}
	}
	switch e.API {
	case "veo":
		inst := map[string]any{"prompt": prompt}
		if img != nil {
			inst[e.Input.InputImage] = veoImage(img)
		}
		if err := veoExtras(ctx, inst, req.Extra); err != nil {
			return nil, err
		}
		return map[string]any{"instances": []any{inst}, "parameters": in}, nil
	case "imagen":
		return map[string]any{"instances": []any{map[string]any{"prompt": prompt}}, "parameters": in}, nil
	default: // gemini
		parts := []any{map[string]any{"text": prompt}}
		if img != nil {
			parts = append(parts, map[string]any{"inlineData": img})
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
}

// inline reads an input image as {"mimeType", "data": base64}.
func inline(ctx context.Context, in *provider.Input) (map[string]any, error) {
	if in.Open == nil {
		return nil, &provider.PermanentError{Message: "google: the input image cannot be read"}
	}
	rc, err := in.Open(ctx)
	if err != nil {
		return nil, &provider.RetryableError{Err: fmt.Errorf("%w: google: read input image: %w", provider.ErrNotCreated, err)}
	}
	defer rc.Close()
	var sb strings.Builder
	enc := base64.NewEncoder(base64.StdEncoding, &sb)
	n, err := io.Copy(enc, io.LimitReader(rc, maxInputImage+1))
	enc.Close()
	if err != nil {
		return nil, &provider.RetryableError{Err: fmt.Errorf("%w: google: read input image: %w", provider.ErrNotCreated, err)}
	}
	if n > maxInputImage {
		return nil, &provider.PermanentError{Message: fmt.Sprintf("the input image is larger than the %d MB the Gemini API takes inline", maxInputImage>>20)}
	}
	mime := in.MimeType
	if mime == "" {
		mime = "image/png"
	}
	return map[string]any{"mimeType": mime, "data": sb.String()}, nil
}

func veoImage(img map[string]any) map[string]any {
	return map[string]any{"bytesBase64Encoded": img["data"], "mimeType": img["mimeType"]}
}

// veoExtras adds a last frame and reference images ("asset" references:
// a subject to keep) to a Veo instance, for the models that take them.
func veoExtras(ctx context.Context, inst map[string]any, extra []provider.Input) error {
	var refs []any
	for i := range extra {
		x := &extra[i]
		if x.Role != provider.RoleLastFrame && x.Role != provider.RoleReference {
			continue
		}
		img, err := inline(ctx, x)
		if err != nil {
			return err
		}
		if x.Role == provider.RoleLastFrame {
			inst["lastFrame"] = veoImage(img)
		} else {
			refs = append(refs, map[string]any{"image": veoImage(img), "referenceType": "asset"})
		}
	}
	if len(refs) > 0 {
		inst["referenceImages"] = refs
	}
	return nil
}
