package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestChallengeTellsTheTruth: a 401 names resource_metadata only when
// that URL answers 200 (OAuth with authorization servers); with API keys
// alone it names none, and its body says a bearer API key is expected and
// how to send it.
func TestChallengeTellsTheTruth(t *testing.T) {
	const resource = "https://darkroom.example/mcp"
	key, err := auth.NewAPIKey("alice", []byte(validSecret), auth.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "OKP", "kid": "k1", "crv": "Ed25519",
		"alg": "EdDSA", "x": base64.RawURLEncoding.EncodeToString(pub)}}})
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, set, 0o600); err != nil {
		t.Fatal(err)
	}
	oauth := &auth.OAuthConfig{JWKSFile: jwksFile, Issuer: "https://idp.example", Audience: resource}

	cases := []struct {
		name        string
		cfg         auth.Config
		authServers []string
		wantPRM     bool   // challenge names resource_metadata
		wantBody    string // in error_description of the no-token 401
	}{
		{"keys only", auth.Config{Keys: []auth.APIKey{key}}, nil, false, `API key is required: send it as the header "Authorization: Bearer <key>"`},
		{"keys, auth servers named but no OAuth", auth.Config{Keys: []auth.APIKey{key}}, []string{"https://idp.example"}, true, "API key is required"},
		{"OAuth without authorization servers", auth.Config{OAuth: oauth}, nil, false, "missing bearer token"},
		{"OAuth with authorization servers", auth.Config{OAuth: oauth}, []string{"https://idp.example"}, true, "missing bearer token"},
		{"keys and OAuth", auth.Config{Keys: []auth.APIKey{key}, OAuth: oauth}, []string{"https://idp.example"}, true, "an API key or an OAuth access token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := auth.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(a.Close)
			tools, _ := realTools(t)
			cfg := Config{Version: "test", Tools: tools, Auth: a, ResourceURL: resource, AuthServers: tc.authServers, Logger: discard}
			h := Handler(cfg, New(cfg))
			for _, token := range []string{"", "wrong"} {
				r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
				r.Header.Set("Content-Type", "application/json")
				if token != "" {
					r.Header.Set("Authorization", "Bearer "+token)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				if rec.Code != http.StatusUnauthorized {
					t.Fatalf("token %q: status %d", token, rec.Code)
				}
				ch, err := oauthex.ParseWWWAuthenticate(rec.Header().Values("WWW-Authenticate"))
				if err != nil || len(ch) != 1 || ch[0].Scheme != "bearer" {
					t.Fatalf("token %q: challenge %q (%v)", token, rec.Header().Values("WWW-Authenticate"), err)
				}
				prm, named := ch[0].Params["resource_metadata"]
				if named != tc.wantPRM {
					t.Fatalf("token %q: resource_metadata named %v, want %v (%q)", token, named, tc.wantPRM, rec.Header().Get("WWW-Authenticate"))
				}
				if named {
					// The advertised URL answers, on this very handler.
					u, err := url.Parse(prm)
					if err != nil {
						t.Fatal(err)
					}
					mr := httptest.NewRecorder()
					h.ServeHTTP(mr, httptest.NewRequest(http.MethodGet, u.Path, nil))
					var meta oauthex.ProtectedResourceMetadata
					if mr.Code != http.StatusOK || json.Unmarshal(mr.Body.Bytes(), &meta) != nil || meta.Resource != resource {
						t.Fatalf("advertised %s answers %d %s", prm, mr.Code, mr.Body)
					}
				}
				var body map[string]string
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
					t.Fatalf("body %q: %v", rec.Body, err)
				}
				if token == "" && !strings.Contains(rec.Body.String(), "<") && strings.Contains(tc.wantBody, "<") {
					t.Errorf("body %s escapes the angle brackets a person reads", rec.Body)
				}
				if token == "" && !strings.Contains(body["error_description"], tc.wantBody) {
					t.Errorf("no token: body %q, want it to say %q", body["error_description"], tc.wantBody)
				}
				if token != "" && body["error"] != "invalid_token" {
					t.Errorf("wrong token: body %q", body)
				}
			}
		})
	}
}
