package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/local"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestViewerInBrowser renders darkroom's MCP Apps view in headless
// Chromium, inside the test host page (testdata/apphost: AppBridge, a
// sandboxed iframe under a strict CSP), against darkroom's real HTTP
// handler, and checks what a person would see. Screenshots go to
// $DARKROOM_ARTIFACTS (default a new temp folder; the path is logged).
func TestViewerInBrowser(t *testing.T) {
	chromium := findChromium(t)
	hostPage := buildHostPage(t)
	artifacts := os.Getenv("DARKROOM_ARTIFACTS")
	if artifacts == "" {
		var err error
		if artifacts, err = os.MkdirTemp("", "darkroom-viewer-"); err != nil {
			t.Fatal(err)
		}
	}
	artifacts = filepath.Join(artifacts, "viewer")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("viewer screenshots: %s", artifacts)

	// Video takes 5 s, an image 0.25 s; one generation in flight at a
	// time, so a second one stays queued.
	s := startServer(t, 0.25, func(c *config) { c.MaxInFlight = 1 })
	target, _ := url.Parse(s.url)
	// The darkroom behind the host page: s, but a subtest may point it at
	// another (the live preview's, over ComfyUI).
	var proxy atomic.Pointer[httputil.ReverseProxy]
	proxy.Store(httputil.NewSingleHostReverseProxy(target))
	var fixture atomic.Pointer[[]byte] // what the host page hands the view with fixture=1
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f := fixture.Load(); r.URL.Path == "/apphost/fixture.json" && f != nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(*f)
			return
		}
		if r.URL.Path == "/apphost/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(hostPage)
			return
		}
		proxy.Load().ServeHTTP(w, r) // /mcp: same origin as the host page
	}))
	t.Cleanup(front.Close)
	api := &rpcClient{t: t, url: s.url, caps: map[string]any{}}

	b := newBrowser(t, chromium)
	shot := func(name string) {
		t.Helper()
		png, err := b.screenshot()
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(filepath.Join(artifacts, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	open := func(tool string, args map[string]any, extra string) {
		t.Helper()
		js, _ := json.Marshal(args)
		u := front.URL + "/apphost/?tool=" + tool + "&args=" + url.QueryEscape(string(js)) + extra
		if err := b.navigate(u); err != nil {
			t.Fatalf("navigate: %v", err)
		}
	}

	t.Run("finished image at its real size", func(t *testing.T) {
		prompt := "a lighthouse on a cliff at dusk"
		open("generate", map[string]any{"modelId": "local-sketch", "prompt": prompt, "wait": true, "aspectRatio": "16:9"}, "")
		b.waitView(t, `document.body.dataset.status === "completed" && !!document.querySelector("#media img[data-kind=full]")?.naturalWidth`)
		var got struct {
			W, H   int
			Px     [][]int
			Prompt string
			Facts  string
		}
		b.inView(t, pixelsJS(`#media img[data-kind=full]`), &got)
		want := fetchOutput(t, api, b.resultID(t))
		if got.W != want.Bounds().Dx() || got.H != want.Bounds().Dy() {
			t.Fatalf("decoded %dx%d, the file is %v", got.W, got.H, want.Bounds().Size())
		}
		checkPixels(t, got.Px, want)
		// Today's shape: one output, no inputs, no grid.
		var shape struct {
			Figures, Captions     int
			InputsHidden, Several bool
		}
		b.inView(t, `({figures: document.querySelectorAll("#media figure").length, captions: document.querySelectorAll("#media figcaption").length,
			inputsHidden: document.getElementById("inputs").hidden, several: document.getElementById("media").classList.contains("several")})`, &shape)
		if shape.Figures != 1 || shape.Captions != 0 || !shape.InputsHidden || shape.Several {
			t.Fatalf("one output renders as %+v", shape)
		}
		if got.Prompt != prompt || !strings.Contains(got.Facts, fmt.Sprintf("%d×%d", got.W, got.H)) || !strings.Contains(got.Facts, "local-sketch") {
			t.Fatalf("prompt %q, facts %q", got.Prompt, got.Facts)
		}
		shot("image-light")

		// The result was enough: the view asked darkroom only for the bytes,
		// by resources/read of the output's own URI.
		var asked struct{ ViewCalls, Reads, ReadErrors []string }
		b.host(t, `({viewCalls: window.host.viewCalls, reads: window.host.reads, readErrors: window.host.readErrors})`, &asked)
		if len(asked.ViewCalls) != 0 || len(asked.Reads) != 1 || asked.Reads[0] != "darkroom://generations/"+b.resultID(t)+"/outputs/0" {
			t.Fatalf("the view asked for %+v", asked)
		}

		// Download opens the signed link through the host.
		b.inView(t, `document.getElementById("download").click(), true`, nil)
		var opened []string
		b.waitHost(t, `window.host.opened.length > 0`)
		b.host(t, `window.host.opened`, &opened)
		if len(opened) != 1 || !strings.HasPrefix(opened[0], s.url+"/files/") {
			t.Fatalf("opened %v", opened)
		}
	})

	// The shapes of issue 23 (several outputs, an edit's inputs), handed to
	// the view as a tool result by the host page (fixture=1), with the
	// bytes of every darkroom:// URI they name.
	useFixture := func(f viewFixture, extra ...string) {
		t.Helper()
		js, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		fixture.Store(&js)
		open("generate", nil, "&fixture=1"+strings.Join(extra, ""))
	}

	t.Run("several outputs in a grid, each with its index and download", func(t *testing.T) {
		colours := []color.RGBA{{220, 40, 40, 255}, {40, 170, 60, 255}, {40, 80, 220, 255}}
		f := newViewFixture("gen-several", "three lanterns", "local-sketch")
		for _, c := range colours {
			f.output(t, solidPNG(t, 160, 90, c), "image/png", 160, 90)
		}
		useFixture(f)
		b.waitView(t, `[...document.querySelectorAll("#media img[data-kind=full]")].filter((i) => i.naturalWidth > 0).length === 3`)
		var got struct {
			Captions, Alts, Buttons []string
			Px                      [][]int
			MainDownload, Inputs    bool
			Several                 bool
		}
		b.inView(t, `(async () => {
			const imgs = [...document.querySelectorAll("#media figure img")];
			const px = await Promise.all(imgs.map(async (img) => { await img.decode();
				const c = document.createElement("canvas"); c.width = img.naturalWidth; c.height = img.naturalHeight;
				const g = c.getContext("2d"); g.drawImage(img, 0, 0); return [...g.getImageData(80, 45, 1, 1).data.slice(0, 3)]; }));
			return {captions: [...document.querySelectorAll("#media figcaption .index")].map((e) => e.textContent),
				alts: imgs.map((i) => i.alt), buttons: [...document.querySelectorAll("#media .download-one")].map((e) => e.getAttribute("aria-label")),
				px, mainDownload: !document.getElementById("download").hidden, inputs: !document.getElementById("inputs").hidden,
				several: document.getElementById("media").classList.contains("several")}; })()`, &got)
		if !slices.Equal(got.Captions, []string{"Output 1 of 3", "Output 2 of 3", "Output 3 of 3"}) ||
			!slices.Equal(got.Buttons, []string{"Download output 1 of 3", "Download output 2 of 3", "Download output 3 of 3"}) {
			t.Fatalf("captions %q, buttons %q", got.Captions, got.Buttons)
		}
		if len(got.Alts) != 3 || got.Alts[1] != "three lanterns (output 2 of 3)" || got.MainDownload || got.Inputs || !got.Several {
			t.Fatalf("alts %q, main download %v, inputs %v, grid %v", got.Alts, got.MainDownload, got.Inputs, got.Several)
		}
		for i, c := range colours { // each output in its own place
			if p := got.Px[i]; abs(p[0]-int(c.R)) > 2 || abs(p[1]-int(c.G)) > 2 || abs(p[2]-int(c.B)) > 2 {
				t.Fatalf("output %d shows %v, want %v", i, p, c)
			}
		}
		var reads []string
		b.host(t, `window.host.reads`, &reads)
		if !slices.Equal(reads, f.outputURIs()) {
			t.Fatalf("the view read %q, want each output once: %q", reads, f.outputURIs())
		}
		shot("outputs-3")
		b.inView(t, `document.querySelector("#media figure[data-index='2'] .download-one").click(), true`, nil)
		b.waitHost(t, `window.host.opened.length > 0`)
		var opened []string
		b.host(t, `window.host.opened`, &opened)
		if len(opened) != 1 || opened[0] != f.Result.StructuredContent.Outputs[2].URL {
			t.Fatalf("download of output 3 opened %q", opened)
		}
	})

	t.Run("an edit shows its inputs by role beside the result", func(t *testing.T) {
		f := newViewFixture("gen-edit", "paint a sunny hill inside the mask", "local-edit")
		// The result is the local provider's real edit of these inputs.
		img, mask, ref := gradientPNG(t, 240, 160), maskPNG(t, 240, 160), solidPNG(t, 64, 64, color.RGBA{230, 150, 30, 255})
		f.output(t, localEdit(t, img, mask, ref), "image/png", 240, 160)
		f.input(t, "image", "darkroom://generations/gen-earlier/outputs/0", img, 240, 160)
		f.input(t, "mask", "darkroom://generations/gen-edit/inputs/1", mask, 240, 160)
		f.input(t, "reference", "darkroom://generations/gen-edit/inputs/2", ref, 64, 64)
		f.input(t, "reference", "darkroom://generations/gen-edit/inputs/3", nil, 64, 64) // not readable: labelled, not shown
		useFixture(f)
		b.waitView(t, `document.querySelector("#media img[data-kind=full]")?.naturalWidth > 0 &&
			[...document.querySelectorAll("#inputs img")].filter((i) => i.naturalWidth > 0).length === 3 &&
			document.querySelector("#inputs .missing")?.textContent === "Not available"`)
		var got struct {
			Roles, Labels, Alts []string
			Dims                []string
			Beside              bool
			MainDownload        bool
		}
		b.inView(t, `(() => { const figs = [...document.querySelectorAll("#inputs figure")];
			const a = document.getElementById("inputs").getBoundingClientRect(), m = document.getElementById("media").getBoundingClientRect();
			return {roles: figs.map((f) => f.dataset.role), labels: figs.map((f) => f.querySelector(".role").textContent),
				alts: [...document.querySelectorAll("#inputs img")].map((i) => i.alt),
				dims: figs.map((f) => f.querySelector("figcaption").textContent),
				beside: a.right <= m.left && a.top < m.bottom && m.top < a.bottom,
				mainDownload: !document.getElementById("download").hidden}; })()`, &got)
		if !slices.Equal(got.Roles, []string{"image", "mask", "reference", "reference"}) ||
			!slices.Equal(got.Labels, []string{"Image", "Mask", "Reference 1", "Reference 2"}) ||
			!slices.Equal(got.Alts, []string{"Image (input)", "Mask (input)", "Reference 1 (input)"}) {
			t.Fatalf("inputs shown: roles %q, labels %q, alts %q", got.Roles, got.Labels, got.Alts)
		}
		if !strings.Contains(got.Dims[1], "240×160") || !got.Beside || !got.MainDownload {
			t.Fatalf("captions %q, inputs beside the result %v, download %v", got.Dims, got.Beside, got.MainDownload)
		}
		shot("edit-inputs")
		useFixture(f, "&theme=dark")
		b.waitView(t, `document.documentElement.dataset.theme === "dark" && [...document.querySelectorAll("#inputs img")].filter((i) => i.naturalWidth > 0).length === 3`)
		shot("edit-inputs-dark")
	})

	t.Run("a real edit of an earlier output, through generate", func(t *testing.T) {
		base := api.tool("generate", map[string]any{"modelId": "local-photo", "prompt": "hills", "count": 2, "wait": true, "aspectRatio": "16:9"})
		sc, _ := base.Result["structuredContent"].(map[string]any)
		outs, _ := sc["outputs"].([]any)
		if len(outs) != 2 {
			t.Fatalf("two variations: %v %v", base.Error, base.Result)
		}
		o := outs[1].(map[string]any)
		w, h := int(o["width"].(float64)), int(o["height"].(float64))
		open("generate", map[string]any{"modelId": "local-edit", "prompt": "a lake in the mask", "wait": true, "inputs": []any{
			map[string]any{"role": "image", "uri": gentools.OutputURI(sc["generationId"].(string), 1)},
			map[string]any{"role": "mask", "image": map[string]any{"data": base64.StdEncoding.EncodeToString(maskPNG(t, w, h)), "mimeType": "image/png"}},
		}}, "")
		b.waitView(t, `document.body.dataset.status === "completed" && document.querySelector("#media img[data-kind=full]")?.naturalWidth > 0 &&
			[...document.querySelectorAll("#inputs img")].filter((i) => i.naturalWidth > 0).length === 2`)
		var labels []string
		b.inView(t, `[...document.querySelectorAll("#inputs .role")].map((e) => e.textContent)`, &labels)
		if !slices.Equal(labels, []string{"Image", "Mask"}) {
			t.Fatalf("labels %q", labels)
		}
		shot("edit-real")
	})

	t.Run("a video's first and last frames", func(t *testing.T) {
		f := newViewFixture("gen-frames", "from dawn to dusk", "local-animate")
		f.Result.StructuredContent.Kind = "video"
		f.output(t, gradientPNG(t, 240, 135), "image/png", 240, 135)
		f.output(t, gradientPNG(t, 240, 135), "image/png", 240, 135)
		f.input(t, "first_frame", "darkroom://generations/gen-frames/inputs/0", solidPNG(t, 96, 54, color.RGBA{250, 200, 120, 255}), 96, 54)
		f.input(t, "last_frame", "darkroom://generations/gen-frames/inputs/1", solidPNG(t, 96, 54, color.RGBA{40, 40, 110, 255}), 96, 54)
		useFixture(f)
		b.waitView(t, `document.querySelectorAll("#media img[data-kind=full]").length === 2 && document.querySelectorAll("#inputs img").length === 2`)
		var labels []string
		b.inView(t, `[...document.querySelectorAll("#inputs .role")].map((e) => e.textContent)`, &labels)
		if !slices.Equal(labels, []string{"First frame", "Last frame"}) {
			t.Fatalf("labels %q", labels)
		}
		shot("video-frames")
	})

	t.Run("dark theme", func(t *testing.T) {
		open("generate", map[string]any{"modelId": "local-sketch", "prompt": "night market lanterns", "wait": true}, "&theme=dark")
		b.waitView(t, `document.body.dataset.status === "completed" && !!document.querySelector("#media img")?.naturalWidth`)
		var bg struct {
			Theme string
			RGB   []int
		}
		b.inView(t, `(() => { const m = getComputedStyle(document.body).backgroundColor.match(/\d+/g).map(Number);
			return {theme: document.documentElement.dataset.theme, rgb: m.slice(0, 3)}; })()`, &bg)
		if bg.Theme != "dark" || len(bg.RGB) != 3 || bg.RGB[0]+bg.RGB[1]+bg.RGB[2] > 150 {
			t.Fatalf("theme %q, background %v", bg.Theme, bg.RGB)
		}
		shot("image-dark")
	})

	t.Run("failed generation shows the reason", func(t *testing.T) {
		open("generate", map[string]any{"modelId": "local-sketch", "prompt": "[fail] a cat", "wait": true}, "")
		b.waitView(t, `document.body.dataset.status === "failed"`)
		var msg string
		b.inView(t, `document.getElementById("error").hidden ? "" : document.getElementById("error").textContent`, &msg)
		if !strings.Contains(msg, "the local provider refused this prompt") || !strings.HasPrefix(msg, "The provider could not make this") {
			t.Fatalf("error shown: %q", msg)
		}
		shot("failed")
	})

	t.Run("running video shows progress, then plays", func(t *testing.T) {
		open("generate", map[string]any{"modelId": "local-motion", "prompt": "fireflies over a pond", "durationSeconds": 2}, "")
		var seen []int
		deadline := time.Now().Add(viewWait)
		shotRunning := false
		for {
			var st struct {
				Status string
				Pct    int
			}
			if err := b.eval(true, `({status: document.body.dataset.status || "", pct: parseInt(document.getElementById("bar-fill").style.width) || 0})`, &st); err != nil {
				st.Status = "" // the view is still loading
			}
			if st.Status == "running" && (len(seen) == 0 || seen[len(seen)-1] != st.Pct) {
				seen = append(seen, st.Pct)
				if !shotRunning && st.Pct > 0 {
					shot("video-running")
					shotRunning = true
				}
			}
			if st.Status == "completed" {
				break
			}
			if time.Now().After(deadline) {
				b.stalled(t, fmt.Sprintf("the video to complete (status %q, progress seen %v)", st.Status, seen), nil)
			}
			b.tick()
		}
		if len(seen) < 2 || !slices.IsSorted(seen) || seen[len(seen)-1] <= seen[0] {
			t.Fatalf("progress did not advance while running: %v", seen)
		}
		b.waitView(t, `!!document.querySelector("#media [data-kind=full]")`)
		var media struct {
			Tag     string
			W, H    int
			Playing bool
			Bytes   int
		}
		b.inView(t, `(async () => { const el = document.querySelector("#media [data-kind=full]");
			if (el.tagName === "VIDEO") { const t0 = el.currentTime; await new Promise(r => setTimeout(r, 600));
				return {tag: "VIDEO", w: el.videoWidth, h: el.videoHeight, playing: !el.paused && el.currentTime > t0}; }
			await el.decode();
			return {tag: el.tagName, w: el.naturalWidth, h: el.naturalHeight, playing: el.src.startsWith("data:image/gif"),
				bytes: atob(el.src.slice(el.src.indexOf(",") + 1)).length}; })()`, &media)
		if media.Tag == "IMG" && media.Playing {
			// Playing: what the page paints changes (a canvas would only
			// ever draw an animation's first frame).
			first, err := b.screenshot()
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, func() bool {
				c, err := b.screenshot()
				if err != nil {
					t.Fatal(err)
				}
				return !bytes.Equal(first, c)
			}, "the page to paint another frame of the GIF")
		}
		if !media.Playing || media.W == 0 {
			t.Fatalf("video element %+v", media)
		}
		if media.Tag == "IMG" {
			g := api.tool("get_generation", map[string]any{"generationId": b.resultID(t)})
			o := g.Result["structuredContent"].(map[string]any)["outputs"].([]any)[0].(map[string]any)
			if int(o["width"].(float64)) != media.W || o["mimeType"] != "image/gif" || int64(media.Bytes) != int64(o["bytes"].(float64)) {
				t.Fatalf("gif %dx%d of %d bytes, output %v", media.W, media.H, media.Bytes, o)
			}
			code, raw := httpGet(t, o["url"].(string))
			anim, err := gif.DecodeAll(bytes.NewReader(raw))
			if code != 200 || err != nil || len(anim.Image) < 2 {
				t.Fatalf("the GIF is not animated: %d %v", code, err)
			}
		}
		shot("video-done")
	})

	t.Run("live preview while it runs, then the output", func(t *testing.T) {
		_, backends := comfyRig(t, emulator.ComfyOptions{Steps: 8, RunTime: 8 * time.Second})
		cs := comfyServer(t, backends, comfyWorkflows(t))
		cu, _ := url.Parse(cs.url)
		old := proxy.Swap(httputil.NewSingleHostReverseProxy(cu))
		defer proxy.Store(old)
		open("generate", map[string]any{"modelId": "comfyui:text-to-image", "prompt": "a harbour at night", "input": map[string]any{"3.steps": 30}}, "")
		b.waitView(t, `document.body.dataset.status === "running" && document.querySelector("#media img[data-kind=live]")?.naturalWidth > 0`)
		shot("live-preview")
		var live struct{ W, H int }
		b.inView(t, `(() => { const i = document.querySelector("#media img[data-kind=live]"); return {w: i.naturalWidth, h: i.naturalHeight}; })()`, &live)
		if max(live.W, live.H) > 512 {
			t.Fatalf("the live frame is %dx%d, above 512 px", live.W, live.H)
		}
		b.waitView(t, `document.body.dataset.status === "completed" && document.querySelector("#media img[data-kind=full]")?.naturalWidth > 0 && !document.querySelector("#media [data-kind=live]")`)
		shot("live-preview-done")
	})

	t.Run("cancel a queued generation", func(t *testing.T) {
		// The in-flight cap is 1: a slow video holds it, so the next waits queued.
		hold := api.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "[slow] a long take"})
		holdID := hold.Result["structuredContent"].(map[string]any)["generationId"].(string)
		defer api.tool("cancel_generation", map[string]any{"generationId": holdID})
		open("generate", map[string]any{"modelId": "local-sketch", "prompt": "a queued sketch"}, "")
		b.waitView(t, `document.body.dataset.status === "queued" && !document.getElementById("cancel").hidden`)
		shot("queued")
		b.inView(t, `document.getElementById("cancel").click(), true`, nil)
		b.waitView(t, `document.body.dataset.status === "cancelled"`)
		var note string
		b.inView(t, `document.getElementById("note").hidden ? "" : document.getElementById("note").textContent`, &note)
		if note != "Cancelled. The credits were refunded." {
			t.Fatalf("after cancel the view says %q", note)
		}
		g := api.tool("get_generation", map[string]any{"generationId": b.resultID(t)})
		if st := g.Result["structuredContent"].(map[string]any)["status"]; st != "cancelled" {
			t.Fatalf("darkroom says %v", st)
		}
		shot("cancelled")
	})

	t.Run("host refuses the view's calls", func(t *testing.T) {
		open("generate", map[string]any{"modelId": "local-sketch", "prompt": "a refused sketch", "wait": true}, "&refuse=1")
		b.waitView(t, `!document.getElementById("note").hidden`)
		var note string
		b.inView(t, `document.getElementById("note").textContent`, &note)
		if !strings.Contains(note, "The host did not let the viewer") {
			t.Fatalf("note %q", note)
		}
		// What the tool result carried is still shown: its inline preview.
		b.waitView(t, `document.querySelector("#media img[data-kind=preview]")?.naturalWidth > 0`)
		shot("refused")
	})

	if v := b.cspViolations(); len(v) > 0 {
		t.Errorf("CSP violations: %q", v)
	}
}

// viewFixture is a tool result for the host page's fixture=1, with the
// bytes of the darkroom:// URIs it names.
type viewFixture struct {
	Args      map[string]any             `json:"args"`
	Result    fixtureResult              `json:"result"`
	Resources map[string]fixtureResource `json:"resources"`
}

type fixtureResult struct {
	Content           []map[string]any `json:"content"`
	StructuredContent fixtureView      `json:"structuredContent"`
}

// fixtureView is the generation view's JSON as the viewer reads it,
// with inputs as issue 23 adds them.
type fixtureView struct {
	GenerationID string        `json:"generationId"`
	ModelID      string        `json:"modelId"`
	Kind         string        `json:"kind"`
	Status       string        `json:"status"`
	Progress     float64       `json:"progress"`
	Credits      int64         `json:"credits"`
	Outputs      []fixtureFile `json:"outputs"`
	Inputs       []fixtureFile `json:"inputs,omitempty"`
}

type fixtureFile struct {
	Role      string `json:"role,omitempty"`
	URI       string `json:"uri,omitempty"`
	URL       string `json:"url"`
	ExpiresAt string `json:"expiresAt"`
	MimeType  string `json:"mimeType"`
	Bytes     int    `json:"bytes,omitempty"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
}

type fixtureResource struct {
	MimeType string `json:"mimeType"`
	Blob     string `json:"blob"`
}

func newViewFixture(id, prompt, model string) viewFixture {
	return viewFixture{
		Args: map[string]any{"modelId": model, "prompt": prompt},
		Result: fixtureResult{
			Content:           []map[string]any{{"type": "text", "text": "Done"}},
			StructuredContent: fixtureView{GenerationID: id, ModelID: model, Kind: "image", Status: "completed", Progress: 1, Credits: 4, Outputs: []fixtureFile{}},
		},
		Resources: map[string]fixtureResource{},
	}
}

func (f *viewFixture) expires() string { return time.Now().Add(time.Hour).UTC().Format(time.RFC3339) }

// output adds output n with its resource_link, as darkroom's results name it.
func (f *viewFixture) output(t *testing.T, data []byte, mime string, w, h int) {
	t.Helper()
	v := &f.Result.StructuredContent
	n := len(v.Outputs)
	uri := fmt.Sprintf("darkroom://generations/%s/outputs/%d", v.GenerationID, n)
	v.Outputs = append(v.Outputs, fixtureFile{URL: fmt.Sprintf("https://files.example/%s/%d", v.GenerationID, n), ExpiresAt: f.expires(),
		MimeType: mime, Bytes: len(data), Width: w, Height: h})
	f.Result.Content = append(f.Result.Content, map[string]any{"type": "resource_link", "uri": uri, "name": fmt.Sprintf("output %d", n), "mimeType": mime})
	f.Resources[uri] = fixtureResource{MimeType: mime, Blob: base64.StdEncoding.EncodeToString(data)}
}

// input adds an input; nil data leaves its URI unreadable.
func (f *viewFixture) input(t *testing.T, role, uri string, data []byte, w, h int) {
	t.Helper()
	v := &f.Result.StructuredContent
	v.Inputs = append(v.Inputs, fixtureFile{Role: role, URI: uri, URL: "https://files.example/in/" + role, ExpiresAt: f.expires(),
		MimeType: "image/png", Width: w, Height: h})
	if data != nil {
		f.Resources[uri] = fixtureResource{MimeType: "image/png", Blob: base64.StdEncoding.EncodeToString(data)}
	}
}

func (f *viewFixture) outputURIs() []string {
	var uris []string
	for n := range f.Result.StructuredContent.Outputs {
		uris = append(uris, fmt.Sprintf("darkroom://generations/%s/outputs/%d", f.Result.StructuredContent.GenerationID, n))
	}
	return uris
}

// localEdit is what the local provider's local-edit makes of img, mask
// and a reference.
func localEdit(t *testing.T, img, mask, ref []byte) []byte {
	t.Helper()
	p, err := local.New(local.Options{Dir: t.TempDir(), Scale: 0})
	if err != nil {
		t.Fatal(err)
	}
	in := func(role string, data []byte) provider.Input {
		return provider.Input{Role: role, MimeType: "image/png", Open: func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}}
	}
	m := slices.IndexFunc(p.Models(), func(m provider.Model) bool { return m.ID == "local-edit" })
	ctx := context.Background()
	main := in("", img)
	job, err := p.Submit(ctx, provider.Request{Model: p.Models()[m], Prompt: "a sunny hill", InputImage: &main,
		Extra: []provider.Input{in(provider.RoleMask, mask), in(provider.RoleReference, ref)}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Status(ctx, job)
	if err != nil || len(st.Outputs) != 1 {
		t.Fatalf("local edit: %+v %v", st, err)
	}
	rc, err := p.OpenOutput(ctx, job, st.Outputs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func solidPNG(t *testing.T, w, h int, c color.RGBA) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, c)
		}
	}
	return encodePNG(t, img)
}

func gradientPNG(t *testing.T, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, color.RGBA{uint8(60 + 150*x/w), uint8(90 + 120*y/h), 200, 255})
		}
	}
	return encodePNG(t, img)
}

// maskPNG is black with a white ellipse: where an edit may change the image.
func maskPNG(t *testing.T, w, h int) []byte {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			dx, dy := float64(x-w/2)/float64(w/4), float64(y-h/2)/float64(h/4)
			if dx*dx+dy*dy < 1 {
				img.Pix[y*img.Stride+x] = 255
			}
		}
	}
	return encodePNG(t, img)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// pixelsJS decodes the image at sel into a canvas and samples it.
func pixelsJS(sel string) string {
	return `(async () => { const img = document.querySelector(` + "`" + sel + "`" + `); await img.decode();
		const c = document.createElement("canvas"); c.width = img.naturalWidth; c.height = img.naturalHeight;
		const g = c.getContext("2d"); g.drawImage(img, 0, 0);
		const pts = [[0.5, 0.5], [0.25, 0.3], [0.8, 0.7], [0.1, 0.9]];
		const facts = document.getElementById("facts").textContent;
		return {w: c.width, h: c.height, prompt: document.getElementById("prompt").textContent, facts,
			px: pts.map(([fx, fy]) => { const x = Math.floor(fx * c.width), y = Math.floor(fy * c.height);
				return [x, y, ...g.getImageData(x, y, 1, 1).data.slice(0, 3)]; })}; })()`
}

// fetchOutput returns generation id's output 0, decoded.
func fetchOutput(t *testing.T, api *rpcClient, id string) image.Image {
	t.Helper()
	g := api.tool("get_generation", map[string]any{"generationId": id})
	o := g.Result["structuredContent"].(map[string]any)["outputs"].([]any)[0].(map[string]any)
	code, raw := httpGet(t, o["url"].(string))
	if code != 200 {
		t.Fatalf("output: %d", code)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func checkPixels(t *testing.T, px [][]int, want image.Image) {
	t.Helper()
	if len(px) == 0 {
		t.Fatal("no pixels sampled")
	}
	for _, p := range px {
		r, g, b, _ := want.At(p[0], p[1]).RGBA()
		w := []int{int(r >> 8), int(g >> 8), int(b >> 8)}
		for i := range 3 {
			if d := p[2+i] - w[i]; d > 2 || d < -2 {
				t.Fatalf("pixel (%d,%d) shows %v, the file has %v", p[0], p[1], p[2:], w)
			}
		}
	}
}

// requireBrowser: CI sets DARKROOM_TEST_REQUIRE_BROWSER=1 (scripts/test.sh
// installs Chromium first), so there the test fails instead of skipping.
func skipOrFail(t *testing.T, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	if os.Getenv("DARKROOM_TEST_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg)
	}
	t.Skip("SKIPPING THE BROWSER TEST: " + msg + " (scripts/viewer.sh chromium installs it; DARKROOM_TEST_REQUIRE_BROWSER=1 makes this a failure)")
}

func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DARKROOM_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	skipOrFail(t, "no chromium on PATH")
	return ""
}

// buildHostPage bundles testdata/apphost with the view's pinned npm
// packages (scripts/viewer.sh caches them by lockfile).
func buildHostPage(t *testing.T) []byte {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		skipOrFail(t, "no npm on PATH for the host page's packages")
	}
	out := filepath.Join(t.TempDir(), "host.html")
	build := exec.Command("scripts/viewer.sh", "host", out)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build host page: %v\n%s", err, b)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

type browser struct {
	ctx context.Context
	mu  sync.Mutex
	csp []string
}

func ptr[T any](v T) *T { return &v }

func newBrowser(t *testing.T, path string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // root in CI containers
		chromedp.WindowSize(640, 1000),
		chromedp.Flag("disable-gpu", true),
		// Keep the sandboxed view in the page's process so the test can
		// read its DOM through the page's target.
		chromedp.Flag("disable-features", "IsolateSandboxedIframes"),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	b := &browser{ctx: ctx}
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, log.Enable, cdp.Empty{})
		return err
	}))
	if err != nil {
		skipOrFail(t, "chromium at %s does not start: %v", path, err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*log.EventEntryAdded); ok && strings.Contains(e.Entry.Text, "Content Security Policy") {
			b.mu.Lock()
			b.csp = append(b.csp, e.Entry.Text)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) cspViolations() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.csp)
}

func (b *browser) screenshot() ([]byte, error) {
	return chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
}

func (b *browser) navigate(u string) error { return chromedp.Do(b.ctx, chromedp.Navigate(u)) }

// tick paces polling of the page (the browser's own timers drive the view).
func (b *browser) tick() { time.Sleep(100 * time.Millisecond) }

// resultID is the generation of the model's call the host page made.
func (b *browser) resultID(t *testing.T) string {
	t.Helper()
	var id string
	b.host(t, `window.host.result?.structuredContent?.generationId || ""`, &id)
	if id == "" {
		t.Fatal("the host page has no generation")
	}
	return id
}

// host evaluates expr in the host page.
func (b *browser) host(t *testing.T, expr string, out any) {
	t.Helper()
	if err := b.eval(false, expr, out); err != nil {
		t.Fatalf("host %s: %v", expr, err)
	}
}

// inView evaluates expr in an isolated world of the view's frame (it sees
// the view's DOM, not its scripts).
func (b *browser) inView(t *testing.T, expr string, out any) {
	t.Helper()
	if err := b.eval(true, expr, out); err != nil {
		t.Fatalf("view %s: %v", expr, err)
	}
}

func (b *browser) eval(inView bool, expr string, out any) error {
	return chromedp.Do(b.ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		p := runtime.EvaluateParams{Expression: expr, ReturnByValue: ptr(true), AwaitPromise: ptr(true)}
		if inView {
			tree, err := cdp.Call(ctx, tg, page.GetFrameTree, cdp.Empty{})
			if err != nil {
				return err
			}
			if len(tree.FrameTree.ChildFrames) == 0 {
				return fmt.Errorf("no view frame yet")
			}
			w, err := cdp.Call(ctx, tg, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: tree.FrameTree.ChildFrames[0].Frame.ID})
			if err != nil {
				return err
			}
			p.ContextID = w.ExecutionContextID
		}
		r, err := cdp.Call(ctx, tg, runtime.Evaluate, p)
		if err != nil {
			return err
		}
		if e := r.ExceptionDetails; e != nil {
			if e.Exception != nil {
				return fmt.Errorf("%s %s", e.Text, e.Exception.Description)
			}
			return fmt.Errorf("%s", e.Text)
		}
		if out == nil || r.Result == nil || len(r.Result.Value) == 0 {
			return nil
		}
		return json.Unmarshal([]byte(r.Result.Value), out)
	}))
}

func (b *browser) waitView(t *testing.T, cond string) {
	t.Helper()
	b.wait(t, cond, true)
}

func (b *browser) waitHost(t *testing.T, cond string) {
	t.Helper()
	b.wait(t, cond, false)
}

// viewWait is how long the view may take to show what a test waits for: a
// loaded CI machine has taken over 30 s.
const viewWait = 45 * time.Second

func (b *browser) wait(t *testing.T, cond string, inView bool) {
	t.Helper()
	deadline := time.Now().Add(viewWait)
	var last error
	for time.Now().Before(deadline) {
		var ok bool
		if last = b.eval(inView, "!!("+cond+")", &ok); last == nil && ok {
			return
		}
		b.tick()
	}
	b.stalled(t, cond, last)
}

// stalled fails the test with where the host page and the view stopped.
func (b *browser) stalled(t *testing.T, what string, last error) {
	t.Helper()
	var hostErr, phase, text string
	_ = b.eval(false, `window.host ? window.host.error : "no host"`, &hostErr)
	_ = b.eval(false, `window.host ? window.host.phase : "no host"`, &phase)
	_ = b.eval(true, `document.body.innerText`, &text)
	t.Fatalf("timed out waiting for %s (last error %v; host %s, error %q; view says %q)", what, last, phase, hostErr, text)
}
