package google_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/auth/credentials"
	"google.golang.org/genai"
	"google.golang.org/genai/interactions/models/apierrors"
	ia "google.golang.org/genai/interactions/models/interactions"
	"google.golang.org/genai/interactions/models/operations"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/google"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// The adapter keeps its own wire code for generateContent (syncjob
// streams the base64 images into the spool; the SDK's
// GenerateContentResponse holds every image whole) and builds its video
// interactions from the SDK's own types (small JSON, the same types the
// SDK's client sends). These tests hold both, and the emulator, to
// go-genai v1.79.1: the SDK's own client calls the emulator, decodes
// each reply and each refusal with its own types, and darkroom's request
// for the same entry must reach the emulator as the SDK's did.

func sdkClient(t *testing.T, em *emulator.Emulator) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "gemini_test", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: em.Google.URL + "/", APIVersion: "v1beta"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSDKTypesAgree: every curated Google entry, called by the SDK and
// by darkroom with the same prompt, ratio and images, reaches the
// emulator as the same request; every reply the SDK gets decodes with
// its own types into what darkroom reads from it.
func TestSDKTypesAgree(t *testing.T) {
	for _, e := range catalog.Default() {
		if e.Provider != "google" || e.Disabled {
			continue
		}
		t.Run(e.ID, func(t *testing.T) {
			var r *rig
			var sdk *genai.Client
			if google.Backend(e) == "vertex" {
				r = vertexRig(t, nil)
				sdk = sdkVertexClient(t, r.em)
			} else {
				r = newRig(t)
				sdk = sdkClient(t, r.em)
			}
			ctx := context.Background()
			ratio := e.AspectRatios[len(e.AspectRatios)-1]
			req := provider.Request{IdempotencyKey: "sdk-" + e.ID, Model: r.model(t, e.ID), Prompt: "a fox at dawn", AspectRatio: ratio,
				InputImage: pngInput(""), Extra: []provider.Input{*pngInput(provider.RoleReference)}}
			var want map[string]any
			switch {
			case e.API == "veo":
				req.DurationSeconds, req.Seed = e.Durations[0], 7
				req.Extra = append(req.Extra, *pngInput(provider.RoleLastFrame))
				want = sdkVeo(t, r, sdk, e, ratio)
			case e.Kind == provider.KindVideo:
				req.DurationSeconds = e.Durations[0]
				want = sdkVideo(t, r, sdk, e, ratio)
			default:
				want = sdkImage(t, r, sdk, e, ratio)
			}
			if _, err := r.p.Submit(ctx, req); err != nil {
				t.Fatal(err)
			}
			in := r.em.Inputs(map[bool]string{true: "vertex", false: "google"}[e.API == "veo"])
			got := in[len(in)-1]
			if !maps.EqualFunc(want, got, func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
				t.Fatalf("the SDK and darkroom sent different requests:\nsdk:      %v\ndarkroom: %v", want, got)
			}
		})
	}
}

// sdkVertexClient is the SDK in Vertex mode, signed in with the
// emulator's service account key.
func sdkVertexClient(t *testing.T, em *emulator.Emulator) *genai.Client {
	t.Helper()
	creds, err := credentials.DetectDefault(&credentials.DetectOptions{CredentialsJSON: em.ServiceAccountJSON(), Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend: genai.BackendVertexAI, Project: emulator.DefaultVertexProject, Location: emulator.DefaultVertexLocation, Credentials: creds,
		HTTPOptions: genai.HTTPOptions{BaseURL: em.Vertex.URL + "/", APIVersion: "v1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sdkVeo makes e's video on Vertex AI through the SDK (a first frame, a
// last frame and one reference), follows the operation with the SDK to
// its inline video, and returns the create request as the emulator saw
// it.
func sdkVeo(t *testing.T, r *rig, sdk *genai.Client, e catalog.Entry, ratio string) map[string]any {
	t.Helper()
	ctx := context.Background()
	img := &genai.Image{ImageBytes: emulator.PNG(), MIMEType: "image/png"}
	op, err := sdk.Models.GenerateVideosFromSource(ctx, e.Endpoint, &genai.GenerateVideosSource{Prompt: "a fox at dawn", Image: img}, &genai.GenerateVideosConfig{
		AspectRatio: ratio, DurationSeconds: new(int32(e.Durations[0])), Resolution: "720p", GenerateAudio: new(true), NumberOfVideos: 1, Seed: new(int32(7)),
		LastFrame: img, ReferenceImages: []*genai.VideoGenerationReferenceImage{{Image: img, ReferenceType: genai.VideoGenerationReferenceTypeAsset}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := r.em.Inputs("vertex")[0]
	r.em.Advance(time.Hour)
	done, err := sdk.Operations.GetVideosOperation(ctx, op, nil)
	if err != nil || !done.Done || done.Response == nil || len(done.Response.GeneratedVideos) != 1 || !bytes.Equal(done.Response.GeneratedVideos[0].Video.VideoBytes, emulator.MP4()) {
		t.Fatalf("the SDK read %+v, %v", done, err)
	}
	// A retired model is the SDK's APIError.
	var api genai.APIError
	if _, err := sdk.Models.GenerateVideosFromSource(ctx, "veo-3.0-generate-001", &genai.GenerateVideosSource{Prompt: "x"}, nil); !errors.As(err, &api) || api.Code != 404 || api.Status != "NOT_FOUND" {
		t.Fatalf("retired: %v", err)
	}
	return sent
}

// lastInput is the request the emulator saw last, flattened.
func lastInput(em *emulator.Emulator) map[string]any {
	in := em.Inputs("google")
	return in[len(in)-1]
}

// sdkImage makes e's image through the SDK (an edit with one reference)
// and checks the reply as the SDK decodes it; it returns that request as
// the emulator saw it.
func sdkImage(t *testing.T, r *rig, sdk *genai.Client, e catalog.Entry, ratio string) map[string]any {
	t.Helper()
	ctx := context.Background()
	contents := []*genai.Content{genai.NewContentFromParts([]*genai.Part{
		genai.NewPartFromText("a fox at dawn"),
		genai.NewPartFromBytes(emulator.PNG(), "image/png"),
		genai.NewPartFromBytes(emulator.PNG(), "image/png"),
	}, genai.RoleUser)}
	config := &genai.GenerateContentConfig{ResponseModalities: []string{"TEXT", "IMAGE"}, ImageConfig: &genai.ImageConfig{AspectRatio: ratio}}
	resp, err := sdk.Models.GenerateContent(ctx, e.Endpoint, contents, config)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, p := range resp.Candidates[0].Content.Parts {
		if p.InlineData != nil {
			got = p.InlineData.Data
		}
	}
	if !bytes.Equal(got, emulator.PNG()) || resp.Candidates[0].FinishReason != genai.FinishReasonStop {
		t.Fatalf("the SDK read %d image bytes, finish %q", len(got), resp.Candidates[0].FinishReason)
	}
	sent := lastInput(r.em)
	// A refusal as the SDK reads it: the finish reason darkroom reports.
	resp, err = sdk.Models.GenerateContent(ctx, e.Endpoint, genai.Text("a fox [nsfw]"), config)
	if err != nil || resp.Candidates[0].FinishReason != genai.FinishReasonImageSafety {
		t.Fatalf("refusal: %+v %v", resp, err)
	}
	// Errors decode into the SDK's APIError: a bad argument, a retired
	// model, Imagen's :predict.
	var api genai.APIError
	if _, err := sdk.Models.GenerateContent(ctx, e.Endpoint, genai.Text("x [invalid]"), config); !errors.As(err, &api) || api.Code != 400 || api.Status != "INVALID_ARGUMENT" {
		t.Fatalf("invalid: %v", err)
	}
	if _, err := sdk.Models.GenerateContent(ctx, "gemini-2.5-flash-image", genai.Text("a fox"), config); !errors.As(err, &api) || api.Code != 404 || api.Status != "NOT_FOUND" {
		t.Fatalf("retired: %v", err)
	}
	return sent
}

// sdkVideo makes e's video through the SDK's Interactions client (a first
// frame and one reference), follows it to its video, and checks what the
// SDK reads of a cancel and of an unknown id; it returns the create
// request as the emulator saw it.
func sdkVideo(t *testing.T, r *rig, sdk *genai.Client, e catalog.Entry, ratio string) map[string]any {
	t.Helper()
	ctx := context.Background()
	create := func(prompt string) *ia.Interaction {
		png := base64.StdEncoding.EncodeToString(emulator.PNG())
		mime := ia.ImageContentMimeTypeImagePng
		res, err := sdk.Interactions.Create(ctx, operations.CreateInteractionRequest{Body: operations.NewCreateInteractionRequestBody(ia.CreateModelInteraction{
			Model:      ia.Model(e.Endpoint),
			Background: new(true),
			Input: new(ia.NewInteractionsInput([]ia.Content{
				ia.NewContent(ia.TextContent{Text: prompt}),
				ia.NewContent(ia.ImageContent{Data: &png, MimeType: &mime}),
				ia.NewContent(ia.ImageContent{Data: &png, MimeType: &mime}),
			})),
			ResponseFormat: new(ia.NewCreateModelInteractionResponseFormat(ia.NewResponseFormat(ia.VideoResponseFormat{
				AspectRatio: ia.VideoResponseFormatAspectRatio(ratio).ToPointer(), Duration: new("8s"),
				Resolution: ia.ResolutionSevenHundredAndTwentyp.ToPointer(), Delivery: ia.VideoResponseFormatDeliveryURI.ToPointer(),
			}))),
			GenerationConfig: &ia.GenerationConfig{VideoConfig: &ia.VideoConfig{Task: ia.TaskImageToVideo.ToPointer()}},
		})})
		if err != nil || res.Interaction == nil || res.Interaction.ID == nil {
			t.Fatalf("create: %+v %v", res, err)
		}
		return res.Interaction
	}
	get := func(id string) *ia.Interaction {
		res, err := sdk.Interactions.Get(ctx, operations.GetInteractionByIDRequest{ID: id})
		if err != nil || res.Interaction == nil {
			t.Fatalf("get: %+v %v", res, err)
		}
		return res.Interaction
	}
	it := create("a fox at dawn")
	sent := lastInput(r.em)
	r.em.Advance(time.Hour)
	done := get(*it.ID)
	done.PopulateOutputProperties()
	if done.Status != ia.InteractionStatusCompleted || done.OutputVideo == nil || done.OutputVideo.URI == nil {
		t.Fatalf("the SDK read no video: %+v", done)
	}
	// The interaction's event stream (provider/google's Watch), read by
	// the SDK's own EventStream: created, then completed.
	streamed, err := sdk.Interactions.Get(ctx, operations.GetInteractionByIDRequest{ID: *it.ID, Stream: new(true)})
	if err != nil || streamed.InteractionSSEStreamEvent == nil {
		t.Fatalf("stream: %+v %v", streamed, err)
	}
	events := streamed.InteractionSSEStreamEvent
	var created, completed bool
	for events.Next() {
		ev := events.Value()
		if c := ev.GetDataInteractionCreated(); c != nil && c.Interaction.ID == *it.ID {
			created = true
		}
		if c := ev.GetDataInteractionCompleted(); c != nil && c.Interaction.ID == *it.ID && c.Interaction.Status == ia.InteractionSseEventInteractionStatusCompleted {
			completed = true
		}
	}
	if err := events.Err(); err != nil || !created || !completed {
		t.Fatalf("the SDK read the stream: created %v, completed %v, %v", created, completed, err)
	}
	events.Close()
	// A cancel answers with the cancelled interaction.
	it = create("a long take")
	res, err := sdk.Interactions.Cancel(ctx, operations.CancelInteractionByIDRequest{ID: *it.ID})
	if err != nil || res.Interaction == nil || res.Interaction.Status != ia.InteractionStatusCancelled {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	// An unknown id is the SDK's declared client error, not a body it
	// cannot read.
	var notFound *apierrors.GetInteractionByIDClientError
	if _, err := sdk.Interactions.Get(ctx, operations.GetInteractionByIDRequest{ID: "nope"}); !errors.As(err, &notFound) || notFound.HTTPMeta.Response.StatusCode != 404 {
		t.Fatalf("unknown id: %T %v", err, err)
	}
	return sent
}

// TestSDKReadsModelList: the emulator's Gemini model list, read a page at
// a time by the SDK's own Models.List, names the same models darkroom's
// Listed finds; a model Google withdraws leaves both.
func TestSDKReadsModelList(t *testing.T) {
	r := newRig(t)
	r.em.Unlist("google", "gemini-3-pro-image")
	ctx := context.Background()
	names := map[string]bool{}
	page, err := sdkClient(t, r.em).Models.List(ctx, &genai.ListModelsConfig{PageSize: 2})
	for pages := 0; err == nil; pages++ {
		for _, m := range page.Items {
			names[strings.TrimPrefix(m.Name, "models/")] = true
		}
		if pages > 10 {
			t.Fatal("the pages do not end")
		}
		page, err = page.Next(ctx)
	}
	if !errors.Is(err, genai.ErrPageDone) || len(names) < 3 {
		t.Fatalf("the SDK read %v, then %v", names, err)
	}
	listed, err := r.p.Listed(ctx)
	if err != nil || len(listed) == 0 {
		t.Fatalf("Listed: %v %v", listed, err)
	}
	for v, m := range listed {
		if ok := m.Listed; ok != names[v] || ok != (v != "gemini-3-pro-image" && !emulator.Retired("google", v)) {
			t.Errorf("%s: darkroom says listed %v, the SDK read %v (every page)", v, ok, names[v])
		}
	}
	if listed["gemini-3-pro-image"].Listed || !listed["gemini-3.1-flash-image"].Listed {
		t.Fatalf("withdrawn or kept wrongly: %v", listed)
	}
}
