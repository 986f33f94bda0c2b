package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// wirePeer sends raw JSON-RPC to darkroom over one transport and era and
// returns every message of the answer (notifications first, the response
// last), so tests see exactly what crosses the wire.
type wirePeer interface {
	// exchange sends a request and reads until its response.
	exchange(method string, params map[string]any) []map[string]any
}

const legacyVersion = "2025-11-25"

func modernMeta(caps map[string]any) map[string]any {
	return map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
}

// httpPeer: stateless POSTs; a legacy peer sends MCP-Protocol-Version
// 2025-11-25 and no per-request _meta.
type httpPeer struct {
	t       *testing.T
	url     string
	version string
}

func (p *httpPeer) exchange(method string, params map[string]any) []map[string]any {
	p.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	if p.version != legacyVersion {
		params["_meta"] = modernMeta(withTasks())
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rpcSeq.Add(1), "method": method, "params": params})
	req, _ := http.NewRequest("POST", p.url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", p.version)
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var msgs []map[string]any
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			p.t.Fatalf("%s: status %d, %v", method, resp.StatusCode, err)
		}
		return append(msgs, m)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				p.t.Fatalf("%s: data %q", method, d)
			}
			msgs = append(msgs, m)
			if m["id"] != nil {
				break
			}
		}
	}
	return msgs
}

// stdioWire is `darkroom stdio` as a child process; a legacy one has
// gone through initialize.
type stdioWire struct {
	*stdioPeer
	version string
}

func startStdio(t *testing.T, version string, env ...string) *stdioWire {
	t.Helper()
	cmd := exec.Command(binary, "stdio", "--data", t.TempDir())
	cmd.Env = append(append(os.Environ(), "DARKROOM_LOCAL_LATENCY=0.05"), env...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	p := &stdioWire{stdioPeer: &stdioPeer{t: t, in: in, out: bufio.NewScanner(out)}, version: version}
	p.out.Buffer(make([]byte, 1<<20), 16<<20)
	return p
}

func (p *stdioWire) exchange(method string, params map[string]any) []map[string]any {
	p.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	if p.version != legacyVersion {
		params["_meta"] = modernMeta(withTasks())
	}
	id := rpcSeq.Add(1)
	p.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	var msgs []map[string]any
	for {
		m := p.next()
		msgs = append(msgs, m)
		if v, ok := m["id"].(float64); ok && int64(v) == id {
			return msgs
		}
	}
}

// hello is the era's handshake; it returns the server capabilities.
func hello(t *testing.T, p wirePeer, version string) map[string]any {
	t.Helper()
	var msgs []map[string]any
	if version == legacyVersion {
		msgs = p.exchange("initialize", map[string]any{"protocolVersion": legacyVersion, "capabilities": withTasks(),
			"clientInfo": map[string]any{"name": "era-test", "version": "1"}})
		if s, ok := p.(*stdioWire); ok {
			s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
		}
	} else {
		msgs = p.exchange("server/discover", nil)
	}
	res, _ := msgs[len(msgs)-1]["result"].(map[string]any)
	caps, _ := res["capabilities"].(map[string]any)
	if caps == nil {
		t.Fatalf("%s handshake: %v", version, msgs)
	}
	return caps
}

// TestListsPerEra: on both transports and both eras, tools are declared
// without listChanged (the list never changes, so no notification could
// ever be sent), and every cacheable result carries ttlMs and cacheScope
// on the 2026-07-28 wire only, private where it depends on the caller.
func TestListsPerEra(t *testing.T) {
	s := startServer(t, 0)
	cacheable := []struct {
		method, items, scope string
	}{
		{"tools/list", "tools", "private"}, // the viewer's tool is listed to declaring clients only
		{"resources/list", "resources", "private"},
		{"resources/templates/list", "resourceTemplates", "public"},
	}
	for _, version := range []string{legacyVersion, "2026-07-28"} {
		peers := map[string]func() wirePeer{
			"http":  func() wirePeer { return &httpPeer{t: t, url: s.url, version: version} },
			"stdio": func() wirePeer { return startStdio(t, version) },
		}
		for name, mk := range peers {
			t.Run(name+" "+version, func(t *testing.T) {
				p := mk()
				caps := hello(t, p, version)
				if tools, ok := caps["tools"].(map[string]any); !ok || tools["listChanged"] != nil {
					t.Errorf("capabilities.tools = %v, want present without listChanged", caps["tools"])
				}
				modern := version != legacyVersion
				for _, c := range cacheable {
					msgs := p.exchange(c.method, nil)
					res, _ := msgs[len(msgs)-1]["result"].(map[string]any)
					if _, ok := res[c.items].([]any); !ok {
						t.Fatalf("%s: %v", c.method, msgs)
					}
					_, ttl := res["ttlMs"]
					scope, hasScope := res["cacheScope"]
					if ttl != modern || hasScope != modern {
						t.Errorf("%s has ttlMs %v, cacheScope %v; want both %v", c.method, ttl, hasScope, modern)
					}
					if modern && scope != c.scope {
						t.Errorf("%s cacheScope %v, want %s", c.method, scope, c.scope)
					}
				}
			})
		}
	}
}

// TestListenFilterTogether: subscriptions/listen with taskIds and
// toolsListChanged acknowledges exactly what is honoured (the taskIds;
// tools/list_changed is never sent) and keeps the stream until the task
// has ended; toolsListChanged alone is acknowledged as nothing and ends
// at once. Over HTTP and stdio.
func TestListenFilterTogether(t *testing.T) {
	s := startServer(t, 0.05)
	peers := map[string]func() wirePeer{
		"http":  func() wirePeer { return &httpPeer{t: t, url: s.url, version: "2026-07-28"} },
		"stdio": func() wirePeer { return startStdio(t, "2026-07-28") },
	}
	for name, mk := range peers {
		t.Run(name, func(t *testing.T) {
			p := mk()
			msgs := p.exchange("tools/call", map[string]any{"name": "generate",
				"arguments": map[string]any{"modelId": "local-motion", "prompt": "listen together", "durationSeconds": 2}})
			res, _ := msgs[len(msgs)-1]["result"].(map[string]any)
			id, _ := res["taskId"].(string)
			if id == "" {
				t.Fatalf("generate: %v", msgs)
			}
			msgs = p.exchange("subscriptions/listen", map[string]any{"notifications": map[string]any{
				"taskIds": []string{id}, "toolsListChanged": true}})
			if msgs[0]["method"] != "notifications/subscriptions/acknowledged" {
				t.Fatalf("first message %v", msgs[0])
			}
			agreed := msgs[0]["params"].(map[string]any)["notifications"]
			if want := map[string]any{"taskIds": []any{id}}; !reflect.DeepEqual(agreed, want) {
				t.Errorf("acknowledged %v, want exactly %v", agreed, want)
			}
			last := msgs[len(msgs)-2]
			if last["method"] != "notifications/tasks" || last["params"].(map[string]any)["status"] != "completed" {
				t.Errorf("stream ended before the task did: %v", last)
			}
			for _, m := range msgs[1 : len(msgs)-1] {
				if m["method"] != "notifications/tasks" {
					t.Errorf("unrequested or unhonoured message %v", m)
				}
			}

			msgs = p.exchange("subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
			if len(msgs) != 2 || msgs[0]["method"] != "notifications/subscriptions/acknowledged" {
				t.Fatalf("toolsListChanged alone: %v", msgs)
			}
			if agreed := msgs[0]["params"].(map[string]any)["notifications"]; !reflect.DeepEqual(agreed, map[string]any{}) {
				t.Errorf("toolsListChanged alone: acknowledged %v, want nothing", agreed)
			}
		})
	}
}

// TestListenNotOnLegacy: subscriptions/listen is a 2026-07-28 method; a
// 2025 session gets an error or (go-sdk's answer without taskIds) an
// acknowledgement of nothing and the end at once: never an agreed filter
// nor an open stream.
func TestListenNotOnLegacy(t *testing.T) {
	s := startServer(t, 0)
	peers := map[string]func() wirePeer{
		"http":  func() wirePeer { return &httpPeer{t: t, url: s.url, version: legacyVersion} },
		"stdio": func() wirePeer { return startStdio(t, legacyVersion) },
	}
	for name, mk := range peers {
		for label, filter := range map[string]map[string]any{
			"toolsListChanged": {"toolsListChanged": true}, "taskIds and toolsListChanged": {"taskIds": []string{"x"}, "toolsListChanged": true}} {
			t.Run(name+" "+label, func(t *testing.T) {
				p := mk()
				hello(t, p, legacyVersion)
				msgs := p.exchange("subscriptions/listen", map[string]any{"notifications": filter})
				last := msgs[len(msgs)-1]
				switch {
				case len(msgs) == 1 && last["error"] != nil:
				case len(msgs) == 2 && last["result"] != nil && msgs[0]["method"] == "notifications/subscriptions/acknowledged":
					if agreed := msgs[0]["params"].(map[string]any)["notifications"]; !reflect.DeepEqual(agreed, map[string]any{}) {
						t.Errorf("legacy listen %v agreed to %v", filter, agreed)
					}
				default:
					t.Fatalf("legacy listen %v: %v", filter, msgs)
				}
			})
		}
	}
}
