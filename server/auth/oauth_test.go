package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

const (
	testIssuer   = "https://idp.example"
	testResource = "https://darkroom.example/mcp"
	testPRM      = "https://darkroom.example/.well-known/oauth-protected-resource/mcp"
	testScope    = "darkroom:generate"
)

var testNow = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

// Keys are generated once per test binary; RSA generation is slow under -race.
var (
	keysOnce                 sync.Once
	rsaKey1, rsaKey2, rsaBad *rsa.PrivateKey
	ecKey                    *ecdsa.PrivateKey
	edKey                    ed25519.PrivateKey
)

func testKeys(t *testing.T) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		must := func(e error) {
			if e != nil && err == nil {
				err = e
			}
		}
		rsaKey1, err = rsa.GenerateKey(rand.Reader, 2048)
		k2, e := rsa.GenerateKey(rand.Reader, 2048)
		must(e)
		rsaKey2 = k2
		kb, e := rsa.GenerateKey(rand.Reader, 2048)
		must(e)
		rsaBad = kb
		ec, e := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(e)
		ecKey = ec
		_, ed, e := ed25519.GenerateKey(rand.Reader)
		must(e)
		edKey = ed
		if err != nil {
			panic(err)
		}
	})
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwk builds a public JWK by hand, independently of the library under test.
func jwk(t *testing.T, kid string, pub crypto.PublicKey) map[string]string {
	t.Helper()
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
			"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
	case *ecdsa.PublicKey:
		e, err := k.ECDH()
		if err != nil {
			t.Fatal(err)
		}
		raw := e.Bytes() // 0x04 || X || Y
		return map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "alg": "ES256",
			"x": b64(raw[1:33]), "y": b64(raw[33:65])}
	case ed25519.PublicKey:
		return map[string]string{"kty": "OKP", "kid": kid, "crv": "Ed25519", "alg": "EdDSA", "x": b64(k)}
	}
	t.Fatalf("unsupported key %T", pub)
	return nil
}

func jwks(t *testing.T, keys ...map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testIdP serves a JWK Set that a test may swap, counting fetches.
type testIdP struct {
	*httptest.Server
	mu      sync.Mutex
	body    []byte
	fetches atomic.Int32
}

func newIdP(t *testing.T, body []byte) *testIdP {
	idp := &testIdP{body: body}
	idp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		idp.fetches.Add(1)
		idp.mu.Lock()
		b := idp.body
		idp.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	t.Cleanup(idp.Close)
	return idp
}

func (idp *testIdP) set(body []byte) {
	idp.mu.Lock()
	idp.body = body
	idp.mu.Unlock()
}

func oauthConfig(url string) *OAuthConfig {
	return &OAuthConfig{
		JWKSURL:        url,
		Issuer:         testIssuer,
		Audience:       testResource,
		RequiredScopes: []string{testScope},
		Now:            func() time.Time { return testNow },
		Logger:         slog.New(slog.DiscardHandler),
	}
}

func newAuth(t *testing.T, cfg Config) *Authenticator {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// claims returns valid claims; mutate them per test.
func claims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss":   testIssuer,
		"sub":   "user-1",
		"aud":   testResource,
		"iat":   testNow.Add(-time.Minute).Unix(),
		"exp":   testNow.Add(time.Hour).Unix(),
		"scope": testScope + " other",
	}
}

func sign(t *testing.T, m jwt.SigningMethod, kid string, key any, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	c = jwt.MapClaims(copyMap(c))
	if v == nil {
		delete(c, k)
	} else {
		c[k] = v
	}
	return c
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// serve runs the middleware once and returns the recorder and the principal
// seen by the inner handler (if reached).
func serve(t *testing.T, a *Authenticator, authz string) (*httptest.ResponseRecorder, *Principal) {
	t.Helper()
	var seen *Principal
	h := Middleware(a, MiddlewareOptions{ResourceMetadataURL: testPRM})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := FromContext(r.Context())
		if !ok {
			t.Error("no principal in context")
		}
		seen = &p
		w.WriteHeader(http.StatusNoContent)
	}))
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec, seen
}

func TestJWTMiddleware(t *testing.T) {
	testKeys(t)
	idp := newIdP(t, jwks(t, jwk(t, "rsa1", &rsaKey1.PublicKey), jwk(t, "ec1", &ecKey.PublicKey), jwk(t, "ed1", edKey.Public())))
	alice, err := NewAPIKey("alice", []byte("alice-secret-123"), Overrides{PollRate: ptr(9.0)})
	if err != nil {
		t.Fatal(err)
	}
	a := newAuth(t, Config{Keys: []APIKey{alice}, OAuth: oauthConfig(idp.URL)})

	rs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodRS256, "rsa1", rsaKey1, c) }
	tampered := func() string {
		parts := strings.Split(rs(claims()), ".")
		parts[1] = b64([]byte(`{"iss":"` + testIssuer + `","sub":"admin","aud":"` + testResource + `","exp":9999999999,"scope":"` + testScope + `"}`))
		return strings.Join(parts, ".")
	}
	noneTok := func() string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// HS256 keyed with the RSA public key bytes: the classic alg-confusion attack.
	hsTok := sign(t, jwt.SigningMethodHS256, "rsa1", []byte(rsaKey1.PublicKey.N.Bytes()), claims())

	wwwNoToken := `Bearer resource_metadata="` + testPRM + `", scope="` + testScope + `"`
	wwwInvalid := `Bearer error="invalid_token", resource_metadata="` + testPRM + `", scope="` + testScope + `"`
	wwwScope := `Bearer error="insufficient_scope", scope="` + testScope + `", resource_metadata="` + testPRM + `"`

	tests := []struct {
		name   string
		authz  string
		status int
		www    string
		wantID string
	}{
		{"RS256 valid", "Bearer " + rs(claims()), 204, "", testIssuer + " user-1"},
		{"ES256 valid", "Bearer " + sign(t, jwt.SigningMethodES256, "ec1", ecKey, claims()), 204, "", testIssuer + " user-1"},
		{"EdDSA valid", "Bearer " + sign(t, jwt.SigningMethodEdDSA, "ed1", edKey, claims()), 204, "", testIssuer + " user-1"},
		{"no kid, key found by trying the set", "Bearer " + sign(t, jwt.SigningMethodES256, "", ecKey, claims()), 204, "", testIssuer + " user-1"},
		{"lower-case scheme", "bearer " + rs(claims()), 204, "", testIssuer + " user-1"},
		{"aud array containing us", "Bearer " + rs(with(claims(), "aud", []string{"other", testResource})), 204, "", testIssuer + " user-1"},
		{"scp array", "Bearer " + rs(with(with(claims(), "scope", nil), "scp", []string{testScope})), 204, "", testIssuer + " user-1"},
		{"expired within skew", "Bearer " + rs(with(claims(), "exp", testNow.Add(-20*time.Second).Unix())), 204, "", testIssuer + " user-1"},
		{"API key", "Bearer alice-secret-123", 204, "", "key:alice"},

		{"no token", "", 401, wwwNoToken, ""},
		{"basic auth", "Basic YWxpY2U6eA==", 401, wwwNoToken, ""},
		{"empty bearer", "Bearer ", 401, wwwInvalid, ""},
		{"unknown API key", "Bearer alice-secret-124", 401, wwwInvalid, ""},
		{"expired", "Bearer " + rs(with(claims(), "exp", testNow.Add(-time.Minute).Unix())), 401, wwwInvalid, ""},
		{"no exp", "Bearer " + rs(with(claims(), "exp", nil)), 401, wwwInvalid, ""},
		{"not yet valid", "Bearer " + rs(with(claims(), "nbf", testNow.Add(time.Minute).Unix())), 401, wwwInvalid, ""},
		{"issued in the future", "Bearer " + rs(with(claims(), "iat", testNow.Add(time.Minute).Unix())), 401, wwwInvalid, ""},
		{"wrong audience", "Bearer " + rs(with(claims(), "aud", "https://other.example/mcp")), 401, wwwInvalid, ""},
		{"audience with trailing slash", "Bearer " + rs(with(claims(), "aud", testResource+"/")), 401, wwwInvalid, ""},
		{"no audience", "Bearer " + rs(with(claims(), "aud", nil)), 401, wwwInvalid, ""},
		{"wrong issuer", "Bearer " + rs(with(claims(), "iss", "https://evil.example")), 401, wwwInvalid, ""},
		{"no sub", "Bearer " + rs(with(claims(), "sub", nil)), 401, wwwInvalid, ""},
		{"bad signature", "Bearer " + sign(t, jwt.SigningMethodRS256, "rsa1", rsaBad, claims()), 401, wwwInvalid, ""},
		{"tampered payload", "Bearer " + tampered(), 401, wwwInvalid, ""},
		{"alg none", "Bearer " + noneTok(), 401, wwwInvalid, ""},
		{"alg HS256 confusion", "Bearer " + hsTok, 401, wwwInvalid, ""},
		{"RS384 not allowed", "Bearer " + sign(t, jwt.SigningMethodRS384, "rsa1", rsaKey1, claims()), 401, wwwInvalid, ""},
		{"kid of another key type", "Bearer " + sign(t, jwt.SigningMethodRS256, "ec1", rsaKey1, claims()), 401, wwwInvalid, ""},
		{"garbage", "Bearer not.a.jwt", 401, wwwInvalid, ""},
		{"missing scope", "Bearer " + rs(with(claims(), "scope", "other")), 403, wwwScope, ""},
		{"no scope claim", "Bearer " + rs(with(claims(), "scope", nil)), 403, wwwScope, ""},
	}
	// Each rejection must fail for its own reason, not an incidental one.
	reasons := map[string]string{
		"expired":                      "token is expired",
		"no exp":                       "exp claim is required",
		"not yet valid":                "token is not valid yet",
		"issued in the future":         "token used before issued",
		"wrong audience":               "invalid audience",
		"audience with trailing slash": "invalid audience",
		"no audience":                  "aud claim is required",
		"wrong issuer":                 "invalid issuer",
		"no sub":                       "no sub claim",
		"bad signature":                "verification error",
		"tampered payload":             "verification error",
		"alg none":                     "signing method none is invalid",
		"alg HS256 confusion":          "signing method HS256 is invalid",
		"RS384 not allowed":            "signing method RS384 is invalid",
		"kid of another key type":      `does not match token "alg"`,
		"missing scope":                `missing scope "darkroom:generate"`,
		"no scope claim":               `missing scope "darkroom:generate"`,
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, p := serve(t, a, tt.authz)
			if want, ok := reasons[tt.name]; ok {
				tok := strings.TrimSpace(strings.TrimPrefix(tt.authz, "Bearer "))
				if _, err := a.Authenticate(t.Context(), tok); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Authenticate error = %v, want %q", err, want)
				}
			}
			if rec.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", rec.Code, tt.status, rec.Body)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != tt.www {
				t.Errorf("WWW-Authenticate = %s\n                     want %s", got, tt.www)
			}
			if tt.status != 204 {
				if p != nil {
					t.Error("inner handler reached")
				}
				checkErrorBody(t, rec)
				return
			}
			if p == nil || p.ID != tt.wantID {
				t.Fatalf("principal = %+v, want ID %q", p, tt.wantID)
			}
			if strings.HasPrefix(tt.wantID, "key:") {
				if p.Kind != KindKey || p.Limits.PollRate == nil || *p.Limits.PollRate != 9 {
					t.Errorf("key principal = %+v", p)
				}
			} else if p.Kind != KindOAuth || !p.HasScope(testScope) {
				t.Errorf("oauth principal = %+v", p)
			}
		})
	}
	if n := idp.fetches.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times, want 1 (no unknown kid in this table)", n)
	}
}

func checkErrorBody(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["error"] == "" || body["error_description"] == "" {
		t.Errorf("body %q: %v", rec.Body, err)
	}
	// The challenge must parse as RFC 9110 auth params (as MCP clients do).
	ch, err := oauthex.ParseWWWAuthenticate(rec.Header().Values("WWW-Authenticate"))
	if err != nil || len(ch) != 1 || ch[0].Scheme != "bearer" || ch[0].Params["resource_metadata"] != testPRM {
		t.Errorf("challenge %v: %v", ch, err)
	}
}

func TestUnknownKIDRefreshesOnce(t *testing.T) {
	testKeys(t)
	idp := newIdP(t, jwks(t, jwk(t, "rsa1", &rsaKey1.PublicKey)))
	a := newAuth(t, Config{OAuth: oauthConfig(idp.URL)})
	if n := idp.fetches.Load(); n != 1 {
		t.Fatalf("initial fetches = %d, want 1", n)
	}

	// The IdP rotates in a new key; a token signed with it names an unknown kid.
	idp.set(jwks(t, jwk(t, "rsa1", &rsaKey1.PublicKey), jwk(t, "rsa2", &rsaKey2.PublicKey)))
	rec, p := serve(t, a, "Bearer "+sign(t, jwt.SigningMethodRS256, "rsa2", rsaKey2, claims()))
	if rec.Code != 204 || p == nil {
		t.Fatalf("rotated key: status %d, body %s", rec.Code, rec.Body)
	}
	if n := idp.fetches.Load(); n != 2 {
		t.Fatalf("fetches after unknown kid = %d, want 2", n)
	}

	// Now-known kid: no fetch. Another unknown kid: refresh is rate-limited,
	// so it fails at once without fetching.
	rec, _ = serve(t, a, "Bearer "+sign(t, jwt.SigningMethodRS256, "rsa2", rsaKey2, claims()))
	if rec.Code != 204 {
		t.Fatalf("known kid: status %d", rec.Code)
	}
	start := time.Now()
	rec, _ = serve(t, a, "Bearer "+sign(t, jwt.SigningMethodRS256, "nope", rsaKey2, claims()))
	if rec.Code != 401 {
		t.Fatalf("unknown kid: status %d", rec.Code)
	}
	if n := idp.fetches.Load(); n != 2 {
		t.Errorf("fetches = %d, want still 2", n)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("rate-limited unknown kid took %v, want immediate failure", d)
	}
}

func TestJWKSFile(t *testing.T) {
	testKeys(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwks(t, jwk(t, "ed1", edKey.Public())), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := oauthConfig("")
	cfg.JWKSFile = path
	cfg.RequiredScopes = nil
	a := newAuth(t, Config{OAuth: cfg})
	p, err := a.Authenticate(t.Context(), sign(t, jwt.SigningMethodEdDSA, "ed1", edKey, with(claims(), "scope", nil)))
	if err != nil || p.ID != testIssuer+" user-1" || p.Kind != KindOAuth || len(p.Scopes) != 0 {
		t.Fatalf("p = %+v, err = %v", p, err)
	}
}

func TestOAuthConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*OAuthConfig)
		want string
	}{
		{"no jwks", func(c *OAuthConfig) { c.JWKSURL = "" }, "JWKS URL or JWKS file is required"},
		{"both", func(c *OAuthConfig) { c.JWKSFile = "/x" }, "not both"},
		{"bad url", func(c *OAuthConfig) { c.JWKSURL = "ftp://x" }, "not an http(s) URL"},
		{"no issuer", func(c *OAuthConfig) { c.Issuer = "" }, "issuer is required"},
		{"no audience", func(c *OAuthConfig) { c.Audience = "" }, "audience is required"},
		{"symmetric alg", func(c *OAuthConfig) { c.AllowedAlgs = []string{"HS256"} }, `"HS256" not allowed`},
		{"bad scope", func(c *OAuthConfig) { c.RequiredScopes = []string{`a"b`} }, "invalid required scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := oauthConfig("https://idp.example/jwks")
			tt.mod(c)
			_, err := New(Config{OAuth: c})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestJWKSResponseIsCapped(t *testing.T) {
	testKeys(t)
	// A valid key set behind more than 1 MiB of leading whitespace: the
	// truncated body does not parse, so no key is loaded.
	body := append([]byte(strings.Repeat(" ", maxJWKSBytes)), jwks(t, jwk(t, "rsa1", &rsaKey1.PublicKey))...)
	idp := newIdP(t, body)
	a := newAuth(t, Config{OAuth: oauthConfig(idp.URL)})
	_, err := a.Authenticate(t.Context(), sign(t, jwt.SigningMethodRS256, "rsa1", rsaKey1, claims()))
	if err == nil {
		t.Fatal("token accepted with a key from an oversized JWKS")
	}
	// Same body within the cap is accepted.
	idp2 := newIdP(t, body[maxJWKSBytes-100:])
	a2 := newAuth(t, Config{OAuth: oauthConfig(idp2.URL)})
	if _, err := a2.Authenticate(t.Context(), sign(t, jwt.SigningMethodRS256, "rsa1", rsaKey1, claims())); err != nil {
		t.Fatal(err)
	}
}
