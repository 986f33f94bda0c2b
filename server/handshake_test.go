package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/server/auth"
)

// TestPublicHandshake: on a server that takes API keys only, a request
// without a credential whose Mcp-Method header and body are both the
// legacy handshake (initialize, notifications/initialized) is served, so
// that mcp-remote starts and shows its host why the first real request
// fails; anything else without a key is still 401, and with OAuth the
// handshake needs a token too.
func TestPublicHandshake(t *testing.T) {
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"host (via mcp-remote 0.15.1)","version":"1"}}}`
	const initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	cases := []struct {
		name, header, body, token string
		oauthServers              []string // authorization servers named: OAuth sign-in exists
		chunked                   bool     // no declared length
		want                      int
	}{
		{"initialize", "initialize", initialize, "", nil, false, http.StatusOK},
		{"initialized", "notifications/initialized", initialized, "", nil, false, http.StatusAccepted},
		{"initialize without the header", "", initialize, "", nil, false, http.StatusUnauthorized},
		{"header says initialize, body another method", "initialize", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", nil, false, http.StatusUnauthorized},
		{"header says initialize, body a batch", "initialize", `[` + initialize + `,{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, "", nil, false, http.StatusUnauthorized},
		{"tools/list", "tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", nil, false, http.StatusUnauthorized},
		{"initialize with a wrong key", "initialize", initialize, "wrong", nil, false, http.StatusUnauthorized},
		{"initialize of undeclared length", "initialize", initialize, "", nil, true, http.StatusUnauthorized},
		{"initialize too large", "initialize", initialize[:len(initialize)-1] + `,"x":"` + strings.Repeat("x", handshakeMaxBytes) + `"}`, "", nil, false, http.StatusUnauthorized},
		{"initialize where OAuth signs in", "initialize", initialize, "", []string{"https://idp.example"}, false, http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tools, _ := realTools(t)
			cfg := Config{Version: "test", Tools: tools, Auth: aliceKeyOnly(t), ResourceURL: "https://darkroom.example/mcp", AuthServers: tc.oauthServers, Logger: discard}
			h := Handler(cfg, New(cfg))
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tc.body))
			if tc.chunked {
				r.ContentLength = -1
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("MCP-Protocol-Version", "2025-06-18")
			if tc.header != "" {
				r.Header.Set("Mcp-Method", tc.header)
			}
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body.String())
			}
			if tc.want == http.StatusOK && !strings.Contains(rec.Body.String(), `"serverInfo"`) {
				t.Errorf("initialize answered %s", rec.Body.String())
			}
		})
	}
}

// aliceKeyOnly is an Authenticator that takes alice's API key and nothing
// else (no OAuth).
func aliceKeyOnly(t *testing.T) *auth.Authenticator {
	t.Helper()
	key, err := auth.NewAPIKey("alice", []byte(validSecret), auth.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{Keys: []auth.APIKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}
