package ui

import (
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDeclaredFromMeta: without an initialize session only the request's
// own _meta counts, on the 2026-07-28 wire, and only an object declares.
func TestDeclaredFromMeta(t *testing.T) {
	ext := func(v any) map[string]any {
		return map[string]any{"extensions": map[string]any{ExtensionID: v}}
	}
	for _, c := range []struct {
		name string
		meta mcp.Meta
		want bool
	}{
		{"declared", mcp.Meta{metaProtocolVersion: "2026-07-28", metaClientCapabilities: ext(map[string]any{})}, true},
		{"later revision", mcp.Meta{metaProtocolVersion: "2027-01-01", metaClientCapabilities: ext(map[string]any{"mimeTypes": []any{MimeType}})}, true},
		{"2025 revision in _meta", mcp.Meta{metaProtocolVersion: "2025-11-25", metaClientCapabilities: ext(map[string]any{})}, false},
		{"no revision", mcp.Meta{metaClientCapabilities: ext(map[string]any{})}, false},
		{"not an object", mcp.Meta{metaProtocolVersion: "2026-07-28", metaClientCapabilities: ext(true)}, false},
		{"null", mcp.Meta{metaProtocolVersion: "2026-07-28", metaClientCapabilities: ext(nil)}, false},
		{"other extension", mcp.Meta{metaProtocolVersion: "2026-07-28", metaClientCapabilities: map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}, false},
		{"no capabilities", mcp.Meta{metaProtocolVersion: "2026-07-28"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := &mcp.ListToolsRequest{Params: &mcp.ListToolsParams{Meta: c.meta}}
			if got := Declared(req); got != c.want {
				t.Fatalf("Declared = %v, want %v", got, c.want)
			}
		})
	}
	if Declared(&mcp.ListToolsRequest{}) || Declared(nil) {
		t.Fatal("a request without params declared the extension")
	}
}

// TestLinkToolsLeavesTheRegisteredToolsAlone: the linked copies are per
// request; the server's own definitions never gain _meta.ui.
func TestLinkToolsLeavesTheRegisteredToolsAlone(t *testing.T) {
	gen := &mcp.Tool{Name: "generate", Meta: mcp.Meta{"other": 1}}
	view := &mcp.Tool{Name: ViewTool}
	in := []*mcp.Tool{gen, view, {Name: "list_models"}}
	linked := linkTools(in, true)
	if len(linked) != 3 || linked[0].Meta["ui"] == nil || linked[0].Meta["other"] != 1 {
		t.Fatalf("linked %v", linked[0].Meta)
	}
	if gen.Meta["ui"] != nil || len(gen.Meta) != 1 {
		t.Fatalf("the registered tool changed: %v", gen.Meta)
	}
	plain := linkTools(in, false)
	if len(plain) != 2 || plain[0] != gen || plain[1].Name != "list_models" {
		t.Fatalf("plain %v", plain)
	}
}

// TestViewMarkupIsStrictCSPClean: outside its scripts and style the view
// has no inline event handler, no javascript: URL and loads nothing from
// any origin, so a host's strict CSP blocks nothing it needs.
func TestViewMarkupIsStrictCSPClean(t *testing.T) {
	markup := regexp.MustCompile(`(?s)<script>.*?</script>|<style>.*?</style>`).ReplaceAllString(HTML(), "")
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)\son[a-z]+\s*=`),
		regexp.MustCompile(`(?i)javascript:`),
		regexp.MustCompile(`(?i)\s(src|href|action|srcset)\s*=`),
		regexp.MustCompile(`(?i)<(script|link|iframe|object|embed)\b`),
	} {
		if m := bad.FindString(markup); m != "" {
			t.Errorf("the view's markup has %q", m)
		}
	}
	if n := strings.Count(HTML(), "<script>"); n != 1 {
		t.Errorf("%d inline scripts, want the one bundle", n)
	}
}
