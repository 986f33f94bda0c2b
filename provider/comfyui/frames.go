package comfyui

import (
	"fmt"
	"math"
	"regexp"
	"slices"
)

// A video workflow's durationSeconds sets its frame count: seconds × the
// workflow's frame rate, rounded to a count the model takes.
//
// The frame count and frame rate nodes detected, and their bounds, are
// ComfyUI's own (Comfy-Org/ComfyUI comfy_extras at a125cd84, 2025-10-12):
// SVD_img2vid_Conditioning's video_frames (1 to 4096, any count,
// nodes_video_model.py); the latent video nodes' length, in steps of 4
// from 1 for Wan and HunyuanVideo (nodes_wan.py, nodes_hunyuan.py), of 8
// for LTXV and Cosmos (nodes_lt.py, nodes_cosmos.py), of 6 from 7 for
// Mochi (nodes_mochi.py), at most MAX_RESOLUTION (16384). The frame rate
// is the saved video's first: CreateVideo's and SaveAnimatedWEBP's fps,
// VideoHelperSuite's VHS_VideoCombine frame_rate; else a conditioning
// node's (SVD's fps, LTXVConditioning's frame_rate).

// FrameRule turns a duration into a frame count.
type FrameRule struct {
	FPS      float64
	Step     int // frames are Step×n+1 when Step > 1
	Min, Max int
	Default  int // the workflow's own frame count
}

// maxSeconds is generation.MaxDurationSeconds: no longer duration is
// offered.
const maxSeconds = 60

var (
	latentVideo = regexp.MustCompile(`(?i)video|wan|hunyuan|ltxv|cosmos|mochi`)
	step8       = regexp.MustCompile(`(?i)ltxv|cosmos`)
	mochi       = regexp.MustCompile(`(?i)mochi`)
)

// fpsInputs are the inputs that hold a frame rate.
var fpsInputs = []string{"fps", "frame_rate"}

// detectFrames finds the frame count input and the frame rate input.
func detectFrames(g map[string]Node, order []string) (frames, fps string) {
	for _, id := range order {
		n := g[id]
		if v, ok := literal(n, "video_frames"); ok && jsonType(v) == "number" {
			frames = id + ".video_frames"
			break
		}
		if v, ok := literal(n, "length"); ok && jsonType(v) == "number" && latentVideo.MatchString(n.ClassType) {
			frames = id + ".length"
			break
		}
	}
	if frames == "" {
		return "", ""
	}
	for _, saver := range []bool{true, false} { // the saved video's rate first
		for _, id := range order {
			n := g[id]
			if saver != (videoSavers[n.ClassType] || n.ClassType == "CreateVideo" || imageSavers[n.ClassType]) {
				continue
			}
			for _, in := range fpsInputs {
				if v, ok := literal(n, in); ok && jsonType(v) == "number" {
					return frames, id + "." + in
				}
			}
		}
	}
	return frames, ""
}

// frameRule reads the frame rate and the bounds: the mapping's, else the
// frame count node's own.
func (w *Workflow) frameRule(mf mappingFile) (FrameRule, error) {
	node, in, _ := splitRef(w.Map.Frames)
	n := w.graph[node]
	def, _ := n.Inputs[in].(float64)
	fn, fin, _ := splitRef(w.Map.FPS)
	fps, _ := w.graph[fn].Inputs[fin].(float64)
	if fps <= 0 || math.IsInf(fps, 0) {
		return FrameRule{}, fmt.Errorf("the frame rate %s is not a positive number", w.Map.FPS)
	}
	r := FrameRule{FPS: fps, Step: 1, Min: 1, Max: 4096, Default: int(def)}
	if in == "length" {
		r.Step, r.Max = 4, 16384
		switch cls := n.ClassType; {
		case step8.MatchString(cls):
			r.Step = 8
		case mochi.MatchString(cls):
			r.Step, r.Min = 6, 7
		}
	}
	if mf.FrameStep > 0 {
		r.Step = mf.FrameStep
	}
	if mf.MinFrames > 0 {
		r.Min = mf.MinFrames
	}
	if mf.MaxFrames > 0 {
		r.Max = mf.MaxFrames
	}
	if r.Min > r.Max {
		return FrameRule{}, fmt.Errorf("minFrames %d is more than maxFrames %d", r.Min, r.Max)
	}
	return r, nil
}

// count is the frame count of a duration: seconds × FPS, to the nearest
// count of the model's step.
func (r FrameRule) count(seconds int) int {
	raw := float64(seconds) * r.FPS
	if r.Step > 1 {
		return int(math.Round((raw-1)/float64(r.Step)))*r.Step + 1
	}
	return int(math.Round(raw))
}

func (r FrameRule) within(n int) bool { return n >= r.Min && n <= r.Max }

// frames is count, or an error beyond the model's bounds.
func (r FrameRule) frames(seconds int) (int, error) {
	n := r.count(seconds)
	if !r.within(n) {
		return 0, fmt.Errorf("durationSeconds %d is %d frames at %g fps; the model takes %s (%s)", seconds, n, r.FPS, r.bounds(), secondsRange(r.offered()))
	}
	return n, nil
}

// bounds says which frame counts the model takes.
func (r FrameRule) bounds() string {
	if r.Step > 1 {
		return fmt.Sprintf("%d×n+1 frames from %d to %d", r.Step, r.Min, r.Max)
	}
	return fmt.Sprintf("%d to %d frames", r.Min, r.Max)
}

// offered are the whole seconds within the bounds, up to maxSeconds.
func (r FrameRule) offered() []int {
	var out []int
	for s := 1; s <= maxSeconds; s++ {
		if r.within(r.count(s)) {
			out = append(out, s)
		}
	}
	return out
}

func secondsRange(secs []int) string {
	if len(secs) == 0 {
		return "no whole second fits"
	}
	if len(secs) == 1 {
		return fmt.Sprintf("%d s", secs[0])
	}
	return fmt.Sprintf("%d to %d s", secs[0], secs[len(secs)-1])
}

// durations are the durations offered: the mapping's (each within the
// bounds), else every whole second within them, the workflow's own
// first.
func (r FrameRule) durations(mapped []int) ([]int, error) {
	if len(mapped) > 0 {
		for _, s := range mapped {
			if _, err := r.frames(s); err != nil {
				return nil, fmt.Errorf("the mapping's durations: %v", err)
			}
		}
		return mapped, nil
	}
	all := r.offered()
	if len(all) == 0 {
		return nil, fmt.Errorf("no whole second fits %s at %g fps", r.bounds(), r.FPS)
	}
	own := max(int(math.Round(float64(r.Default)/r.FPS)), 1)
	if i := slices.Index(all, own); i > 0 {
		all = append([]int{own}, slices.Delete(all, i, i+1)...)
	}
	return all, nil
}
