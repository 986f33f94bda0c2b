package local

import (
	"maps"
	"slices"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Name is the provider's id in darkroom's catalog.
const Name = "local"

// Output sizes. The long side is fixed and the short side is rounded to an
// even number, because H.264 with yuv420p needs even dimensions:
//
//	ratio  image       video
//	1:1    1024×1024   480×480
//	16:9   1024×576    480×270
//	9:16   576×1024    270×480
//	4:3    1024×768    480×360
//	3:4    768×1024    360×480
//	21:9   1024×438    480×206
const (
	imageLongSide = 1024
	videoLongSide = 480
)

// aspectRatios lists every ratio the local models offer; the first is the
// default when a request leaves it empty.
var aspectRatios = []string{"1:1", "16:9", "9:16", "4:3", "3:4", "21:9"}

var ratioParts = map[string][2]int{
	"1:1": {1, 1}, "16:9": {16, 9}, "9:16": {9, 16},
	"4:3": {4, 3}, "3:4": {3, 4}, "21:9": {21, 9},
}

// frameSize returns the pixel size for ratio with the given long side.
func frameSize(ratio string, long int) (w, h int) {
	p := ratioParts[ratio]
	short := func(a, b int) int { return (long*b + a) / (2 * a) * 2 } // round(long*b/a) to even
	if p[0] >= p[1] {
		return long, short(p[0], p[1])
	}
	return short(p[1], p[0]), long
}

// editLongSide caps an edit's output: an edit keeps its input's size and
// shape up to this long side, and is scaled down beyond it, so a 40 MP
// input costs what a 1024 px output costs (see BenchmarkMaskedEdit).
const editLongSide = imageLongSide

// Input roles and output counts. An image model with a main image edits
// it (see edit.go); reference images set any model's palette; a video's
// last frame is where its clip ends.
var (
	imageRoles = map[string]int{provider.RoleMask: 1, provider.RoleReference: 4}
	videoRoles = map[string]int{provider.RoleLastFrame: 1, provider.RoleReference: 4}
)

const (
	imageMaxCount = 4
	videoMaxCount = 2
)

// catalog is the unscaled model list; Models applies the latency scale.
var catalog = []provider.Model{
	{
		ID:               "local-sketch",
		Kind:             provider.KindImage,
		Title:            "Local sketch",
		Description:      "Flat hatched shapes on paper, drawn on this machine. Reference images set its colours. Fast and deterministic; no network.",
		Credits:          1,
		MaxCount:         imageMaxCount,
		Roles:            map[string]int{provider.RoleReference: 4},
		ExpectedDuration: time.Second,
	},
	{
		ID:                "local-photo",
		Kind:              provider.KindImage,
		Title:             "Local photo",
		Description:       "A procedural landscape (sky, sun, layered hills), drawn on this machine. With an input image it paints the landscape into it (inside the mask, if one is given); reference images set its colours. Deterministic; no network.",
		Credits:           4,
		AcceptsInputImage: true,
		MaxCount:          imageMaxCount,
		Roles:             imageRoles,
		ExpectedDuration:  3 * time.Second,
	},
	{
		ID:              "local-edit",
		Kind:            provider.KindImage,
		Title:           "Local edit",
		Description:     "Edits an input image on this machine: with a mask, repaints only where the mask is white; without one, restyles the whole image. Reference images set the new colours. Deterministic; no network.",
		Credits:         4,
		NeedsInputImage: true,
		MaxCount:        imageMaxCount,
		Roles:           imageRoles,
		// As local-photo: an edit paints the same landscape.
		ExpectedDuration: 3 * time.Second,
	},
	{
		ID:               "local-motion",
		Kind:             provider.KindVideo,
		Title:            "Local motion",
		Description:      "A looping animated landscape with drifting lights (MP4 when ffmpeg is installed, otherwise GIF); with a last frame, the clip wipes from the landscape to it. Deterministic; no network.",
		Credits:          20,
		Durations:        []int{2, 4, 6},
		MaxCount:         videoMaxCount,
		Roles:            videoRoles,
		ExpectedDuration: 20 * time.Second,
	},
	{
		ID:               "local-animate",
		Kind:             provider.KindVideo,
		Title:            "Local animate",
		Description:      "Animates an input image: it is the first frame and the background of drifting lights (MP4 when ffmpeg is installed, otherwise GIF); with a last frame, the clip wipes from the first frame to it.",
		Credits:          20,
		Durations:        []int{2, 4, 6},
		NeedsInputImage:  true,
		MaxCount:         videoMaxCount,
		Roles:            videoRoles,
		ExpectedDuration: 20 * time.Second,
	},
}

// lookup returns a fresh copy of the catalog entry for id.
func lookup(id string) (provider.Model, bool) {
	i := slices.IndexFunc(catalog, func(m provider.Model) bool { return m.ID == id })
	if i < 0 {
		return provider.Model{}, false
	}
	m := catalog[i]
	m.Provider = Name
	m.AspectRatios = slices.Clone(aspectRatios)
	m.Durations = slices.Clone(m.Durations)
	m.Roles = maps.Clone(m.Roles)
	return m, true
}
