package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// OAuthConfig configures darkroom as an OAuth 2.1 resource server that accepts
// JWT access tokens (RFC 9068 style) signed by the authorization server.
type OAuthConfig struct {
	// JWKSURL is the authorization server's JWK Set (DARKROOM_OAUTH_JWKS_URL).
	// It is fetched at start (a failure is logged, not fatal), every
	// JWKSRefreshInterval, and again when a token names an unknown "kid"
	// (at most once per UnknownKIDRefreshEvery).
	JWKSURL string
	// JWKSFile is a local JWK Set file, read once, used instead of JWKSURL.
	JWKSFile string
	// Issuer must equal the token's "iss" exactly.
	Issuer string
	// Audience must appear in the token's "aud". It must be darkroom's own
	// resource URL (RFC 8707), e.g. "https://darkroom.example.com/mcp";
	// comparison is exact (mind trailing slashes).
	Audience string
	// RequiredScopes must all be present in the token's "scope" (space
	// separated string) or "scp" (string or array) claim; otherwise 403.
	RequiredScopes []string
	// ClockSkew is the leeway for exp/nbf/iat. Zero means 30s; use a negative
	// value for no leeway.
	ClockSkew time.Duration
	// AllowedAlgs are the accepted JWS "alg" values. Default RS256, ES256,
	// EdDSA. Only asymmetric algorithms are accepted (no HS*, no none).
	AllowedAlgs []string

	// HTTPClient fetches the JWKS; nil means http.DefaultClient. Responses
	// are capped at 1 MiB.
	HTTPClient *http.Client
	// JWKSRefreshInterval defaults to 1h.
	JWKSRefreshInterval time.Duration
	// UnknownKIDRefreshEvery limits refreshes caused by unknown key IDs;
	// default 1 min. A request never waits more than 5s for that limiter.
	UnknownKIDRefreshEvery time.Duration
	// Now is the clock for token times; nil means time.Now.
	Now func() time.Time
	// Logger receives JWKS refresh failures; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultClockSkew is the default leeway for token times.
const DefaultClockSkew = 30 * time.Second

// DefaultAlgs are the JWS algorithms accepted by default.
var DefaultAlgs = []string{"RS256", "ES256", "EdDSA"}

var asymmetricAlgs = []string{
	"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA",
}

const (
	maxJWKSBytes       = 1 << 20
	jwksHTTPTimeout    = 10 * time.Second
	unknownKIDMaxWait  = 5 * time.Second
	defaultJWKSRefresh = time.Hour
	defaultUnknownKID  = time.Minute
)

// Enabled reports whether OAuth is configured at all.
func (c *OAuthConfig) Enabled() bool {
	return c != nil && (c.JWKSURL != "" || c.JWKSFile != "" || c.Issuer != "")
}

func (c *OAuthConfig) validate() error {
	var errs []error
	switch {
	case c.JWKSURL == "" && c.JWKSFile == "":
		errs = append(errs, errors.New("oauth: a JWKS URL or JWKS file is required"))
	case c.JWKSURL != "" && c.JWKSFile != "":
		errs = append(errs, errors.New("oauth: give a JWKS URL or a JWKS file, not both"))
	case c.JWKSURL != "":
		u, err := url.Parse(c.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("oauth: JWKS URL %q is not an http(s) URL", c.JWKSURL))
		}
	}
	if c.Issuer == "" {
		errs = append(errs, errors.New("oauth: issuer is required"))
	} else if strings.ContainsAny(c.Issuer, " \t\r\n") {
		errs = append(errs, errors.New("oauth: issuer must not contain whitespace"))
	}
	if c.Audience == "" {
		errs = append(errs, errors.New("oauth: audience is required (darkroom's resource URL, RFC 8707)"))
	}
	for _, a := range c.AllowedAlgs {
		if !slices.Contains(asymmetricAlgs, a) {
			errs = append(errs, fmt.Errorf("oauth: algorithm %q not allowed (choose from %s)", a, strings.Join(asymmetricAlgs, ", ")))
		}
	}
	for _, s := range c.RequiredScopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			errs = append(errs, fmt.Errorf("oauth: invalid required scope %q", s))
		}
	}
	return errors.Join(errs...)
}

// jwtValidator validates access tokens with golang-jwt, resolving keys through
// keyfunc/jwkset.
type jwtValidator struct {
	kf     keyfunc.Keyfunc
	parser *jwt.Parser
	scopes []string
	cancel context.CancelFunc
}

func newJWTValidator(cfg OAuthConfig) (*jwtValidator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	skew := cfg.ClockSkew
	if skew == 0 {
		skew = DefaultClockSkew
	} else if skew < 0 {
		skew = 0
	}
	algs := cfg.AllowedAlgs
	if len(algs) == 0 {
		algs = DefaultAlgs
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}

	ctx, cancel := context.WithCancel(context.Background())
	var storage jwkset.Storage
	if cfg.JWKSFile != "" {
		raw, err := os.ReadFile(cfg.JWKSFile)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("oauth: JWKS file: %w", err)
		}
		k, err := keyfunc.NewJWKSetJSON(raw)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("oauth: JWKS file %s: %w", cfg.JWKSFile, err)
		}
		storage = k.Storage()
	} else {
		refresh := cfg.JWKSRefreshInterval
		if refresh <= 0 {
			refresh = defaultJWKSRefresh
		}
		every := cfg.UnknownKIDRefreshEvery
		if every <= 0 {
			every = defaultUnknownKID
		}
		k, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{cfg.JWKSURL}, keyfunc.Override{
			Client:      limitedClient(cfg.HTTPClient, maxJWKSBytes),
			HTTPTimeout: jwksHTTPTimeout,
			// A token with an unknown kid may trigger one refresh; the
			// limiter starts full. A request waits at most unknownKIDMaxWait
			// for it (and for the fetch), else fails at once: rate.Limiter
			// returns immediately when the deadline cannot be met.
			RateLimitWaitMax:  unknownKIDMaxWait,
			RefreshUnknownKID: rate.NewLimiter(rate.Every(every), 1),
			RefreshInterval:   refresh,
			RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
				return func(ctx context.Context, err error) {
					logger.WarnContext(ctx, "auth: JWKS refresh failed", "url", u, "error", err)
				}
			},
		})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("oauth: JWKS %s: %w", cfg.JWKSURL, err)
		}
		storage = k.Storage()
	}
	// Only keys meant for signatures (or with no "use") may verify tokens.
	kf, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: storage, UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("oauth: %w", err)
	}
	parser := jwt.NewParser(
		jwt.WithValidMethods(algs),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(skew),
		jwt.WithTimeFunc(now),
	)
	return &jwtValidator{kf: kf, parser: parser, scopes: slices.Clone(cfg.RequiredScopes), cancel: cancel}, nil
}

type accessClaims struct {
	jwt.RegisteredClaims
	Scope json.RawMessage `json:"scope,omitempty"`
	Scp   json.RawMessage `json:"scp,omitempty"`
}

// validate checks signature, alg, iss, aud, exp/nbf/iat and sub, then scopes.
// It returns an error wrapping ErrInvalidToken or ErrInsufficientScope.
func (v *jwtValidator) validate(ctx context.Context, token string) (Principal, error) {
	var c accessClaims
	if _, err := v.parser.ParseWithClaims(token, &c, v.kf.KeyfuncCtx(ctx)); err != nil {
		return Principal{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if c.Subject == "" {
		return Principal{}, fmt.Errorf("%w: token has no sub claim", ErrInvalidToken)
	}
	scopes, err := claimScopes(c.Scope, c.Scp)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	p := Principal{ID: c.Issuer + " " + c.Subject, Kind: KindOAuth, Scopes: scopes}
	for _, s := range v.scopes {
		if !slices.Contains(scopes, s) {
			return p, fmt.Errorf("%w: missing scope %q", ErrInsufficientScope, s)
		}
	}
	return p, nil
}

// claimScopes reads "scope" (RFC 9068: space-separated string) and "scp"
// (string or array, used by some IdPs).
func claimScopes(claims ...json.RawMessage) ([]string, error) {
	var out []string
	for _, raw := range claims {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			out = append(out, strings.Fields(s)...)
			continue
		}
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, errors.New("scope claim is neither a string nor an array of strings")
		}
		out = append(out, list...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (v *jwtValidator) close() { v.cancel() }

// limitedClient returns a copy of c whose responses are cut at max bytes.
func limitedClient(c *http.Client, max int64) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	}
	base := cp.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	cp.Transport = limitTransport{base: base, max: max}
	return &cp
}

type limitTransport struct {
	base http.RoundTripper
	max  int64
}

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, t.max), resp.Body}
	return resp, nil
}
