package auth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/netx"
)

// Errors returned by Authenticate. Middleware maps ErrInvalidToken to 401 and
// ErrInsufficientScope to 403.
var (
	ErrInvalidToken      = errors.New("invalid token")
	ErrInsufficientScope = errors.New("insufficient scope")
)

// Config selects the authentication methods. With no keys and no OAuth the
// Authenticator is in local mode.
type Config struct {
	Keys  []APIKey
	OAuth *OAuthConfig // nil or !Enabled(): no OAuth
}

// Authenticator turns a bearer token into a Principal. It is safe for
// concurrent use.
type Authenticator struct {
	keys *KeyStore
	jwt  *jwtValidator
}

// New builds an Authenticator. For a JWKS URL it fetches the key set once
// (a failure is logged and retried on demand, not fatal) and starts a refresh
// goroutine that Close stops.
func New(cfg Config) (*Authenticator, error) {
	ks, err := NewKeyStore(cfg.Keys)
	if err != nil {
		return nil, err
	}
	a := &Authenticator{keys: ks}
	if cfg.OAuth.Enabled() {
		v, err := newJWTValidator(*cfg.OAuth)
		if err != nil {
			return nil, err
		}
		a.jwt = v
	}
	return a, nil
}

// Close stops the JWKS refresh goroutine, if any.
func (a *Authenticator) Close() {
	if a != nil && a.jwt != nil {
		a.jwt.close()
	}
}

// LocalMode reports that neither API keys nor OAuth are configured: every
// request is the Local principal. Only safe on loopback (see CheckBind).
// A nil Authenticator is not local mode: it panics, failing closed.
func (a *Authenticator) LocalMode() bool {
	return a.keys.Len() == 0 && a.jwt == nil
}

// OAuthEnabled reports whether JWT access tokens are accepted.
func (a *Authenticator) OAuthEnabled() bool { return a.jwt != nil }

// RequiredScopes returns the scopes every OAuth token must carry.
func (a *Authenticator) RequiredScopes() []string {
	if a.jwt == nil {
		return nil
	}
	return slices.Clone(a.jwt.scopes)
}

// Authenticate resolves a bearer token: first against the API keys (constant
// time), then as a JWT access token. In local mode it returns Local for any
// token. Errors wrap ErrInvalidToken or ErrInsufficientScope and never
// contain the token.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Principal, error) {
	if a.LocalMode() {
		return Local, nil
	}
	if token == "" {
		return Principal{}, fmt.Errorf("%w: no token", ErrInvalidToken)
	}
	if k, ok := a.keys.Lookup(token); ok {
		return k.Principal(), nil
	}
	if a.jwt == nil {
		return Principal{}, fmt.Errorf("%w: unknown API key", ErrInvalidToken)
	}
	return a.jwt.validate(ctx, token)
}

// Environment variables read by ConfigFromEnv.
const (
	EnvAPIKeysFile     = "DARKROOM_API_KEYS_FILE"
	EnvAPIKeys         = "DARKROOM_API_KEYS"
	EnvOAuthJWKSURL    = "DARKROOM_OAUTH_JWKS_URL"
	EnvOAuthJWKSFile   = "DARKROOM_OAUTH_JWKS_FILE"
	EnvOAuthIssuer     = "DARKROOM_OAUTH_ISSUER"
	EnvOAuthAudience   = "DARKROOM_OAUTH_AUDIENCE"   // default: the resource URL
	EnvOAuthScopes     = "DARKROOM_OAUTH_SCOPES"     // space or comma separated
	EnvOAuthClockSkew  = "DARKROOM_OAUTH_CLOCK_SKEW" // Go duration, default 30s
	EnvOAuthAlgorithms = "DARKROOM_OAUTH_ALGORITHMS" // default "RS256,ES256,EdDSA"
)

// ConfigFromEnv reads the variables above. resource is darkroom's own
// resource URL (e.g. "https://host/mcp"); it is the default audience.
// getenv is usually os.Getenv.
func ConfigFromEnv(getenv func(string) string, resource string) (Config, error) {
	var cfg Config
	var errs []error
	if path := strings.TrimSpace(getenv(EnvAPIKeysFile)); path != "" {
		keys, err := LoadKeyFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvAPIKeysFile, err))
		}
		cfg.Keys = append(cfg.Keys, keys...)
	}
	if list := getenv(EnvAPIKeys); strings.TrimSpace(list) != "" {
		keys, err := ParseKeyList(list, EnvAPIKeys)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.Keys = append(cfg.Keys, keys...)
	}
	if len(errs) == 0 {
		if dup := checkUnique(cfg.Keys); len(dup) > 0 {
			errs = append(errs, dup...)
		}
	}
	o := &OAuthConfig{
		JWKSURL:  strings.TrimSpace(getenv(EnvOAuthJWKSURL)),
		JWKSFile: strings.TrimSpace(getenv(EnvOAuthJWKSFile)),
		Issuer:   strings.TrimSpace(getenv(EnvOAuthIssuer)),
		Audience: strings.TrimSpace(getenv(EnvOAuthAudience)),
	}
	anyOAuth := false
	for _, k := range []string{EnvOAuthJWKSURL, EnvOAuthJWKSFile, EnvOAuthIssuer, EnvOAuthAudience, EnvOAuthScopes, EnvOAuthClockSkew, EnvOAuthAlgorithms} {
		anyOAuth = anyOAuth || strings.TrimSpace(getenv(k)) != ""
	}
	// Any DARKROOM_OAUTH_* variable turns OAuth on, so a half-done setup
	// fails loudly instead of being ignored.
	if anyOAuth {
		if o.Audience == "" {
			o.Audience = resource
		}
		o.RequiredScopes = splitList(getenv(EnvOAuthScopes))
		o.AllowedAlgs = splitList(getenv(EnvOAuthAlgorithms))
		if s := strings.TrimSpace(getenv(EnvOAuthClockSkew)); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a duration such as 30s", EnvOAuthClockSkew, s))
			} else if d == 0 {
				o.ClockSkew = -1 // explicit zero: no leeway
			} else {
				o.ClockSkew = d
			}
		}
		if err := o.validate(); err != nil {
			errs = append(errs, err)
		}
		cfg.OAuth = o
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return cfg, nil
}

func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
}

// Configured reports whether cfg enables any authentication.
func (c Config) Configured() bool { return len(c.Keys) > 0 || c.OAuth.Enabled() }

// CheckBind refuses to listen on a non-loopback address when no
// authentication is configured (local mode would hand every caller on the
// network the local principal). addr is a net.Listen address such as
// "127.0.0.1:8080", "[::1]:8080", "localhost:8080" or ":8080".
func CheckBind(addr string, authConfigured bool) error {
	if authConfigured {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if netx.Loopback(strings.ToLower(host)) { // a name to resolve: any case
		return nil
	}
	shown := host
	if shown == "" {
		shown = "all interfaces"
	}
	return fmt.Errorf("refusing to listen on %q (%s) without authentication: "+
		"set %s or %s (API keys) or %s (OAuth), or listen on 127.0.0.1 / [::1] / localhost",
		addr, shown, EnvAPIKeysFile, EnvAPIKeys, EnvOAuthJWKSURL)
}
