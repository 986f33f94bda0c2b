package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// maxToolsListBytes bounds what being connected costs: an assistant
// holds the tools/list result in its context on every turn.
const maxToolsListBytes = 12_000

// TestToolsListSize measures the tools/list result's JSON as a client on
// the 2026-07-28 wire sees it, without and with the Tasks extension and
// as an MCP Apps host (which also sees view_generation), and
// holds it to maxToolsListBytes. Every tool keeps a description, and its
// input schema's bounds stay (TestSchemaBoundsEnforced checks those
// against the handlers).
func TestToolsListSize(t *testing.T) {
	s := startServer(t, 0)
	for _, c := range []struct {
		name string
		caps map[string]any
	}{{"default", map[string]any{}}, {"tasks", withTasks()},
		{"MCP Apps", map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/ui": map[string]any{"mimeTypes": []any{"text/html;profile=mcp-app"}}}}}} {
		t.Run(c.name, func(t *testing.T) {
			r := (&rpcClient{t: t, url: s.url, caps: c.caps}).call("tools/list", nil)
			if r.Status != 200 || r.Result == nil {
				t.Fatalf("tools/list: %d %v", r.Status, r.Error)
			}
			wire, _ := json.Marshal(r.Result)
			// What the model holds: an MCP Apps host keeps an app-only
			// tool (visibility ["app"], view_generation) from the model.
			var seen []any
			for _, tool := range r.Result["tools"].([]any) {
				meta, _ := tool.(map[string]any)["_meta"].(map[string]any)
				ui, _ := meta["ui"].(map[string]any)
				if v, _ := ui["visibility"].([]any); len(v) == 1 && v[0] == "app" {
					continue
				}
				seen = append(seen, tool)
			}
			held := maps.Clone(r.Result)
			held["tools"] = seen
			all, _ := json.Marshal(held)
			var lines []string
			outBytes := 0
			for _, tool := range seen {
				m := tool.(map[string]any)
				b, _ := json.Marshal(m)
				in, _ := json.Marshal(m["inputSchema"])
				out, _ := json.Marshal(m["outputSchema"])
				outBytes += len(out)
				lines = append(lines, fmt.Sprintf("%-18s %5d bytes (input schema %4d, output schema %4d, description %3d)", m["name"], len(b), len(in), len(out), len(m["description"].(string))))
				if d, _ := m["description"].(string); len(d) < 40 {
					t.Errorf("%s: description %q does not say when to use it", m["name"], d)
				}
			}
			t.Logf("tools/list for a %s client: %d bytes on the wire, %d the model holds, output schemas %d%%\n%s", c.name, len(wire), len(all), 100*outBytes/len(all), strings.Join(lines, "\n"))
			if len(all) > maxToolsListBytes {
				t.Errorf("the model holds %d bytes of tools/list; the bound is %d", len(all), maxToolsListBytes)
			}
		})
	}
}
