package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/blob"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testServer is darkroom running in-process on a real loopback listener.
type testServer struct {
	app *app
	url string // base URL, without /mcp
}

func startServer(t testing.TB, latency float64, opts ...func(*config)) *testServer {
	t.Helper()
	return startServerLog(t, slog.New(slog.DiscardHandler), latency, opts...)
}

// startServerLog is startServer logging to log.
func startServerLog(t testing.TB, log *slog.Logger, latency float64, opts ...func(*config)) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewUnstartedServer(nil)
	cfg, err := parseConfig("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	cfg.DatabaseURL = databaseURL(t, cfg.DataDir)
	cfg.PublicURL = "http://" + srv.Listener.Addr().String()
	cfg.LocalLatency = latency
	cfg.MaxInputBytes = 1 << 20
	cfg.ModelsRefresh = 0 // a test reads the listings itself (refreshModels)
	for _, o := range opts {
		o(cfg)
	}
	a, err := build(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = a.handler()
	srv.Start()
	done := a.background(ctx)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		_ = a.close()
	})
	return &testServer{app: a, url: srv.URL}
}

func connect(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call invokes a tool and decodes its structured content into out (if
// non-nil), returning the raw result.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if out != nil && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", tool, b, err)
		}
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type genView struct {
	GenerationID   string `json:"generationId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage"`
	UploadRequired bool   `json:"uploadRequired"`
	TimedOut       *bool  `json:"timedOut"`
	Credits        int64  `json:"credits"`
	Error          *struct {
		Kind, Message string
	} `json:"error"`
	Outputs []struct {
		URL      string `json:"url"`
		MimeType string `json:"mimeType"`
		Bytes    int64  `json:"bytes"`
		SHA256   string `json:"sha256"`
		Width    int    `json:"width"`
		Height   int    `json:"height"`
	} `json:"outputs"`
}

func httpGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestToolsListedInEveryEra(t *testing.T) {
	s := startServer(t, 0)
	want := goldenTools(t)
	for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, s.url, v)
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tool := range res.Tools {
				got = append(got, tool.Name)
				if tool.OutputSchema == nil {
					t.Errorf("%s has no outputSchema", tool.Name)
				}
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("tools = %v, want %v", got, want)
			}
			if info := cs.InitializeResult().ServerInfo; info == nil || info.Name != "darkroom" {
				t.Fatalf("serverInfo = %+v", info)
			}
		})
	}
}

func TestGenerateWaitDownload(t *testing.T) {
	s := startServer(t, 0)
	cs := connect(t, s.url, "2026-07-28")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "a lighthouse at dusk", "aspectRatio": "1:1", "seed": 7}, &g)
	if g.GenerationID == "" || g.Status == "failed" {
		t.Fatalf("generate: %+v", g)
	}
	var w genView
	res := call(t, cs, "wait_generation", map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 30}, &w)
	if w.Status != "completed" || len(w.Outputs) != 1 {
		t.Fatalf("wait: %s", text(res))
	}
	links := 0
	for _, c := range res.Content {
		if _, ok := c.(*mcp.ResourceLink); ok {
			links++
		}
	}
	if links != 1 {
		t.Errorf("resource links = %d, want 1", links)
	}
	if strings.Contains(text(res), "base64") {
		t.Errorf("result carries base64")
	}
	o := w.Outputs[0]
	code, body := httpGet(t, o.URL)
	if code != 200 {
		t.Fatalf("GET output: %d", code)
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != o.SHA256 || int64(len(body)) != o.Bytes {
		t.Fatalf("output sha256/size mismatch")
	}
	img, err := png.Decode(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("decode png: %v", err)
	}
	if b := img.Bounds(); b.Dx() != b.Dy() || b.Dx() != o.Width {
		t.Fatalf("1:1 image is %v (reported %dx%d)", b, o.Width, o.Height)
	}

	// The same request again gives byte-identical output.
	var g2 genView
	call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "a lighthouse at dusk", "aspectRatio": "1:1", "seed": 7, "wait": true, "waitSeconds": 30}, &g2)
	if g2.Status != "completed" || g2.GenerationID == g.GenerationID {
		t.Fatalf("second generate: %+v", g2)
	}
	if g2.Outputs[0].SHA256 != o.SHA256 {
		t.Fatalf("same request gave different bytes")
	}

	// download_output mints a fresh link to the same bytes.
	var d struct {
		URL    string `json:"url"`
		SHA256 string `json:"sha256"`
	}
	call(t, cs, "download_output", map[string]any{"generationId": g.GenerationID}, &d)
	if d.SHA256 != o.SHA256 || d.URL == "" {
		t.Fatalf("download_output: %+v", d)
	}
	// A tampered link is refused.
	tampered := strings.Replace(d.URL, "sig=", "sig=0", 1)
	if code, _ := httpGet(t, tampered); code != http.StatusForbidden {
		t.Fatalf("tampered link: %d, want 403", code)
	}
}

func TestIdempotencyKey(t *testing.T) {
	s := startServer(t, 0)
	cs := connect(t, s.url, "2026-07-28")
	var a, b genView
	args := map[string]any{"modelId": "local-sketch", "prompt": "same", "idempotencyKey": "k1"}
	call(t, cs, "generate", args, &a)
	call(t, cs, "generate", args, &b)
	if a.GenerationID == "" || a.GenerationID != b.GenerationID {
		t.Fatalf("idempotent generate gave %q and %q", a.GenerationID, b.GenerationID)
	}
}

func TestFailPath(t *testing.T) {
	s := startServer(t, 0)
	cs := connect(t, s.url, "2026-07-28")
	var g genView
	res := call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "please [fail] now", "wait": true, "waitSeconds": 30}, &g)
	if g.Status != "failed" || !res.IsError || g.Error == nil || g.Error.Kind != "provider" {
		t.Fatalf("[fail]: isError=%v %s", res.IsError, text(res))
	}
}

func TestCancel(t *testing.T) {
	s := startServer(t, 1) // real latency: the video stays in flight
	cs := connect(t, s.url, "2026-07-28")

	// Reserved (awaiting its input image): cancelled at once.
	var r genView
	call(t, cs, "generate", map[string]any{"modelId": "local-animate", "prompt": "waves"}, &r)
	if r.Status != "reserved" || !r.UploadRequired {
		t.Fatalf("image-to-video without image: %+v", r)
	}
	var c genView
	call(t, cs, "cancel_generation", map[string]any{"generationId": r.GenerationID}, &c)
	if c.Status != "cancelled" {
		t.Fatalf("cancel reserved: %+v", c)
	}

	// Queued or running at the provider: cancel is asked and confirmed.
	var v genView
	call(t, cs, "generate", map[string]any{"modelId": "local-motion", "prompt": "a slow pan"}, &v)
	call(t, cs, "cancel_generation", map[string]any{"generationId": v.GenerationID}, &c)
	if c.Status != "cancelled" {
		var w genView
		call(t, cs, "wait_generation", map[string]any{"generationId": v.GenerationID, "timeoutSeconds": 30}, &w)
		if w.Status != "cancelled" {
			t.Fatalf("cancel in flight ended %s (%s)", w.Status, w.StatusMessage)
		}
	}
	// Cancelling a terminal generation changes nothing.
	call(t, cs, "cancel_generation", map[string]any{"generationId": v.GenerationID}, &c)
	if c.Status != "cancelled" {
		t.Fatalf("second cancel: %+v", c)
	}
}

func TestUploadInput(t *testing.T) {
	s := startServer(t, 0)
	cs := connect(t, s.url, "2026-07-28")
	var r genView
	call(t, cs, "generate", map[string]any{"modelId": "local-animate", "prompt": "ripples", "durationSeconds": 2}, &r)
	var buf bytes.Buffer
	_ = png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 64, 36)))
	data := base64.StdEncoding.EncodeToString(buf.Bytes())

	// Claimed type must match the bytes.
	res := call(t, cs, "upload_input", map[string]any{"generationId": r.GenerationID, "image": map[string]any{"data": data, "mimeType": "image/jpeg"}}, nil)
	if !res.IsError || !strings.Contains(text(res), "image/png") {
		t.Fatalf("mismatched mime: %s", text(res))
	}
	var u genView
	call(t, cs, "upload_input", map[string]any{"generationId": r.GenerationID, "image": map[string]any{"data": data, "mimeType": "image/png"}}, &u)
	if u.Status != "queued" && u.Status != "running" && u.Status != "completed" {
		t.Fatalf("after upload: %+v", u)
	}
	var w genView
	call(t, cs, "wait_generation", map[string]any{"generationId": r.GenerationID, "timeoutSeconds": 30}, &w)
	if w.Status != "completed" || len(w.Outputs) == 0 {
		t.Fatalf("image-to-video: %+v", w)
	}
}

func TestBadArgumentsChangeNothing(t *testing.T) {
	s := startServer(t, 0)
	cs := connect(t, s.url, "2026-07-28")
	big := base64.StdEncoding.EncodeToString(make([]byte, 2<<20))
	cases := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{"missing prompt", "generate", map[string]any{"modelId": "local-sketch"}, "prompt"},
		{"unknown model", "generate", map[string]any{"modelId": "nope", "prompt": "x"}, "list_models"},
		{"waitSeconds 1000", "generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "waitSeconds": 1000}, "waitSeconds"},
		{"bad aspect", "generate", map[string]any{"modelId": "local-sketch", "prompt": "x", "aspectRatio": "7:3"}, "aspectRatio"},
		{"bad base64", "generate", map[string]any{"modelId": "local-animate", "prompt": "x", "inputImage": map[string]any{"data": "***", "mimeType": "image/png"}}, "base64"},
		{"oversize upload", "generate", map[string]any{"modelId": "local-animate", "prompt": "x", "inputImage": map[string]any{"data": big, "mimeType": "image/png"}}, "limit"},
		{"not an image", "generate", map[string]any{"modelId": "local-animate", "prompt": "x", "inputImage": map[string]any{"data": base64.StdEncoding.EncodeToString([]byte("hello world, not a png")), "mimeType": "image/png"}}, "PNG"},
		{"wrong type", "generate", map[string]any{"modelId": "local-sketch", "prompt": 5}, "prompt"},
		{"unknown id", "get_generation", map[string]any{"generationId": "0123456789abcdef0123456789abcdef"}, "no generation"},
		{"wait timeout 1", "wait_generation", map[string]any{"generationId": "x", "timeoutSeconds": 1}, "timeoutSeconds"},
		{"list limit", "list_generations", map[string]any{"limit": 0}, "limit"},
		{"bad cursor", "list_generations", map[string]any{"cursor": "zzz"}, "cursor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := call(t, cs, c.tool, c.args, nil)
			if !res.IsError || !strings.Contains(text(res), c.want) {
				t.Fatalf("isError=%v text=%q, want mention of %q", res.IsError, text(res), c.want)
			}
		})
	}
	var l struct {
		Generations []genView `json:"generations"`
	}
	call(t, cs, "list_generations", map[string]any{}, &l)
	if len(l.Generations) != 0 {
		t.Fatalf("bad input created %d generations", len(l.Generations))
	}
}

func TestListPaging(t *testing.T) {
	s := startServer(t, 0)
	cs := connect(t, s.url, "2026-07-28")
	for i := range 5 {
		call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "p" + string(rune('a'+i))}, nil)
	}
	seen := map[string]bool{}
	cursor := ""
	for page := 0; page < 5; page++ {
		args := map[string]any{"limit": 2}
		if cursor != "" {
			args["cursor"] = cursor
		}
		var l struct {
			Generations []genView `json:"generations"`
			NextCursor  string    `json:"nextCursor"`
		}
		call(t, cs, "list_generations", args, &l)
		for _, g := range l.Generations {
			if seen[g.GenerationID] {
				t.Fatalf("duplicate %s across pages", g.GenerationID)
			}
			seen[g.GenerationID] = true
		}
		if cursor = l.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 5 {
		t.Fatalf("paged through %d generations, want 5", len(seen))
	}
}

func TestOriginAndBodyLimits(t *testing.T) {
	s := startServer(t, 0)
	body := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	post := func(origin, body string) int {
		req, _ := http.NewRequest("POST", s.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "server/discover")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post("", body); c != 200 {
		t.Fatalf("no origin: %d", c)
	}
	if c := post("http://localhost:3000", body); c != 200 {
		t.Fatalf("loopback origin: %d", c)
	}
	if c := post("https://evil.example", body); c != http.StatusForbidden {
		t.Fatalf("foreign origin: %d, want 403", c)
	}
	huge := strings.Replace(body, `"params":{`, `"params":{"pad":"`+strings.Repeat("x", 17<<20)+`",`, 1)
	if c := post("", huge); c != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize body: %d, want 413", c)
	}
}

func TestRetentionExpiresOutputs(t *testing.T) {
	s := startServer(t, 0, func(c *config) { c.Retention = time.Millisecond })
	cs := connect(t, s.url, "2026-07-28")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "short-lived", "wait": true, "waitSeconds": 30}, &g)
	if g.Status != "completed" {
		t.Fatalf("generate: %+v", g)
	}
	key := blob.Key("local", g.GenerationID, 0, "png")
	time.Sleep(2 * time.Millisecond) // past the 1 ms retention
	if n, err := s.app.svc.ExpireOutputs(context.Background()); err != nil || n != 1 {
		t.Fatalf("ExpireOutputs = %d, %v", n, err)
	}
	if _, err := s.app.blobs.Stat(context.Background(), key); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("expired file still there: %v", err)
	}
	var after struct {
		genView
		OutputsExpired bool `json:"outputsExpired"`
	}
	call(t, cs, "get_generation", map[string]any{"generationId": g.GenerationID}, &after)
	if !after.OutputsExpired || len(after.Outputs) != 0 || !strings.Contains(after.StatusMessage, "deleted") {
		t.Fatalf("after retention: %+v", after)
	}
	if res := call(t, cs, "download_output", map[string]any{"generationId": g.GenerationID}, nil); !res.IsError || !strings.Contains(text(res), "retention") {
		t.Fatalf("download after retention: %s", text(res))
	}
}

// TestOneServerInfo: the serverInfo initialize gives is the one every
// Tasks answer carries in its _meta, title included (there was a second,
// without it).
func TestOneServerInfo(t *testing.T) {
	s := startServer(t, 0)
	info := connect(t, s.url, "2026-07-28").InitializeResult().ServerInfo
	tc := &rpcClient{t: t, url: s.url, caps: withTasks()}
	r := tc.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "a kite"})
	got := tc.call("tasks/get", map[string]any{"taskId": r.Result["taskId"]})
	meta, _ := got.Result["_meta"].(map[string]any)
	si, _ := meta["io.modelcontextprotocol/serverInfo"].(map[string]any)
	if info == nil || si["name"] != info.Name || si["title"] != info.Title || si["version"] != info.Version || info.Title == "" {
		t.Fatalf("initialize's serverInfo %+v, tasks/get's %v", info, si)
	}
}

// goldenTools is the tools every client is listed (the view tool, app-only,
// is not), from testdata/tools_list.golden: the one literal of the tool
// set in the tests.
func goldenTools(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "tools_list.golden"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}
