package tasks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func wireRequest(t *testing.T, caps string) *mcp.CallToolRequest {
	t.Helper()
	var meta map[string]any
	if err := json.Unmarshal([]byte(`{"`+MetaProtocolVersion+`":"2026-07-28","`+MetaClientCapabilities+`":`+caps+`}`), &meta); err != nil {
		t.Fatal(err)
	}
	return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: meta, Name: "x"}}
}

// TestCapabilitiesReadOffTheWire: Declared and ElicitationDeclared read
// the wire map instead of go-sdk's re-encoding; they must agree with what
// go-sdk's ClientCapabilities() says.
func TestCapabilitiesReadOffTheWire(t *testing.T) {
	cases := []string{
		`{}`,
		`{"extensions":null}`,
		`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
		`{"extensions":{"io.modelcontextprotocol/tasks":null}}`,
		`{"extensions":{"io.modelcontextprotocol/tasks":true}}`,
		`{"extensions":{"other":{}}}`,
		`{"elicitation":{}}`,
		`{"elicitation":null}`,
		`{"elicitation":{"form":{}}}`,
		`{"elicitation":{"url":{}}}`,
		`{"elicitation":{"form":{},"url":{}}}`,
		`{"elicitation":{"form":null,"url":{}}}`,
		`{"extensions":{"io.modelcontextprotocol/tasks":{"x":1}},"elicitation":{"form":{}}}`,
	}
	for _, c := range cases {
		t.Run(c, func(t *testing.T) {
			req := wireRequest(t, c)
			caps := req.ClientCapabilities() // go-sdk's reading
			if caps == nil {
				t.Fatal("go-sdk read no capabilities")
			}
			_, ext := caps.Extensions[ExtensionID].(map[string]any)
			elicit := caps.Elicitation != nil && (caps.Elicitation.Form != nil || caps.Elicitation.URL == nil)
			if got := Declared(req); got != ext {
				t.Errorf("Declared = %v, go-sdk says %v", got, ext)
			}
			if got := ElicitationDeclared(req); got != elicit {
				t.Errorf("ElicitationDeclared = %v, go-sdk says %v", got, elicit)
			}
		})
	}
}

func TestCapsJSON(t *testing.T) {
	small := `{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}` // keys sorted, as encoded
	if got := string(CapsJSON(wireRequest(t, small))); got != small {
		t.Errorf("stored %s, want the capabilities as sent", got)
	}
	// A client cannot store an arbitrary document on its task: an
	// oversized one keeps only the fields go-sdk knows.
	big := `{"extensions":{"io.modelcontextprotocol/tasks":{}},"junk":"` + strings.Repeat("x", 8<<10) + `"}`
	got := CapsJSON(wireRequest(t, big))
	if len(got) > maxCapsJSON || strings.Contains(string(got), "junk") || !strings.Contains(string(got), ExtensionID) {
		t.Errorf("stored %.200s (%d bytes)", got, len(got))
	}
}

// TestDeclaredOnlyOnTheTasksWire: the extension in _meta counts only on a
// request that is itself on the 2026-07-28 wire.
func TestDeclaredOnlyOnTheTasksWire(t *testing.T) {
	caps := map[string]any{"extensions": map[string]any{ExtensionID: map[string]any{}}, "elicitation": map[string]any{}}
	for _, c := range []struct {
		version any
		want    bool
	}{{"2026-07-28", true}, {"2025-11-25", false}, {"2025-06-18", false}, {nil, false}, {7, false}} {
		meta := map[string]any{MetaClientCapabilities: caps}
		if c.version != nil {
			meta[MetaProtocolVersion] = c.version
		}
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: meta, Name: "x"}}
		if got := Declared(req); got != c.want {
			t.Errorf("version %v: Declared = %v, want %v", c.version, got, c.want)
		}
		if c.want && !ElicitationDeclared(req) {
			t.Errorf("version %v: ElicitationDeclared = false", c.version)
		}
	}
}
