package comfyui

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestComfyDuration: the shipped image-to-video workflow's durationSeconds
// sets SVD's video_frames from its 7 fps, within the 25 frames its mapping
// allows; describe_model says so; the frame count reaches ComfyUI.
func TestComfyDuration(t *testing.T) {
	r := newRig(t, 1, emulator.ComfyOptions{}, Config{NoWebsocket: true})
	w, _ := r.p.Workflow("comfyui:image-to-video")
	if w.Map.Frames != "12.video_frames" || w.Map.FPS != "26.fps" || !slices.Equal(w.Model.Durations, []int{2, 1, 3}) {
		t.Fatalf("mapping %s / %s, durations %v", w.Map.Frames, w.Map.FPS, w.Model.Durations)
	}
	d, _ := r.p.DescribeModel("comfyui:image-to-video")
	if d.Mapping.DurationSeconds != "12.video_frames = seconds × 7 fps (26.fps), 1 to 25 frames" || !slices.Equal(d.Durations, []int{2, 1, 3}) {
		t.Fatalf("describe_model: %q %v", d.Mapping.DurationSeconds, d.Durations)
	}
	for _, f := range d.Input {
		if f.Name == "12.video_frames" || f.Name == "26.fps" {
			t.Fatalf("input may set %s", f.Name)
		}
	}
	if err := w.CheckInput(map[string]any{"26.fps": 24.0}); err == nil || !strings.Contains(err.Error(), "durationSeconds") {
		t.Fatalf("setting the frame rate: %v", err)
	}
	for _, tc := range []struct {
		seconds int
		frames  float64
		err     string
	}{
		{0, 14, ""}, // the workflow's own
		{1, 7, ""},
		{3, 21, ""},
		{4, 0, "durationSeconds 4 is 28 frames at 7 fps; the model takes 1 to 25 frames (1 to 3 s)"},
	} {
		key := "gen-" + string(rune('a'+tc.seconds))
		job, err := r.p.Submit(context.Background(), provider.Request{IdempotencyKey: key, Model: w.Model, DurationSeconds: tc.seconds, InputImage: pngInput(64, 64, 1)})
		if tc.err != "" {
			var perm *provider.PermanentError
			if !errors.As(err, &perm) || !strings.Contains(perm.Message, tc.err) {
				t.Fatalf("%d s: %v, want %q", tc.seconds, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%d s: %v", tc.seconds, err)
		}
		if got, _ := r.comfy[0].Input(job.ID, "12", "video_frames"); got != tc.frames {
			t.Fatalf("%d s: %v frames queued, want %v", tc.seconds, got, tc.frames)
		}
	}
}

// TestComfyFrameDetection: the frame count and rate of common video nodes
// are found, with their model's step and bounds; a mapping that cannot
// work is refused at load.
func TestComfyFrameDetection(t *testing.T) {
	const wan = `{"1":{"class_type":"WanImageToVideo","inputs":{"length":81,"width":832,"height":480,"batch_size":1}},
		"2":{"class_type":"VHS_VideoCombine","inputs":{"images":["1",0],"frame_rate":16,"filename_prefix":"x"}}}`
	const ltxv = `{"1":{"class_type":"EmptyLTXVLatentVideo","inputs":{"length":97,"width":768,"height":512,"batch_size":1}},
		"2":{"class_type":"LTXVConditioning","inputs":{"positive":["3",0],"frame_rate":24}},
		"4":{"class_type":"SaveWEBM","inputs":{"images":["1",0],"filename_prefix":"x"}}}`
	for _, tc := range []struct {
		name, graph string
		mf          mappingFile
		frames, fps string
		durations   []int
		seconds     int
		want        int
		err         string
	}{
		{"wan: 4n+1 frames", wan, mappingFile{}, "1.length", "2.frame_rate", nil, 3, 49, ""}, // 48 → 49
		{"wan: its own 5 s first", wan, mappingFile{}, "1.length", "2.frame_rate", []int{5, 1, 2}, 5, 81, ""},
		{"wan: maxFrames", wan, mappingFile{MaxFrames: 81}, "1.length", "2.frame_rate", []int{5, 1, 2, 3, 4}, 6, 0, "97 frames at 16 fps; the model takes 4×n+1 frames from 1 to 81 (1 to 5 s)"},
		{"ltxv: 8n+1 frames at the conditioning's rate", ltxv, mappingFile{}, "1.length", "2.frame_rate", []int{4, 1, 2}, 2, 49, ""},
		{"mapped durations", wan, mappingFile{Durations: []int{2, 4}}, "1.length", "2.frame_rate", []int{2, 4}, 4, 65, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWorkflow("v", []byte(tc.graph), tc.mf)
			if err != nil {
				t.Fatal(err)
			}
			if w.Map.Frames != tc.frames || w.Map.FPS != tc.fps || w.Model.Kind != provider.KindVideo {
				t.Fatalf("detected %s / %s (%s)", w.Map.Frames, w.Map.FPS, w.Model.Kind)
			}
			if !slices.Equal(w.Model.Durations[:min(len(tc.durations), len(w.Model.Durations))], tc.durations) {
				t.Fatalf("durations %v, want %v first", w.Model.Durations, tc.durations)
			}
			n, err := w.Frames.frames(tc.seconds)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || n != tc.want {
				t.Fatalf("%d s: %d frames (%v), want %d", tc.seconds, n, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, graph string
		mf          mappingFile
		want        string
	}{
		{"frames without a rate", `{"1":{"class_type":"SVD_img2vid_Conditioning","inputs":{"video_frames":14}},"2":{"class_type":"SaveVideo","inputs":{"video":["1",0]}}}`,
			mappingFile{Mapping: Mapping{Frames: "1.video_frames"}}, "needs fps"},
		{"durations beyond the bounds", wan, mappingFile{Durations: []int{10}, MaxFrames: 81}, "the mapping's durations: durationSeconds 10 is 161 frames"},
		{"min above max", wan, mappingFile{MinFrames: 90, MaxFrames: 81}, "minFrames 90 is more than maxFrames 81"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewWorkflow("v", []byte(tc.graph), tc.mf); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
