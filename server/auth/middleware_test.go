package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"Bearer eyJhbGciOi.abc.def", "Bearer [REDACTED]"},
		{"Basic YWxpY2U6c2VjcmV0", "Basic [REDACTED]"},
		{"rawsecret", "[REDACTED]"},
		{"weird:scheme secret", "[REDACTED]"},
	}
	for _, tt := range tests {
		if got := Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer tok")
	h.Set("Cookie", "session=abc")
	h.Set("Accept", "application/json")
	r := RedactHeaders(h)
	if r.Get("Authorization") != "Bearer [REDACTED]" || r.Get("Cookie") != "[REDACTED]" || r.Get("Accept") != "application/json" {
		t.Errorf("RedactHeaders = %v", r)
	}
	if h.Get("Authorization") != "Bearer tok" {
		t.Error("RedactHeaders modified its input")
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
