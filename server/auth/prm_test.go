package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

func TestPRMHandler(t *testing.T) {
	h := PRMHandler(testResource, []string{testIssuer}, []string{testScope})
	req := httptest.NewRequest(http.MethodGet, "/.well-known/oauth-protected-resource/mcp", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content-type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"resource":                 testResource,
		"authorization_servers":    []any{testIssuer},
		"scopes_supported":         []any{testScope},
		"bearer_methods_supported": []any{"header"},
		"resource_name":            "darkroom",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PRM = %v\nwant %v", got, want)
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/.well-known/oauth-protected-resource", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}

func TestMetadataURLAndPaths(t *testing.T) {
	tests := []struct {
		resource string
		url      string
		paths    []string
		bad      bool
	}{
		{"https://h.example/mcp", "https://h.example/.well-known/oauth-protected-resource/mcp",
			[]string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"}, false},
		{"https://h.example", "https://h.example/.well-known/oauth-protected-resource",
			[]string{"/.well-known/oauth-protected-resource"}, false},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/.well-known/oauth-protected-resource",
			[]string{"/.well-known/oauth-protected-resource"}, false},
		{"https://h.example/a/mcp/", "https://h.example/.well-known/oauth-protected-resource/a/mcp",
			[]string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/a/mcp"}, false},
		{"/mcp", "", nil, true},
		{"https://h.example/mcp?x=1", "", nil, true},
		{"https://h.example/mcp#f", "", nil, true},
	}
	for _, tt := range tests {
		u, err := MetadataURL(tt.resource)
		p, perr := PRMPaths(tt.resource)
		if tt.bad {
			if err == nil || perr == nil {
				t.Errorf("%q: want errors, got %q %v", tt.resource, u, p)
			}
			continue
		}
		if err != nil || perr != nil || u != tt.url || !reflect.DeepEqual(p, tt.paths) {
			t.Errorf("%q: MetadataURL = %q (%v), PRMPaths = %v (%v)", tt.resource, u, err, p, perr)
		}
	}
}
