package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/ui"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func withUI() map[string]any {
	return map[string]any{"extensions": map[string]any{ui.ExtensionID: map[string]any{"mimeTypes": []any{ui.MimeType}}}}
}

// toolsByName lists the tools a 2026-07-28 caller with caps sees.
func toolsByName(t *testing.T, c *rpcClient) map[string]map[string]any {
	t.Helper()
	r := c.call("tools/list", nil)
	if r.Error != nil {
		t.Fatalf("tools/list: %+v", r.Error)
	}
	out := map[string]map[string]any{}
	for _, x := range r.Result["tools"].([]any) {
		m := x.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

func resourceURIs(t *testing.T, c *rpcClient) []string {
	t.Helper()
	r := c.call("resources/list", nil)
	if r.Error != nil {
		t.Fatalf("resources/list: %+v", r.Error)
	}
	var uris []string
	for _, x := range r.Result["resources"].([]any) {
		uris = append(uris, x.(map[string]any)["uri"].(string))
	}
	return uris
}

// TestViewerLinkage: a host that declares io.modelcontextprotocol/ui sees
// the generation tools linked to ui://darkroom/generation, the resource and
// the app-only view tool; one that does not sees none of it, and a call of
// the view tool or a read of the view answers as for names that do not
// exist.
func TestViewerLinkage(t *testing.T) {
	s := startServer(t, 0)
	host := &rpcClient{t: t, url: s.url, caps: withUI()}
	plain := &rpcClient{t: t, url: s.url, caps: map[string]any{}}
	// Declared as something other than an object: not declared.
	odd := &rpcClient{t: t, url: s.url, caps: map[string]any{"extensions": map[string]any{ui.ExtensionID: true}}}

	linked := toolsByName(t, host)
	for _, name := range ui.LinkedTools {
		meta, _ := linked[name]["_meta"].(map[string]any)
		u, _ := meta["ui"].(map[string]any)
		if u["resourceUri"] != ui.ResourceURI {
			t.Errorf("%s: _meta %v, want ui.resourceUri %s", name, meta, ui.ResourceURI)
		}
	}
	vt, ok := linked[ui.ViewTool]
	if !ok {
		t.Fatalf("%s not listed for the host", ui.ViewTool)
	}
	if vis := fmt.Sprint(vt["_meta"].(map[string]any)["ui"].(map[string]any)["visibility"]); vis != "[app]" {
		t.Errorf("%s visibility %s, want [app]", ui.ViewTool, vis)
	}

	for _, c := range []*rpcClient{plain, odd} {
		tools := toolsByName(t, c)
		if _, ok := tools[ui.ViewTool]; ok {
			t.Errorf("%s listed for a client without the extension", ui.ViewTool)
		}
		// Exactly the host's list without the view's additions.
		want := map[string]map[string]any{}
		for name, def := range linked {
			if name == ui.ViewTool {
				continue
			}
			cp := map[string]any{}
			for k, v := range def {
				cp[k] = v
			}
			if m, _ := cp["_meta"].(map[string]any); m != nil {
				delete(m, "ui")
				if len(m) == 0 {
					delete(cp, "_meta")
				}
			}
			want[name] = cp
		}
		got, _ := json.Marshal(tools)
		for name := range linked {
			g, _ := json.Marshal(tools[name])
			w, _ := json.Marshal(want[name])
			if _, ok := want[name]; ok && !bytes.Equal(g, w) {
				t.Errorf("tools/list without the extension, %s:\n got %s\nwant %s", name, g, w)
			}
		}
		if strings.Contains(string(got), "ui://") {
			t.Errorf("a ui:// link leaked to a client without the extension")
		}
		for _, u := range resourceURIs(t, c) {
			if u == ui.ResourceURI {
				t.Errorf("resources/list shows %s without the extension", u)
			}
		}
		hidden, unknown := c.tool(ui.ViewTool, map[string]any{"generationId": "x"}), c.tool("view_generatio", map[string]any{"generationId": "x"})
		if hidden.Error == nil || unknown.Error == nil || strings.ReplaceAll(fmt.Sprint(*unknown.Error), "view_generatio", ui.ViewTool) != fmt.Sprint(*hidden.Error) {
			t.Errorf("view tool without the extension %+v, unknown tool %+v", hidden.Error, unknown.Error)
		}
		hr, ur := readRes(c, ui.ResourceURI), readRes(c, "ui://darkroom/nothing")
		if hr.Error == nil || ur.Error == nil || hr.Status != ur.Status ||
			strings.ReplaceAll(fmt.Sprint(*ur.Error), "ui://darkroom/nothing", ui.ResourceURI) != fmt.Sprint(*hr.Error) {
			t.Errorf("view read without the extension %+v, unknown %+v", hr.Error, ur.Error)
		}
	}

	if !contains(resourceURIs(t, host), ui.ResourceURI) {
		t.Fatalf("resources/list for the host lacks %s", ui.ResourceURI)
	}
	rd := readRes(host, ui.ResourceURI)
	if rd.Error != nil {
		t.Fatalf("read view: %+v", rd.Error)
	}
	content := rd.Result["contents"].([]any)[0].(map[string]any)
	if content["mimeType"] != ui.MimeType || content["text"] != ui.HTML() || !strings.Contains(ui.HTML(), "<script") {
		t.Fatalf("view contents: mimeType %v, %d chars", content["mimeType"], len(fmt.Sprint(content["text"])))
	}
	if csp := content["_meta"].(map[string]any)["ui"].(map[string]any)["csp"]; fmt.Sprint(csp) != "map[]" {
		t.Errorf("the view asks for origins: %v", csp)
	}

	// The extension is advertised; a 2025 stdio session that declared it in
	// initialize is linked, one that did not is not.
	for _, declared := range []bool{true, false} {
		st, ct := mcp.NewInMemoryTransports()
		ss, err := s.app.mcp.Connect(context.Background(), s.app.tasks.Transport(st, server.LocalPrincipal), nil)
		if err != nil {
			t.Fatal(err)
		}
		caps := &mcp.ClientCapabilities{}
		if declared {
			caps.AddExtension(ui.ExtensionID, map[string]any{"mimeTypes": []any{ui.MimeType}})
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-host", Version: "1"}, &mcp.ClientOptions{Capabilities: caps}).
			Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		if cs.InitializeResult().Capabilities.Extensions[ui.ExtensionID] == nil {
			t.Errorf("server capabilities lack %s", ui.ExtensionID)
		}
		lt, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var view, link bool
		for _, tl := range lt.Tools {
			view = view || tl.Name == ui.ViewTool
			link = link || (tl.Name == "generate" && tl.Meta["ui"] != nil)
		}
		if view != declared || link != declared {
			t.Errorf("stdio, declared=%v: view tool %v, generate linked %v", declared, view, link)
		}
		_ = cs.Close()
		_ = ss.Wait()
	}
}

func readRes(c *rpcClient, uri string) rpcReply {
	c.t.Helper()
	return c.call("resources/read", map[string]any{"uri": uri}, "Mcp-Name", uri)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestViewTool: view_generation gives the view what it renders (prompt,
// poll interval) and an output's exact bytes, only to their owner; a
// foreign id answers exactly as an unknown one.
func TestViewTool(t *testing.T) {
	keys, err := auth.ParseKeyList("alice=secret-alice-1234,bob=secret-bob-5678", "test")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, 0, func(c *config) { c.Auth = auth.Config{Keys: keys} })
	alice := &rpcClient{t: t, url: s.url, token: "secret-alice-1234", caps: withUI()}
	bob := &rpcClient{t: t, url: s.url, token: "secret-bob-5678", caps: withUI()}

	gen := alice.tool("generate", map[string]any{"modelId": "local-sketch", "prompt": "a lighthouse at dusk", "wait": true})
	sc := gen.Result["structuredContent"].(map[string]any)
	gid := sc["generationId"].(string)
	out0 := sc["outputs"].([]any)[0].(map[string]any)

	for _, c := range []struct {
		name    string
		args    map[string]any
		wantErr bool
	}{
		{"state", map[string]any{"generationId": gid}, false},
		{"bytes", map[string]any{"generationId": gid, "output": 0}, false},
		{"no such output", map[string]any{"generationId": gid, "output": 3}, true},
		{"no id", map[string]any{}, true},
		{"not an object", nil, true},
		{"an unknown argument", map[string]any{"generationId": gid, "page": 2}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := alice.tool(ui.ViewTool, c.args)
			if r.Error != nil {
				t.Fatalf("rpc error %+v", r.Error)
			}
			if isErr, _ := r.Result["isError"].(bool); isErr != c.wantErr {
				t.Fatalf("isError %v, want %v: %v", isErr, c.wantErr, r.Result)
			}
			if c.wantErr {
				return
			}
			st := r.Result["structuredContent"].(map[string]any)
			if st["prompt"] != "a lighthouse at dusk" || st["status"] != "completed" || st["pollIntervalMs"].(float64) <= 0 {
				t.Fatalf("state %v", st)
			}
			if _, ok := c.args["output"]; !ok {
				return
			}
			res := r.Result["content"].([]any)[1].(map[string]any)["resource"].(map[string]any)
			b, err := base64.StdEncoding.DecodeString(res["blob"].(string))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(b)
			if hex.EncodeToString(sum[:]) != out0["sha256"] || res["mimeType"] != out0["mimeType"] || res["uri"] != "darkroom://generations/"+gid+"/outputs/0" {
				t.Fatalf("bytes %d (%s), want the output's %v", len(b), res["mimeType"], out0["sha256"])
			}
		})
	}

	random := "0123456789abcdef0123456789abcdef"
	for _, args := range []func(string) map[string]any{
		func(id string) map[string]any { return map[string]any{"generationId": id} },
		func(id string) map[string]any { return map[string]any{"generationId": id, "output": 0} },
	} {
		foreign, unknown := bob.tool(ui.ViewTool, args(gid)), bob.tool(ui.ViewTool, args(random))
		ft, _ := json.Marshal(foreign.Result)
		ut, _ := json.Marshal(unknown.Result)
		if strings.ReplaceAll(string(ft), gid, random) != string(ut) || strings.Contains(string(ft), "lighthouse") {
			t.Errorf("foreign %s vs unknown %s", ft, ut)
		}
	}
}
