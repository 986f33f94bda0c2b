package openai_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/openai"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// The adapter keeps its own wire code (syncjob streams the base64 images
// into the spool; the SDK's ImagesResponse holds every image whole: for
// four 3840x2160 PNGs, a 177 MB reply from a separate process, the SDK's
// Images.Generate peaked at 931 MB RSS, darkroom's Submit at 17.5 MB
// against a 15.9 MB idle test binary, measured 2026-12-07),
// so these tests hold that code and the emulator to openai-go v3.105.0's
// own types: the SDK's client, built from its param types, calls the
// emulator and decodes each reply (and each refusal) with its response
// and error types; darkroom's request for the same entry must carry the
// same fields, all of them fields of the SDK's params.

// sdkFields are the wire names of a params struct's fields.
func sdkFields(v any) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// ratioOf is the ratio the tests ask e for: its last (the first is the
// default, which would not show a size mapping that does not apply).
func ratioOf(e catalog.Entry) string { return e.AspectRatios[len(e.AspectRatios)-1] }

// sdkRequest is the entry's request at ratioOf(e), as the SDK's params.
func sdkRequest(e catalog.Entry, prompt string, count int, image, mask bool, refs int) (gen sdk.ImageGenerateParams, edit sdk.ImageEditParams) {
	size, _ := e.Input.AspectRatioValues[ratioOf(e)].(string)
	quality, _ := e.Defaults["quality"].(string)
	format, _ := e.Defaults["output_format"].(string)
	gen = sdk.ImageGenerateParams{Model: e.Endpoint, Prompt: prompt, N: sdk.Int(int64(count)), Size: sdk.ImageGenerateParamsSize(size),
		Quality: sdk.ImageGenerateParamsQuality(quality), OutputFormat: sdk.ImageGenerateParamsOutputFormat(format)}
	if image {
		edit = sdk.ImageEditParams{Model: e.Endpoint, Prompt: prompt, N: sdk.Int(int64(count)), Size: sdk.ImageEditParamsSize(size),
			Quality: sdk.ImageEditParamsQuality(quality), OutputFormat: sdk.ImageEditParamsOutputFormat(format),
			Image: sdk.ImageEditParamsImageUnion{OfFile: sdk.File(bytes.NewReader(emulator.PNG()), "image.png", "image/png")}}
		for range refs {
			edit.Image.OfFileArray = append(edit.Image.OfFileArray, sdk.File(bytes.NewReader(emulator.PNG()), "reference.png", "image/png"))
		}
		if refs > 0 { // the main image first, then the references
			edit.Image = sdk.ImageEditParamsImageUnion{OfFileArray: append([]io.Reader{edit.Image.OfFile}, edit.Image.OfFileArray...)}
		}
		if mask {
			edit.Mask = sdk.File(bytes.NewReader(emulator.PNG()), "mask.png", "image/png")
		}
	}
	return gen, edit
}

// TestSDKTypesAgree: for every curated OpenAI entry, each images call
// the emulator answers (a generation, three, an edit, a masked edit, and
// each refusal) decodes with the SDK's ImagesResponse or *openai.Error
// with no field the SDK does not know, and darkroom's request equals the
// SDK's, field for field.
func TestSDKTypesAgree(t *testing.T) {
	genFields, editFields := sdkFields(sdk.ImageGenerateParams{}), sdkFields(sdk.ImageEditParams{})
	cases := []struct {
		name, prompt string
		count        int
		image, mask  bool
		refs         int    // reference images besides the main one
		model        string // the vendor model sent, when not the entry's
		key          string // the API key, when not the right one
		rule         *emulator.Rule
		status       int    // the refusal's HTTP status (0: success)
		code, typ    string // the refusal's error.code and error.type
	}{
		{name: "generation", prompt: "a lighthouse", count: 1},
		{name: "three", prompt: "three kites", count: 3},
		{name: "edit", prompt: "add a moon", count: 1, image: true},
		{name: "masked edit", prompt: "a moon in the mask", count: 2, image: true, mask: true},
		{name: "references", prompt: "in their style", count: 1, image: true, refs: 2},
		{name: "masked edit with a reference", prompt: "the reference in the mask", count: 1, image: true, mask: true, refs: 1},
		{name: "moderation", prompt: "x [nsfw]", count: 1, status: 400, code: "moderation_blocked", typ: "image_generation_user_error"},
		{name: "quota", prompt: "x [quota]", count: 1, status: 429, code: "insufficient_quota", typ: "insufficient_quota"},
		{name: "invalid", prompt: "x [invalid]", count: 1, status: 400, code: "invalid_value", typ: "invalid_request_error"},
		{name: "retired", prompt: "a kite", count: 1, model: "gpt-image-1", status: 404, code: "model_not_found", typ: "invalid_request_error"},
		{name: "retired edit", prompt: "a kite", count: 1, image: true, model: "gpt-image-1-mini", status: 404, code: "model_not_found", typ: "invalid_request_error"},
		{name: "bad key", prompt: "a kite", count: 1, key: "sk-wrong", status: 401, code: "invalid_api_key", typ: "invalid_request_error"},
		{name: "throttled", prompt: "a kite", count: 1, rule: &emulator.Rule{Provider: "openai", Op: emulator.OpCreate, Fault: emulator.Fault429, Times: 1}, status: 429, code: "rate_limit_exceeded", typ: "requests"},
	}
	for _, e := range catalog.ForProvider(catalog.Default(), "openai") {
		for _, c := range cases {
			t.Run(e.ID+"/"+c.name, func(t *testing.T) {
				em := emulator.New(emulator.Options{Clock: emulator.NewClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))})
				t.Cleanup(em.Close)
				if c.rule != nil {
					em.Inject(*c.rule)
				}
				if c.model != "" {
					e.Endpoint = c.model
				}
				key := cmp.Or(c.key, "sk-test")
				client := sdk.NewClient(option.WithBaseURL(em.OpenAI.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
				gen, edit := sdkRequest(e, c.prompt, c.count, c.image, c.mask, c.refs)
				// darkroom streams a GPT image model's call of one image,
				// asking for partial images (stream.go): the SDK's
				// streaming call is then the one to agree with.
				streamed := c.count == 1
				var res *sdk.ImagesResponse
				var err error
				var partials int
				switch {
				case streamed:
					gen.PartialImages, edit.PartialImages = sdk.Int(openai.DefaultPartialImages), sdk.Int(openai.DefaultPartialImages)
					res, partials, err = sdkStream(client, c.image, gen, edit)
				case c.image:
					res, err = client.Images.Edit(context.Background(), edit)
				default:
					res, err = client.Images.Generate(context.Background(), gen)
				}
				if c.status != 0 {
					var apiErr *sdk.Error
					if !errors.As(err, &apiErr) || apiErr.StatusCode != c.status || apiErr.Code != c.code || apiErr.Type != c.typ || apiErr.Message == "" {
						t.Fatalf("SDK error %#v, want %d %s %s", err, c.status, c.code, c.typ)
					}
					if extra := apiErr.JSON.ExtraFields; len(extra) != 0 {
						t.Fatalf("error fields the SDK does not know: %v", slices.Collect(maps.Keys(extra)))
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if streamed && partials != openai.DefaultPartialImages {
					t.Fatalf("the SDK read %d partial images, want %d", partials, openai.DefaultPartialImages)
				}
				if extra := res.JSON.ExtraFields; len(extra) != 0 || len(res.Usage.JSON.ExtraFields) != 0 {
					t.Fatalf("reply fields the SDK does not know: %v, usage %v", slices.Collect(maps.Keys(extra)), slices.Collect(maps.Keys(res.Usage.JSON.ExtraFields)))
				}
				if len(res.Data) != c.count || !streamed && !res.JSON.Created.Valid() {
					t.Fatalf("SDK read %d images, want %d: %s", len(res.Data), c.count, res.RawJSON())
				}
				for _, img := range res.Data {
					b, err := base64.StdEncoding.DecodeString(img.B64JSON)
					if err != nil || !bytes.Equal(b, emulator.PNG()) || len(img.JSON.ExtraFields) != 0 {
						t.Fatalf("image %v, fields %v", err, img.JSON.ExtraFields)
					}
				}

				// darkroom's request for the same entry, to the same emulator.
				p, err := openai.New(openai.Config{Key: key, BaseURL: em.OpenAI.URL, Models: []catalog.Entry{e},
					Spool: provider.DirSpool(t.TempDir()), RequestsPerMinute: -1, Now: em.Now})
				if err != nil {
					t.Fatal(err)
				}
				req := withInputs(provider.Request{IdempotencyKey: "g-" + c.name, Model: e.Model(), Prompt: c.prompt, AspectRatio: ratioOf(e), Count: c.count}, c.image, c.mask, c.refs)
				if _, err := p.Submit(context.Background(), req); err != nil {
					t.Fatal(err)
				}
				ins := em.Inputs("openai")
				if len(ins) != 2 {
					t.Fatalf("%d requests recorded", len(ins))
				}
				want, got := ins[0], ins[1]
				if c.image {
					// The multipart form carries every value as text.
					want, got = texts(want), texts(got)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("darkroom sent %v\nthe SDK sent %v", got, want)
				}
				known := genFields
				if c.image {
					known = editFields
				}
				for k := range got {
					// "stream" is the streaming methods' own (GenerateStreaming
					// sets it, EditStreaming adds the form field).
					if !known[strings.TrimSuffix(k, "[]")] && !(streamed && k == "stream") {
						t.Fatalf("darkroom sends %q, not a field of the SDK's params", k)
					}
				}
			})
		}
	}
}

// sdkStream makes the call with the SDK's streaming method and reads
// its events with the SDK's types: how many partial images came, and the
// completed images as an ImagesResponse's data. An event field the SDK
// does not know is an error.
func sdkStream(client sdk.Client, image bool, gen sdk.ImageGenerateParams, edit sdk.ImageEditParams) (*sdk.ImagesResponse, int, error) {
	if image {
		return readEvents(client.Images.EditStreaming(context.Background(), edit), func(u sdk.ImageEditStreamEventUnion) (sdkEvent, error) {
			switch ev := u.AsAny().(type) {
			case sdk.ImageEditPartialImageEvent:
				return sdkEvent{partial: true, index: ev.PartialImageIndex, extra: ev.JSON.ExtraFields}, nil
			case sdk.ImageEditCompletedEvent:
				return sdkEvent{b64: ev.B64JSON, extra: ev.JSON.ExtraFields, usageExtra: ev.Usage.JSON.ExtraFields}, nil
			}
			return sdkEvent{}, fmt.Errorf("an event the SDK does not know: %s", u.RawJSON())
		})
	}
	return readEvents(client.Images.GenerateStreaming(context.Background(), gen), func(u sdk.ImageGenStreamEventUnion) (sdkEvent, error) {
		switch ev := u.AsAny().(type) {
		case sdk.ImageGenPartialImageEvent:
			return sdkEvent{partial: true, index: ev.PartialImageIndex, extra: ev.JSON.ExtraFields}, nil
		case sdk.ImageGenCompletedEvent:
			return sdkEvent{b64: ev.B64JSON, extra: ev.JSON.ExtraFields, usageExtra: ev.Usage.JSON.ExtraFields}, nil
		}
		return sdkEvent{}, fmt.Errorf("an event the SDK does not know: %s", u.RawJSON())
	})
}

// sdkEvent is what the test reads of one streamed event, from either
// union (generations' or edits').
type sdkEvent struct {
	partial           bool
	index             int64
	b64               string
	extra, usageExtra map[string]respjson.Field
}

func readEvents[U any](st *ssestream.Stream[U], read func(U) (sdkEvent, error)) (*sdk.ImagesResponse, int, error) {
	defer st.Close()
	res := &sdk.ImagesResponse{}
	partials := 0
	for st.Next() {
		ev, err := read(st.Current())
		if err != nil {
			return nil, 0, err
		}
		if len(ev.extra) != 0 || len(ev.usageExtra) != 0 {
			return nil, 0, fmt.Errorf("event fields the SDK does not know: %v %v", slices.Collect(maps.Keys(ev.extra)), slices.Collect(maps.Keys(ev.usageExtra)))
		}
		if ev.partial {
			if ev.index != int64(partials) {
				return nil, 0, fmt.Errorf("partial image %d came as number %d", ev.index, partials)
			}
			partials++
			continue
		}
		res.Data = append(res.Data, sdk.Image{B64JSON: ev.b64})
	}
	return res, partials, st.Err()
}

func texts(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// TestSDKReadsModelList: the emulator's model list (what darkroom models
// check and the models refresh read) decodes with the SDK's own
// Models.List into the same ids darkroom's Listed finds, with no field
// the SDK does not know; a model OpenAI withdraws leaves both.
func TestSDKReadsModelList(t *testing.T) {
	em := emulator.New(emulator.Options{})
	t.Cleanup(em.Close)
	em.Unlist("openai", "gpt-image-2")
	shutdown := time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC)
	em.AnnounceShutdown("gpt-image-2-2026-04-21", shutdown)
	client := sdk.NewClient(option.WithBaseURL(em.OpenAI.URL+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]time.Time{} // by id, the shutdown date the SDK read
	for _, m := range page.Data {
		if len(m.JSON.ExtraFields) != 0 || m.Object != "model" {
			t.Fatalf("model %s: fields the SDK does not know %v, object %q", m.ID, slices.Collect(maps.Keys(m.JSON.ExtraFields)), m.Object)
		}
		ids[m.ID] = m.ShutdownDate
	}
	if !ids["gpt-image-2-2026-04-21"].Equal(shutdown) {
		t.Fatalf("the SDK read shutdown date %v; want %v", ids["gpt-image-2-2026-04-21"], shutdown)
	}
	p, err := openai.New(openai.Config{Key: "sk-test", BaseURL: em.OpenAI.URL, Spool: provider.DirSpool(t.TempDir()), RequestsPerMinute: -1})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := p.Listed(context.Background())
	if err != nil || len(listed) == 0 {
		t.Fatalf("Listed: %v %v", listed, err)
	}
	for v, m := range listed {
		day, ok := ids[v]
		if m.Listed != ok || !m.ShutdownDate.Equal(day) {
			t.Errorf("%s: darkroom says %+v, the SDK read listed %v, shutting down %v", v, m, ok, day)
		}
	}
	if listed["gpt-image-2"].Listed || !listed["gpt-image-2-2026-04-21"].Listed {
		t.Fatalf("withdrawn gpt-image-2, or its snapshot: %v", listed)
	}
}
