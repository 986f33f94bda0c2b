package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// maxToolsListBytes bounds what being connected costs: an assistant
// holds the tools/list result in its context on every turn.
const maxToolsListBytes = 12_000

// TestToolsListSize measures the tools/list result's JSON as a client on
// the 2026-07-28 wire sees it, without and with the Tasks extension, and
// holds it to maxToolsListBytes. Every tool keeps a description, and its
// input schema's bounds stay (TestSchemaBoundsEnforced checks those
// against the handlers).
func TestToolsListSize(t *testing.T) {
	s := startServer(t, 0)
	for _, c := range []struct {
		name string
		caps map[string]any
	}{{"default", map[string]any{}}, {"tasks", withTasks()}} {
		t.Run(c.name, func(t *testing.T) {
			r := (&rpcClient{t: t, url: s.url, caps: c.caps}).call("tools/list", nil)
			if r.Status != 200 || r.Result == nil {
				t.Fatalf("tools/list: %d %v", r.Status, r.Error)
			}
			all, _ := json.Marshal(r.Result)
			var lines []string
			outBytes := 0
			for _, tool := range r.Result["tools"].([]any) {
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
			t.Logf("tools/list for a %s client: %d bytes, output schemas %d%%\n%s", c.name, len(all), 100*outBytes/len(all), strings.Join(lines, "\n"))
			if len(all) > maxToolsListBytes {
				t.Errorf("tools/list is %d bytes; the bound is %d", len(all), maxToolsListBytes)
			}
		})
	}
}
