package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"image/jpeg"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outputLink returns the resource_link of output 0 in res.
func outputLink(t *testing.T, res *mcp.CallToolResult) *mcp.ResourceLink {
	t.Helper()
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			return l
		}
	}
	t.Fatalf("no resource_link in %s", text(res))
	return nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkOutputResource generates on cs and reads the output back as a
// resource: the resource_link names it, resources/read returns the bytes
// of the signed link, and the template and the capability are declared.
func checkOutputResource(t *testing.T, cs *mcp.ClientSession, legacy bool) {
	t.Helper()
	ctx := context.Background()
	if cs.InitializeResult() != nil && cs.InitializeResult().Capabilities.Resources == nil {
		t.Fatalf("resources capability not declared: %+v", cs.InitializeResult().Capabilities)
	}
	var g genView
	res := call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "a resource", "wait": true, "waitSeconds": 30}, &g)
	if g.Status != "completed" || len(g.Outputs) != 1 {
		t.Fatalf("generate: %s", text(res))
	}
	link := outputLink(t, res)
	if want := "darkroom://generations/" + g.GenerationID + "/outputs/0"; link.URI != want {
		t.Fatalf("resource_link URI %q, want %q", link.URI, want)
	}
	if !strings.HasPrefix(g.Outputs[0].URL, "http") {
		t.Fatalf("structuredContent url is not the signed link: %q", g.Outputs[0].URL)
	}
	checkPreviewAfterLink(t, res)
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
	if err != nil {
		t.Fatalf("resources/read: %v", err)
	}
	if len(rr.Contents) != 1 || rr.Contents[0].MIMEType != g.Outputs[0].MimeType || rr.Contents[0].URI != link.URI {
		t.Fatalf("contents: %+v", rr.Contents)
	}
	code, body := httpGet(t, g.Outputs[0].URL)
	if code != 200 {
		t.Fatalf("GET signed link: %d", code)
	}
	if got := sha(rr.Contents[0].Blob); got != g.Outputs[0].SHA256 || got != sha(body) {
		t.Fatalf("read sha256 %s, record %s, link %s", got, g.Outputs[0].SHA256, sha(body))
	}
	dl := call(t, cs, "download_output", map[string]any{"generationId": g.GenerationID}, nil)
	if l := outputLink(t, dl); l.URI != link.URI {
		t.Fatalf("download_output resource_link %q, want %q", l.URI, link.URI)
	}

	tl, err := cs.ListResourceTemplates(ctx, nil)
	has := func(tmpl string) bool {
		return slices.ContainsFunc(tl.ResourceTemplates, func(rt *mcp.ResourceTemplate) bool { return rt.URITemplate == tmpl })
	}
	if err != nil || len(tl.ResourceTemplates) != 3 || !has(gentools.OutputURITemplate) || !has(gentools.InputURITemplate) || !has(gentools.PreviewURITemplate) {
		t.Fatalf("resources/templates/list: %+v, %v", tl, err)
	}
	rl, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatalf("resources/list: %v", err)
	}
	for _, r := range rl.Resources {
		if strings.HasPrefix(r.URI, "darkroom://generations/") {
			t.Fatalf("resources/list lists an output: %+v", r)
		}
	}

	want := int64(jsonrpc.CodeInvalidParams)
	if legacy {
		want = -32002
	}
	for _, uri := range []string{
		"darkroom://generations/" + generation.NewID() + "/outputs/0", // unknown
		"darkroom://generations/" + generation.NewID() + "/inputs/0",  // unknown
		"darkroom://generations/" + g.GenerationID + "/inputs/0",      // none: a local-sketch from a prompt
		"darkroom://generations/" + g.GenerationID + "/outputs/01",    // not canonical
		"file:///etc/passwd", // no template
	} {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != want || !strings.HasPrefix(je.Message, "Resource not found") {
			t.Fatalf("read %s: %v, want code %d", uri, err, want)
		}
	}
	// Out of range on one's own generation: not found, and it says why.
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "darkroom://generations/" + g.GenerationID + "/outputs/1"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != want || !strings.Contains(je.Message, "has 1 output,") {
		t.Fatalf("index out of range: %v", err)
	}
}

// TestOutputResources: on HTTP in each era and on stdio, every output is
// a resource its owner reads with the link's exact bytes.
func TestOutputResources(t *testing.T) {
	s := startServer(t, 0, func(c *config) { c.PollRate, c.PollBurst = 1000, 1000 }) // one local caller for all
	for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		t.Run("HTTP "+v, func(t *testing.T) { checkOutputResource(t, connect(t, s.url, v), v < "2026") })
	}
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run("stdio "+v, func(t *testing.T) { checkOutputResource(t, stdioVersion(t, s.app, v), v < "2026") })
	}
}

// stdioVersion is stdioSession on a chosen protocol version.
func stdioVersion(t *testing.T, a *app, version string) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	limited := server.LimitTransport(st, a.limits, a.tools.RateClass, server.LocalPrincipal)
	ss, err := a.mcp.Connect(context.Background(), a.tasks.Transport(limited, server.LocalPrincipal), nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil).
		Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

// TestOutputResourcesOnS3: the same read from a bucket (versitygw).
func TestOutputResourcesOnS3(t *testing.T) {
	s3cfg := s3Config(t, "res-"+generation.NewID()[:12])
	s := startServer(t, 0, func(c *config) { c.S3 = s3cfg; c.CreateBucket = true })
	checkOutputResource(t, connect(t, s.url, "2026-07-28"), false)
}

// rawRead posts resources/read as version does and returns the status and
// the error member exactly as sent.
func rawRead(t *testing.T, url, token, version, uri string) (int, json.RawMessage) {
	t.Helper()
	params := map[string]any{"uri": uri}
	if version >= "2026" {
		params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": params})
	code, raw, err := postRaw(http.DefaultClient, url+"/mcp", body, map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer " + token,
		"MCP-Protocol-Version": version, "Mcp-Method": "resources/read", "Mcp-Name": uri})
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(lastData(raw), &m); err != nil {
		t.Fatalf("reply %s: %v", raw, err)
	}
	return code, m.Error
}

// TestForeignOutputLooksUnknown: another caller's output URI answers
// exactly as an unknown one (status and error bytes, the URI aside), in
// both eras; the owner reads it.
func TestForeignOutputLooksUnknown(t *testing.T) {
	keys, err := auth.ParseKeyList("alice=secret-alice-1234,bob=secret-bob-5678", "test")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, 0, func(c *config) { c.Auth = auth.Config{Keys: keys} })
	alice := &rpcClient{t: t, url: s.url, token: "secret-alice-1234", caps: map[string]any{}}
	gen := alice.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "mine", "wait": true})
	gid := gen.Result["structuredContent"].(map[string]any)["generationId"].(string)
	mine := gentools.OutputURI(gid, 0)
	unknown := gentools.OutputURI(generation.NewID(), 0)
	if r := alice.call("resources/read", map[string]any{"uri": mine}, "Mcp-Name", mine); r.Error != nil {
		t.Fatalf("owner's read: %+v", r.Error)
	}
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		fc, foreign := rawRead(t, s.url, "secret-bob-5678", v, mine)
		uc, unk := rawRead(t, s.url, "secret-bob-5678", v, unknown)
		same := bytes.ReplaceAll(unk, []byte(unknown), []byte(mine))
		if fc != uc || !bytes.Equal(foreign, same) || len(foreign) == 0 {
			t.Fatalf("%s: foreign %d %s\nunknown %d %s", v, fc, foreign, uc, unk)
		}
		// And alice's own unknown URI reads the same as bob's.
		_, aliceUnk := rawRead(t, s.url, "secret-alice-1234", v, unknown)
		if !bytes.Equal(aliceUnk, unk) {
			t.Fatalf("%s: unknown differs by caller: %s vs %s", v, aliceUnk, unk)
		}
	}
}

// TestResourceSizeCap: an output above DARKROOM_MAX_RESOURCE_BYTES is
// refused with an error naming the signed link, which still works.
func TestResourceSizeCap(t *testing.T) {
	s := startServer(t, 0, func(c *config) { c.MaxResourceBytes = 100 })
	c := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	gen := c.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "big", "wait": true})
	gid := gen.Result["structuredContent"].(map[string]any)["generationId"].(string)
	uri := gentools.OutputURI(gid, 0)
	r := c.call("resources/read", map[string]any{"uri": uri}, "Mcp-Name", uri)
	if r.Error == nil || r.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(r.Error.Message, "signed link") ||
		!strings.Contains(r.Error.Message, "download_output") {
		t.Fatalf("over the cap: %+v", r.Error)
	}
	url, _ := r.Error.Data["url"].(string)
	if code, _ := httpGet(t, url); code != 200 {
		t.Fatalf("the error's link %q: %d", url, code)
	}
}

// TestResourceAfterRetention: an expired output reads as gone, saying so.
func TestResourceAfterRetention(t *testing.T) {
	s := startServer(t, 0, func(c *config) { c.Retention = time.Millisecond })
	cs := connect(t, s.url, "2025-11-25")
	var g genView
	call(t, cs, "generate", map[string]any{"modelId": "local-sketch", "prompt": "short-lived", "wait": true, "waitSeconds": 30}, &g)
	time.Sleep(2 * time.Millisecond) // past the 1 ms retention
	if n, err := s.app.svc.ExpireOutputs(context.Background()); err != nil || n != 1 {
		t.Fatalf("ExpireOutputs = %d, %v", n, err)
	}
	_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: gentools.OutputURI(g.GenerationID, 0)})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32002 || !strings.Contains(je.Message, "retention") {
		t.Fatalf("read after retention: %v", err)
	}
}

// TestResourceReadIsCharged: resources/read draws from the poll bucket.
func TestResourceReadIsCharged(t *testing.T) {
	s := startServer(t, 0, func(c *config) { c.PollRate, c.PollBurst = 1e-6, 1 })
	c := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	uri := gentools.OutputURI(generation.NewID(), 0)
	if r := c.call("resources/read", map[string]any{"uri": uri}, "Mcp-Name", uri); r.Error == nil || r.Error.Code == -31429 {
		t.Fatalf("first read: %+v", r.Error)
	}
	if r := c.call("resources/read", map[string]any{"uri": uri}, "Mcp-Name", uri); r.Error == nil || r.Error.Code != -31429 {
		t.Fatalf("second read over the burst: %+v", r.Error)
	}
}

// checkPreviewAfterLink: right after each resource_link comes the inline
// preview, a JPEG within 512 px and 64 KB.
func checkPreviewAfterLink(t *testing.T, res *mcp.CallToolResult) {
	t.Helper()
	for i, c := range res.Content {
		if _, ok := c.(*mcp.ResourceLink); !ok {
			continue
		}
		var img *mcp.ImageContent
		if i+1 < len(res.Content) {
			img, _ = res.Content[i+1].(*mcp.ImageContent)
		}
		if img == nil || img.MIMEType != "image/jpeg" || len(img.Data) == 0 || len(img.Data) > 64<<10 {
			t.Fatalf("no preview after the resource_link: %+v", res.Content)
		}
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(img.Data))
		if err != nil || max(cfg.Width, cfg.Height) > 512 {
			t.Fatalf("preview %+v, %v", cfg, err)
		}
	}
}

// TestInlinePreviewSetting: on by default in results, the task result
// included; DARKROOM_INLINE_PREVIEW=off shows none.
func TestInlinePreviewSetting(t *testing.T) {
	t.Run("on, task result", func(t *testing.T) {
		s := startServer(t, 0)
		c := &rpcClient{t: t, url: s.url, caps: withTasks()}
		task := c.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "a preview"})
		id, _ := task.Result["taskId"].(string)
		if id == "" {
			t.Fatalf("no task: %+v", task)
		}
		done := c.waitTask(id)
		b, _ := json.Marshal(done["result"])
		var res mcp.CallToolResult
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("task result %s: %v", b, err)
		}
		outputLink(t, &res)
		checkPreviewAfterLink(t, &res)
	})
	t.Run("off", func(t *testing.T) {
		s := startServer(t, 0, func(c *config) { c.InlinePreview = false })
		res := call(t, connect(t, s.url, "2025-11-25"), "generate", map[string]any{"modelId": "local-sketch", "prompt": "no preview", "wait": true}, nil)
		outputLink(t, res)
		for _, c := range res.Content {
			if _, ok := c.(*mcp.ImageContent); ok {
				t.Fatalf("a preview with previews off: %+v", res.Content)
			}
		}
	})
}

// BenchmarkResourceRead: resources/read of one stored output over HTTP
// (2026-07-28), against the signed link's GET of the same bytes.
func BenchmarkResourceRead(b *testing.B) {
	s := startBenchServer(b, 0, true, nil, func(c *config) { c.PollRate, c.PollBurst = 1e9, 1e9 })
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	for _, model := range []string{"local-sketch", "local-motion"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "generate", Arguments: map[string]any{"modelId": model, "prompt": "bench", "wait": true}})
		if err != nil || res.IsError {
			b.Fatalf("generate: %v", err)
		}
		var g genView
		js, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(js, &g)
		uri := gentools.OutputURI(g.GenerationID, 0)
		// Raw POSTs: go-sdk's client would answer from its cache (ttlMs).
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": map[string]any{"uri": uri,
			"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
		headers := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": uri}
		b.Run(model+"/resources-read", func(b *testing.B) {
			b.SetBytes(g.Outputs[0].Bytes)
			for range b.N {
				code, raw, err := postRaw(http.DefaultClient, s.url+"/mcp", body, headers)
				var m struct {
					Result mcp.ReadResourceResult `json:"result"`
				}
				if err != nil || code != 200 || json.Unmarshal(lastData(raw), &m) != nil || int64(len(m.Result.Contents[0].Blob)) != g.Outputs[0].Bytes {
					b.Fatalf("read: %d %v", code, err)
				}
			}
		})
		b.Run(model+"/signed-link", func(b *testing.B) {
			b.SetBytes(g.Outputs[0].Bytes)
			for range b.N {
				resp, err := http.Get(g.Outputs[0].URL)
				if err != nil || resp.StatusCode != 200 {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// TestResourceOfUnfinishedGeneration: the owner reading an output of a
// generation still running is told to wait, with the not-found code.
func TestResourceOfUnfinishedGeneration(t *testing.T) {
	s := startServer(t, 1) // a local video takes seconds
	c := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	gen := c.tool("generate", map[string]any{"modelId": "local-motion", "prompt": "slow"})
	gid := gen.Result["structuredContent"].(map[string]any)["generationId"].(string)
	uri := gentools.OutputURI(gid, 0)
	r := c.call("resources/read", map[string]any{"uri": uri}, "Mcp-Name", uri)
	if r.Error == nil || r.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(r.Error.Message, "wait_generation") {
		t.Fatalf("read while running: %+v", r.Error)
	}
	c.tool("cancel_generation", map[string]any{"generationId": gid})
}
