package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestLocalMode(t *testing.T) {
	a := newAuth(t, Config{})
	if !a.LocalMode() || a.OAuthEnabled() {
		t.Fatal("want local mode")
	}
	for _, authz := range []string{"", "Bearer anything"} {
		rec, p := serve(t, a, authz)
		if rec.Code != 204 || p == nil || p.ID != "local" || p.Kind != KindLocal || !p.HasScope("x") {
			t.Errorf("authz %q: status %d, principal %+v", authz, rec.Code, p)
		}
	}
	if p, err := a.Authenticate(t.Context(), ""); err != nil || p.ID != Local.ID {
		t.Errorf("Authenticate = %+v, %v", p, err)
	}
}

func TestKeysOnlyMiddleware(t *testing.T) {
	k, err := NewAPIKey("ci", []byte("ci-secret"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Config{Keys: []APIKey{k}})
	if a.LocalMode() {
		t.Fatal("keys configured, yet local mode")
	}
	tests := []struct {
		authz  string
		status int
		www    string
	}{
		{"Bearer ci-secret", 204, ""},
		{"Bearer  ci-secret ", 204, ""},
		{"", 401, `Bearer resource_metadata="` + testPRM + `"`},
		{"Bearer ci-secret extra", 401, `Bearer error="invalid_token", resource_metadata="` + testPRM + `"`},
		{"Bearer eyJ.x.y", 401, `Bearer error="invalid_token", resource_metadata="` + testPRM + `"`},
	}
	for _, tt := range tests {
		rec, p := serve(t, a, tt.authz)
		if rec.Code != tt.status || rec.Header().Get("WWW-Authenticate") != tt.www {
			t.Errorf("%q: status %d, WWW-Authenticate %q", tt.authz, rec.Code, rec.Header().Get("WWW-Authenticate"))
		}
		if tt.status == 204 && (p == nil || p.ID != "key:ci") {
			t.Errorf("%q: principal %+v", tt.authz, p)
		}
	}

	// Two Authorization headers are refused; a query-string token is ignored.
	h := Middleware(a, MiddlewareOptions{ResourceMetadataURL: testPRM})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("inner handler reached")
	}))
	req := httptest.NewRequest("POST", "/mcp?access_token=ci-secret", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 || strings.Contains(rec.Header().Get("WWW-Authenticate"), "error=") {
		t.Errorf("query token: %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
	req = httptest.NewRequest("POST", "/mcp", nil)
	req.Header.Add("Authorization", "Bearer ci-secret")
	req.Header.Add("Authorization", "Bearer ci-secret")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Errorf("two headers: %d", rec.Code)
	}
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["error"] != "invalid_token" {
		t.Errorf("body %s", rec.Body)
	}
}

func TestChallenge(t *testing.T) {
	tests := []struct{ code, scope, prm, want string }{
		{"", "", "", "Bearer"},
		{"", "", "https://h/p", `Bearer resource_metadata="https://h/p"`},
		{"invalid_token", "a b", "https://h/p", `Bearer error="invalid_token", resource_metadata="https://h/p", scope="a b"`},
		{"insufficient_scope", "a b", "https://h/p", `Bearer error="insufficient_scope", scope="a b", resource_metadata="https://h/p"`},
		{"", `we"ird\`, "", `Bearer scope="we\"ird\\"`},
	}
	for _, tt := range tests {
		if got := Challenge(tt.code, tt.scope, tt.prm); got != tt.want {
			t.Errorf("Challenge(%q,%q,%q) = %s, want %s", tt.code, tt.scope, tt.prm, got, tt.want)
		}
	}
}

func TestCheckBind(t *testing.T) {
	tests := []struct {
		addr    string
		auth    bool
		wantErr string
	}{
		{"127.0.0.1:8080", false, ""},
		{"127.1.2.3:8080", false, ""},
		{"[::1]:8080", false, ""},
		{"[::ffff:127.0.0.1]:8080", false, ""},
		{"localhost:8080", false, ""},
		{"LOCALHOST:0", false, ""},
		{":8080", false, `refusing to listen on ":8080" (all interfaces) without authentication`},
		{"0.0.0.0:8080", false, "refusing to listen"},
		{"[::]:8080", false, "refusing to listen"},
		{"192.168.1.5:8080", false, "refusing to listen"},
		{"example.com:8080", false, "refusing to listen"},
		{"nohostport", false, "listen address"},
		{"0.0.0.0:8080", true, ""},
		{":8080", true, ""},
	}
	for _, tt := range tests {
		err := CheckBind(tt.addr, tt.auth)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("CheckBind(%q, %v) = %v, want %q", tt.addr, tt.auth, err, tt.wantErr)
		}
	}
	if err := CheckBind(":1", false); err == nil || !strings.Contains(err.Error(), EnvAPIKeys) {
		t.Errorf("message should say how to fix: %v", err)
	}
}

func TestContextHelpers(t *testing.T) {
	if _, ok := FromContext(t.Context()); ok {
		t.Error("empty context has a principal")
	}
	p := Principal{ID: "https://i s", Kind: KindOAuth, Scopes: []string{"a"}}
	got, ok := FromContext(WithPrincipal(t.Context(), p))
	if !ok || got.ID != p.ID || !got.HasScope("a") || got.HasScope("b") {
		t.Errorf("got %+v, %v", got, ok)
	}
}

// TestThrottleAskedOnlyForFailedTokens: the Throttle hook runs after the
// token was checked and failed, and never for a valid token, a valid
// token lacking a scope, or a request without a token; when it answers,
// its answer replaces the 401.
func TestThrottleAskedOnlyForFailedTokens(t *testing.T) {
	testKeys(t)
	idp := newIdP(t, jwks(t, jwk(t, "ec1", &ecKey.PublicKey)))
	alice, err := NewAPIKey("alice", []byte("alice-secret-123"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Config{Keys: []APIKey{alice}, OAuth: oauthConfig(idp.URL)})
	es := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodES256, "ec1", ecKey, c) }
	cases := []struct {
		name      string
		authz     string
		refuse    bool // what the throttle answers
		wantAsked bool
		want      int
	}{
		{"valid key", "Bearer alice-secret-123", true, false, 204},
		{"valid JWT", "Bearer " + es(claims()), true, false, 204},
		{"valid JWT lacking the scope", "Bearer " + es(with(claims(), "scope", "other")), true, false, 403},
		{"no token", "", true, false, 401},
		{"other scheme", "Basic YWxpY2U6eA==", true, false, 401},
		{"wrong key, throttle admits", "Bearer alice-secret-124", false, true, 401},
		{"wrong key, throttle refuses", "Bearer alice-secret-124", true, true, 429},
		{"expired JWT, throttle refuses", "Bearer " + es(with(claims(), "exp", testNow.Add(-time.Hour).Unix())), true, true, 429},
		{"JWT signed by another key, throttle refuses", "Bearer " + sign(t, jwt.SigningMethodES256, "ec1", mustEC(t), claims()), true, true, 429},
		{"empty bearer, throttle refuses", "Bearer ", true, true, 429},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			asked := false
			reached := false
			h := Middleware(a, MiddlewareOptions{ResourceMetadataURL: testPRM, Throttle: func(w http.ResponseWriter, r *http.Request) bool {
				asked = true
				if c.refuse {
					w.WriteHeader(http.StatusTooManyRequests)
				}
				return c.refuse
			}})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reached = true
				w.WriteHeader(http.StatusNoContent)
			}))
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
			if c.authz != "" {
				req.Header.Set("Authorization", c.authz)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if asked != c.wantAsked || rec.Code != c.want || reached != (c.want == 204) {
				t.Errorf("throttle asked %v (want %v), status %d (want %d), handler reached %v", asked, c.wantAsked, rec.Code, c.want, reached)
			}
		})
	}
}

func mustEC(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
