package catalog_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider/catalog"
)

// TestOpenAIEntries: each curated OpenAI entry asks only what openai-go
// v3.105.0's image.go documents for gpt-image-2 (ImageGenerateParams and
// ImageEditParams, since one entry makes both calls), and says where
// that came from and when.
func TestOpenAIEntries(t *testing.T) {
	es := catalog.ForProvider(catalog.Default(), "openai")
	if len(es) == 0 {
		t.Fatal("no OpenAI entries")
	}
	// Fields both calls take for gpt-image-2, with the values the SDK
	// lists for it; nil means any value of the field's type.
	takes := map[string][]any{
		"n":             nil,
		"quality":       {"low", "medium", "high", "auto"},
		"output_format": {"png", "webp", "jpeg"},
		"background":    {"opaque", "auto"}, // transparent is a preview on gpt-image-2
	}
	for _, e := range es {
		if e.Endpoint != "gpt-image-2" {
			t.Errorf("%s calls %q, not gpt-image-2", e.ID, e.Endpoint)
		}
		if !strings.Contains(e.Source, "openai-go v3.105.0 image.go") || e.Checked == "" {
			t.Errorf("%s does not say where its id, price and limits came from, or when: %q %q", e.ID, e.Source, e.Checked)
		}
		for k, v := range e.Defaults {
			allowed, ok := takes[k]
			if !ok || allowed != nil && !slices.Contains(allowed, v) {
				t.Errorf("%s sends %s=%v, which gpt-image-2 does not take on both calls", e.ID, k, v)
			}
		}
		if r := e.Roles["reference"]; 1+r.Max > 16 {
			t.Errorf("%s takes %d images on an edit; ImageEditParams.Image takes up to 16", e.ID, 1+r.Max)
		}
		// Sizes above 2560x1440 only where the entry says they are
		// experimental, to its users too.
		experimental := strings.Contains(e.Title, "experimental")
		for ratio, v := range e.Input.AspectRatioValues {
			if err := gptImage2Size(fmt.Sprint(v), experimental); err != nil {
				t.Errorf("%s %s: %v", e.ID, ratio, err)
			}
		}
	}
}

// gptImage2Size checks a size as image.go documents it for gpt-image-2:
// WIDTHxHEIGHT, both divisible by 16, aspect ratio within 1:3 to 3:1, at
// most 2560x1440's pixels (above it is "experimental"), or with
// experimental at most 3840x2160's ("the maximum supported resolution").
func gptImage2Size(s string, experimental bool) error {
	var w, h int
	if n, _ := fmt.Sscanf(s, "%dx%d", &w, &h); n != 2 || fmt.Sprintf("%dx%d", w, h) != s || w <= 0 || h <= 0 {
		return fmt.Errorf("size %q is not WIDTHxHEIGHT", s)
	}
	switch {
	case w%16 != 0 || h%16 != 0:
		return fmt.Errorf("size %q: width and height must be divisible by 16", s)
	case w > 3*h || h > 3*w:
		return fmt.Errorf("size %q: aspect ratio outside 1:3 to 3:1", s)
	case w*h > 3840*2160:
		return fmt.Errorf("size %q: above 3840x2160, the maximum", s)
	case w*h > 2560*1440 && !experimental:
		return fmt.Errorf("size %q: above 2560x1440 is experimental", s)
	}
	return nil
}

func TestGPTImage2Size(t *testing.T) {
	for s, ok := range map[string]bool{"1024x1024": true, "1536x864": true, "2560x1440": true, "1000x1000": false, "3072x1008": false, "3840x2160": false, "1024": false, "auto": false} {
		if err := gptImage2Size(s, false); (err == nil) != ok {
			t.Errorf("%s: %v", s, err)
		}
	}
	for s, ok := range map[string]bool{"3840x2160": true, "2160x3840": true, "3856x2160": false, "4096x4096": false} {
		if err := gptImage2Size(s, true); (err == nil) != ok {
			t.Errorf("experimental %s: %v", s, err)
		}
	}
}
