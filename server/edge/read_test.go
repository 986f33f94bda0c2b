package edge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/tasks"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReadResultLeavesTheResult: encoding a read result adds go-sdk's
// per-era fields to the bytes only; the handler's result, which may be
// shared between requests, is not modified.
func TestReadResultLeavesTheResult(t *testing.T) {
	en := New(tasks.NewDispatcher(tasks.Options{ServerInfo: &mcp.Implementation{Name: "darkroom", Version: "1"}}), Options{})
	for _, c := range []struct {
		name string
		res  *mcp.CallToolResult
		want string
	}{
		{"no meta", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}}},
			`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"darkroom","version":"1"}},"content":[{"type":"text","text":"a"}],"resultType":"complete"}`},
		{"own meta", &mcp.CallToolResult{Meta: mcp.Meta{"x": 1}},
			`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"darkroom","version":"1"},"x":1},"content":[],"resultType":"complete"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, _ := json.Marshal(c.res)
			b, err := en.readResult(c.res, true)
			if err != nil || string(b) != c.want {
				t.Fatalf("encoded %v %s\nwant %s", err, b, c.want)
			}
			if after, _ := json.Marshal(c.res); string(after) != string(before) {
				t.Fatalf("the result was modified: %s, was %s", after, before)
			}
			if legacy, _ := en.readResult(c.res, false); strings.Contains(string(legacy), "resultType") {
				t.Fatalf("legacy encoding %s carries resultType", legacy)
			}
		})
	}
}
