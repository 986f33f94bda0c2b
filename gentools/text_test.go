package gentools

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// repeated returns a word (letters only, any case; short words such as
// "the" and "on" do not count) said twice in s.
func repeated(s string) string {
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && r != '_' }) {
		if len(w) <= 3 {
			continue
		}
		if seen[w] {
			return w
		}
		seen[w] = true
	}
	return ""
}

func checkLine(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("line\n got %q\nwant %q", got, want)
	}
	if strings.ContainsAny(got, "\n\r") || len([]rune(got)) > maxLineChars {
		t.Errorf("not one short line: %q", got)
	}
	if w := repeated(got); w != "" {
		t.Errorf("%q says %q twice", got, w)
	}
}

func TestSummary(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	in := func(d time.Duration) string { return isoTime(now.Add(d)) }
	png := func(bytes int64) OutputView {
		return OutputView{MimeType: "image/png", Width: 1024, Height: 576, Bytes: bytes, ExpiresAt: in(15 * time.Minute)}
	}
	yes := true
	cases := []struct {
		name string
		v    GenerationView
		want string
	}{
		{"one image", GenerationView{Status: "completed", Kind: "image", Outputs: []OutputView{png(44_000)}},
			"Done: 1 image (1024×576 PNG, 44 KB), link valid 15 min"},
		{"two images", GenerationView{Status: "completed", Kind: "image", Outputs: []OutputView{png(44_000), png(51_200)}},
			"Done: 2 images (1024×576 PNG, 95 KB in all), links valid 15 min"},
		{"mixed formats", GenerationView{Status: "completed", Kind: "image", Outputs: []OutputView{png(44_000),
			{MimeType: "image/jpeg", Width: 512, Height: 512, Bytes: 900, ExpiresAt: in(2 * time.Hour)}}},
			"Done: 2 images (45 KB in all), links valid 15 min"},
		{"video", GenerationView{Status: "completed", Kind: "video", Outputs: []OutputView{{MimeType: "image/gif", Width: 640, Height: 360,
			DurationSeconds: 4, Bytes: 1_234_567, ExpiresAt: in(24 * time.Hour)}}},
			"Done: 1 video (640×360 GIF, 4 s, 1.2 MB), link valid 24 h"},
		{"links about to expire", GenerationView{Status: "completed", Kind: "image", Outputs: []OutputView{{MimeType: "image/webp", Bytes: 999, ExpiresAt: in(10 * time.Second)}}},
			"Done: 1 image (WEBP, 999 bytes), link valid under a minute"},
		{"outputs expired", GenerationView{Status: "completed", Kind: "image", OutputsExpired: true},
			"Done earlier; its outputs have since expired and were deleted"},
		{"provider refusal", GenerationView{Status: "failed", Error: &ErrorView{Kind: "provider", Message: "the provider refused the prompt (safety filter)"}},
			"Failed: the provider refused the prompt (safety filter)"},
		{"message on lines", GenerationView{Status: "failed", Error: &ErrorView{Kind: "provider", Message: "bad input:\n  width\tmust be even"}},
			"Failed: bad input: width must be even"},
		{"internal", GenerationView{Status: "failed", Error: &ErrorView{Kind: "internal", Message: "output storage unreachable for 10m0s"}},
			"Failed inside darkroom: output storage unreachable for 10m0s"},
		{"cancelled", GenerationView{Status: "cancelled"}, "Cancelled; its credits were refunded"},
		{"expired reservation", GenerationView{Status: "failed", Error: &ErrorView{Kind: "expired", Message: "its mask never came: nobody called upload_input within 30m0s"}},
			"Failed: its mask never came: nobody called upload_input within 30m0s"},
		{"awaiting upload", GenerationView{Status: "reserved", UploadRequired: true},
			"Waiting for an upload: call upload_input with this generationId"},
		{"awaiting a mask", GenerationView{Status: "reserved", UploadRequired: true, awaits: "role mask"},
			"Waiting for an upload: call upload_input with this generationId and role mask"},
		{"awaiting two roles", GenerationView{Status: "reserved", UploadRequired: true, awaits: "roles image and mask (one at a time)"},
			"Waiting for an upload: call upload_input with this generationId and roles image and mask (one at a time)"},
		{"awaiting approval", GenerationView{Status: "reserved", Credits: 25}, "Waiting for approval to spend 25 credits"},
		{"queued", GenerationView{Status: "queued", provider: "replicate"}, "Working: queued at replicate"},
		{"running", GenerationView{Status: "running", Progress: 0.4, provider: "replicate"}, "Working: 40% (running on replicate)"},
		{"local", GenerationView{Status: "running", Progress: 0.05, provider: "local"}, "Working: 5% (running on the local provider)"},
		{"wait ended first", GenerationView{Status: "running", Progress: 0.4, provider: "fal", TimedOut: &yes},
			"Working: 40% (running on fal); not finished yet, call wait_generation again (never generate twice)"},
		{"cancel asked", GenerationView{Status: "running", Progress: 0.4, provider: "fal", CancelRequested: true},
			"Cancelling: 40% (running on fal), asked to stop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkLine(t, tc.v.summary(now), tc.want) })
	}

	long := GenerationView{Status: "failed", Error: &ErrorView{Kind: "provider", Message: strings.Repeat("x", 2*maxLineChars)}}
	if got := long.summary(now); len([]rune(got)) != maxLineChars || !strings.HasSuffix(got, "…") {
		t.Errorf("long message: %d runes", len([]rune(got)))
	}
}

// TestResultBlocks: the first block is the line, the second the JSON of
// structuredContent, then the outputs.
func TestResultBlocks(t *testing.T) {
	v := &GenerationView{GenerationID: "g1", Status: "completed", Kind: "image", Outputs: []OutputView{
		{URL: "https://x/files/a", MimeType: "image/png", Width: 8, Height: 8, Bytes: 100, ExpiresAt: isoTime(time.Now().Add(15 * time.Minute))}}}
	res := viewResult(v)
	line, ok0 := res.Content[0].(*mcp.TextContent)
	js, ok1 := res.Content[1].(*mcp.TextContent)
	if !ok0 || !ok1 {
		t.Fatalf("content %T %T", res.Content[0], res.Content[1])
	}
	checkLine(t, line.Text, "Done: 1 image (8×8 PNG, 100 bytes), link valid 15 min")
	if string(res.StructuredContent.(json.RawMessage)) != js.Text || !json.Valid([]byte(js.Text)) {
		t.Errorf("second block %q is not the structured content", js.Text)
	}
	if _, ok := res.Content[2].(*mcp.ResourceLink); !ok {
		t.Errorf("third block %T", res.Content[2])
	}
}

func TestToolLines(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	models := []provider.Model{{Kind: provider.KindImage, Credits: 3}, {Kind: provider.KindImage, Credits: 25}, {Kind: provider.KindVideo, Credits: 80}}
	checkLine(t, modelsLine(models), "3 models (2 image, 1 video) at 3–80 credits; pass a modelId to generate")
	checkLine(t, modelsLine(models[:1]), "1 model (1 image) at 3 credits each; pass a modelId to generate")
	checkLine(t, outputLine(0, "image", OutputView{MimeType: "image/png", Width: 1024, Height: 576, Bytes: 44_000, ExpiresAt: isoTime(now.Add(15 * time.Minute))}, now),
		"Output 0: image (1024×576 PNG, 44 KB, link valid 15 min)")
	views := []*GenerationView{{Status: "completed"}, {Status: "completed"}, {Status: "running"}, {Status: "failed"}}
	checkLine(t, generationsLine(views), "4 generations: 2 done, 1 working, 1 failed")
	checkLine(t, generationsLine(nil), "No generations")
}
