package gentools_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pngData is a w×h PNG, white inside the left half (a mask's "change
// here") and black elsewhere, as base64.
func pngData(t *testing.T, w, h int) string {
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

type fullView struct {
	GenerationID   string                `json:"generationId"`
	Status         string                `json:"status"`
	StatusMessage  string                `json:"statusMessage"`
	Credits        int64                 `json:"credits"`
	UploadRequired bool                  `json:"uploadRequired"`
	Outputs        []gentools.OutputView `json:"outputs"`
	Inputs         []gentools.InputView  `json:"inputs"`
}

func callView(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) fullView {
	t.Helper()
	var v fullView
	decode(t, tool, call(t, cs, tool, args), &v)
	return v
}

// TestInputsJourney is the newcomer's path on the embedded default: three
// variations in one call, a masked edit of one of them (its mask uploaded
// after the call), and a clip from a first to a last frame, each input an
// earlier output used where it is.
func TestInputsJourney(t *testing.T) {
	r := newRig(t, nil)
	r.startRunner()
	_, cs := r.session("alice")

	three := callView(t, cs, "generate", map[string]any{"modelId": "local-photo", "prompt": "dunes", "aspectRatio": "16:9", "count": 3, "wait": true})
	if three.Status != "completed" || len(three.Outputs) != 3 || three.Credits != 3*4 {
		t.Fatalf("three variations: %s, %d outputs, %d credits; want completed, 3, 12", three.Status, len(three.Outputs), three.Credits)
	}
	seen := map[string]bool{}
	for _, o := range three.Outputs {
		seen[o.SHA256] = true
	}
	if len(seen) != 3 {
		t.Errorf("the 3 variations have %d distinct files", len(seen))
	}
	second := gentools.OutputURI(three.GenerationID, 1)
	w, h := three.Outputs[1].Width, three.Outputs[1].Height

	edit := callView(t, cs, "generate", map[string]any{"modelId": "local-edit", "prompt": "a lake", "aspectRatio": "16:9",
		"inputs": []any{map[string]any{"role": "image", "uri": second}, map[string]any{"role": "mask"}}})
	if edit.Status != "reserved" || !edit.UploadRequired || !strings.Contains(edit.StatusMessage, "mask") {
		t.Fatalf("edit waiting for its mask: %+v", edit)
	}
	bad := call(t, cs, "upload_input", map[string]any{"generationId": edit.GenerationID, "role": "mask", "image": map[string]any{"data": pngData(t, w/2, h)}})
	if !bad.IsError || !strings.Contains(text(bad), "a mask must be the size of the image it masks") {
		t.Fatalf("a mask of another size: isError=%v %s", bad.IsError, text(bad))
	}
	callView(t, cs, "upload_input", map[string]any{"generationId": edit.GenerationID, "role": "mask", "image": map[string]any{"data": pngData(t, w, h)}})
	edited := callView(t, cs, "wait_generation", map[string]any{"generationId": edit.GenerationID})
	if edited.Status != "completed" || len(edited.Outputs) != 1 {
		t.Fatalf("edit: %s with %d outputs", edited.Status, len(edited.Outputs))
	}
	if len(edited.Inputs) != 2 || edited.Inputs[0].Role != "image" || edited.Inputs[0].From != second || edited.Inputs[1].Role != "mask" || edited.Inputs[1].URL == "" {
		t.Errorf("edit inputs %+v: want the chained image (from %s) and the uploaded mask", edited.Inputs, second)
	}
	// Each input reads as a resource: the mask is the uploaded bytes.
	mask, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: edited.Inputs[1].URI})
	if err != nil || len(mask.Contents) != 1 || base64.StdEncoding.EncodeToString(mask.Contents[0].Blob) != pngData(t, w, h) {
		t.Errorf("reading the mask %s: %v", edited.Inputs[1].URI, err)
	}

	clip := callView(t, cs, "generate", map[string]any{"modelId": "local-animate", "prompt": "the tide comes in", "aspectRatio": "16:9", "wait": true,
		"inputs": []any{map[string]any{"role": "first_frame", "uri": gentools.OutputURI(edit.GenerationID, 0)}, map[string]any{"role": "last_frame", "uri": gentools.OutputURI(three.GenerationID, 2)}}})
	if clip.Status != "completed" || len(clip.Outputs) != 1 || !strings.HasPrefix(clip.Outputs[0].MimeType, "video/") && clip.Outputs[0].MimeType != "image/gif" {
		t.Fatalf("clip: %+v", clip)
	}
	if len(clip.Inputs) != 2 || clip.Inputs[0].Role != "first_frame" || clip.Inputs[1].Role != "last_frame" {
		t.Errorf("clip inputs %+v", clip.Inputs)
	}
}

// TestInputsRefused: inputs that cannot be used are refused before
// anything is stored or charged, and someone else's output reads exactly
// as one that does not exist.
func TestInputsRefused(t *testing.T) {
	budget := int64(1000)
	r := newRig(t, &budget)
	r.startRunner()
	_, alice := r.session("alice")
	_, bob := r.session("bob")
	own := callView(t, alice, "generate", map[string]any{"modelId": "local-sketch", "prompt": "a fox", "wait": true})
	aliceURI := gentools.OutputURI(own.GenerationID, 0)
	missingURI := gentools.OutputURI("0000000000000000000000000000000000000000", 0)
	spent := getCredits(t, bob).Spent

	uriErr := func(uri string) string {
		res := call(t, bob, "generate", map[string]any{"modelId": "local-edit", "prompt": "x", "inputs": []any{map[string]any{"role": "image", "uri": uri}}})
		if !res.IsError {
			t.Fatalf("%s accepted", uri)
		}
		return strings.ReplaceAll(text(res), uri, "URI")
	}
	if foreign, unknown := uriErr(aliceURI), uriErr(missingURI); foreign != unknown {
		t.Errorf("a foreign output reads %q, an unknown one %q", foreign, unknown)
	}

	img := map[string]any{"data": pngData(t, 64, 48)}
	ref := map[string]any{"role": "reference"}
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"mask of another size", map[string]any{"modelId": "local-edit", "prompt": "x", "inputs": []any{
			map[string]any{"role": "image", "image": img}, map[string]any{"role": "mask", "image": map[string]any{"data": pngData(t, 32, 48)}}}},
			"the mask is 32×48 pixels but its image is 64×48"},
		{"a role the model does not take", map[string]any{"modelId": "local-sketch", "prompt": "x", "inputs": []any{map[string]any{"role": "last_frame", "image": img}}},
			"local-sketch takes no last_frame input"},
		{"an unknown role", map[string]any{"modelId": "local-edit", "prompt": "x", "inputs": []any{map[string]any{"role": "style", "image": img}}},
			`inputs[0].role "style" is not image, mask, reference, first_frame or last_frame`},
		{"two masks", map[string]any{"modelId": "local-edit", "prompt": "x", "inputs": []any{
			map[string]any{"role": "image", "image": img}, map[string]any{"role": "mask", "image": img}, map[string]any{"role": "mask", "image": img}}},
			"at most 1 mask input"},
		{"uri and image", map[string]any{"modelId": "local-edit", "prompt": "x", "inputs": []any{map[string]any{"role": "image", "image": img, "uri": aliceURI}}},
			"give either uri or image, not both"},
		{"too many inputs", map[string]any{"modelId": "local-edit", "prompt": "x", "inputs": []any{ref, ref, ref, ref, ref, ref, ref, ref, ref}},
			"inputs has 9 entries; the limit is 8"},
		{"an unknown field in an input", map[string]any{"modelId": "local-edit", "prompt": "x", "inputs": []any{map[string]any{"role": "image", "url": "https://example.com/a.png"}}},
			`takes no argument "url"`},
		{"count above the model's", map[string]any{"modelId": "local-photo", "prompt": "x", "count": 5}, "count 5 is not offered by local-photo: it makes 1 to 4 outputs per call"},
		{"count 0", map[string]any{"modelId": "local-photo", "prompt": "x", "count": 0}, "count must be at least 1"},
		{"a malformed uri", map[string]any{"modelId": "local-edit", "prompt": "x", "inputs": []any{map[string]any{"role": "image", "uri": "darkroom://generations/x/outputs/zero"}}},
			"names no output of yours"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, bob, "generate", c.args)
			if !res.IsError || !strings.Contains(text(res), c.want) {
				t.Fatalf("isError=%v %q; want %q", res.IsError, text(res), c.want)
			}
		})
	}
	if n := count(t, bob); n != 0 {
		t.Errorf("refused inputs created %d generation(s)", n)
	}
	if got := getCredits(t, bob).Spent; got != spent {
		t.Errorf("refused inputs spent %d credits", got-spent)
	}
}

// TestDryRun prices a call and says what the budget and the approval rule
// would say, creating and charging nothing.
func TestDryRun(t *testing.T) {
	budget := int64(10)
	r := newRig(t, &budget)
	_, cs := r.session("alice")
	cases := []struct {
		name    string
		count   int
		credits int64
		allowed bool
	}{
		{"within the budget", 2, 8, true},
		{"over the budget", 3, 12, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, cs, "generate", map[string]any{"modelId": "local-photo", "prompt": "x", "count": c.count, "dryRun": true})
			var out struct {
				DryRun  bool  `json:"dryRun"`
				Credits int64 `json:"credits"`
				Budget  struct {
					Allowed bool   `json:"allowed"`
					Balance *int64 `json:"balance"`
				} `json:"budget"`
			}
			decode(t, "generate", res, &out)
			if !out.DryRun || out.Credits != c.credits || out.Budget.Allowed != c.allowed || out.Budget.Balance == nil || *out.Budget.Balance != 10 {
				t.Errorf("dry run %+v; want %d credits, allowed %v, balance 10", out, c.credits, c.allowed)
			}
		})
	}
	if n := count(t, cs); n != 0 {
		t.Errorf("dry runs created %d generation(s)", n)
	}
	if s := getCredits(t, cs).Spent; s != 0 {
		t.Errorf("dry runs spent %d credits", s)
	}
}
