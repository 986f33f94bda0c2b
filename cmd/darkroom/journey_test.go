package main

// The newcomer's journey of issue 23, from an MCP client over HTTP: find a
// current model, see its parameters and price, make three variations in
// one call, edit one of them with a mask, and animate the result between
// a first and a last frame, each input an earlier output used where it is.
// On fal and Replicate through the emulator, and on the local provider.

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
)

// journeyModels are the models of one provider's journey, and the
// provider fields the chained inputs must reach.
type journeyModels struct {
	provider, fast, fill, animate string
	image, mask, first, last      string // provider fields (empty: local)
}

func TestNewcomerJourney(t *testing.T) {
	for _, j := range []journeyModels{
		{provider: "fal", fast: "fal-flux-schnell", fill: "fal-flux-fill-pro", animate: "fal-kling-2.1-pro", image: "image_url", mask: "mask_url", first: "image_url", last: "tail_image_url"},
		{provider: "replicate", fast: "replicate-flux-schnell", fill: "replicate-flux-fill-pro", animate: "replicate-kling-2.1", image: "image", mask: "mask", first: "start_image", last: "end_image"},
		{provider: "local", fast: "local-photo", fill: "local-edit", animate: "local-animate"},
	} {
		t.Run(j.provider, func(t *testing.T) {
			t.Parallel()
			var rig *emuRig
			var s *testServer
			if j.provider == "local" {
				s = startServer(t, 0)
			} else {
				// Every model at the fast pace, its end told by webhook: the
				// journey, not the queue.
				rig = startEmulator(t, emuTiming{fast: defaultTiming.fast, slowRun: defaultTiming.fast, slowQueue: defaultTiming.fast})
				s = providerServer(t, rig, true, func(c *config) { c.FalAPIURL, c.FalOpenAPIURL = rig.Fal.URL, rig.Fal.URL })
			}
			cs := connect(t, s.url, "2026-07-28")

			// Find it and see its parameters and price.
			var found struct {
				Models []struct {
					ModelID string `json:"modelId"`
				} `json:"models"`
			}
			if res := call(t, cs, "search_models", map[string]any{"query": "flux", "kind": "image"}, &found); res.IsError && j.provider != "local" {
				t.Fatalf("search_models: %s", text(res))
			}
			var d modelschema.Description
			if res := call(t, cs, "describe_model", map[string]any{"modelId": j.fast}, &d); res.IsError || d.Credits <= 0 || d.PriceUnit == "" {
				t.Fatalf("describe_model %s: %s", j.fast, text(res))
			}
			var dry struct {
				Credits int64 `json:"credits"`
			}
			call(t, cs, "generate", map[string]any{"modelId": j.fast, "prompt": "dunes at dawn", "count": 3, "dryRun": true}, &dry)
			if dry.Credits != 3*d.Credits {
				t.Fatalf("dry run of 3 costs %d, want 3×%d", dry.Credits, d.Credits)
			}

			// Three variations in one call.
			var three genView
			res := call(t, cs, "generate", map[string]any{"modelId": j.fast, "prompt": "dunes at dawn", "count": 3, "aspectRatio": "16:9", "wait": true, "waitSeconds": 30}, &three)
			if three.Status != "completed" || len(three.Outputs) != 3 || three.Credits != dry.Credits {
				t.Fatalf("three variations: %s", text(res))
			}
			second := gentools.OutputURI(three.GenerationID, 1)
			w, h := three.Outputs[1].Width, three.Outputs[1].Height

			// Edit the second with a mask.
			var edit genView
			res = call(t, cs, "generate", map[string]any{"modelId": j.fill, "prompt": "a lake", "wait": true, "waitSeconds": 30, "inputs": []any{
				map[string]any{"role": "image", "uri": second},
				map[string]any{"role": "mask", "image": map[string]any{"data": journeyMask(t, w, h), "mimeType": "image/png"}},
			}}, &edit)
			if edit.Status != "completed" || len(edit.Outputs) != 1 {
				t.Fatalf("masked edit: %s", text(res))
			}
			if rig != nil {
				sent := lastInput(rig, j.provider)
				if !signedLink(sent[j.image]) || !signedLink(sent[j.mask]) || sent[j.image] == sent[j.mask] {
					t.Errorf("the edit reached %s with image %v and mask %v: want two signed links of ours", j.provider, sent[j.image], sent[j.mask])
				}
			}

			// Animate from the edit to the third variation.
			var clip genView
			res = call(t, cs, "generate", map[string]any{"modelId": j.animate, "prompt": "the tide comes in", "wait": true, "waitSeconds": 30, "inputs": []any{
				map[string]any{"role": "first_frame", "uri": gentools.OutputURI(edit.GenerationID, 0)},
				map[string]any{"role": "last_frame", "uri": gentools.OutputURI(three.GenerationID, 2)},
			}}, &clip)
			if clip.Status != "completed" || len(clip.Outputs) != 1 {
				t.Fatalf("animate: %s", text(res))
			}
			if rig != nil {
				sent := lastInput(rig, j.provider)
				if !signedLink(sent[j.first]) || !signedLink(sent[j.last]) {
					t.Errorf("the clip reached %s with first %v and last %v", j.provider, sent[j.first], sent[j.last])
				}
			}
		})
	}
}

func lastInput(rig *emuRig, provider string) map[string]any {
	in := rig.Inputs(provider)
	if len(in) == 0 {
		return nil
	}
	return in[len(in)-1]
}

// signedLink: one of darkroom's short-lived links (the test server's
// blob folder), never a caller's URL.
func signedLink(v any) bool {
	s, _ := v.(string)
	return strings.HasPrefix(s, "http") && strings.Contains(s, "/files/")
}

// journeyMask is a w×h mask, white (change) in its left half, as base64.
func journeyMask(t *testing.T, w, h int) string {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w / 2 {
			img.SetGray(x, y, color.Gray{Y: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}
