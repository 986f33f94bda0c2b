package auth

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
)

// MiddlewareOptions configure Middleware.
type MiddlewareOptions struct {
	// ResourceMetadataURL is the absolute URL of the Protected Resource
	// Metadata (see MetadataURL), advertised as resource_metadata in every
	// WWW-Authenticate challenge. Leave it empty unless that URL is served:
	// a client that finds it follows OAuth discovery, and a 404 there sends
	// it into an interactive flow instead of asking for a key.
	ResourceMetadataURL string
	// Scopes are advertised as scope="..." in challenges. Default: the
	// authenticator's required OAuth scopes.
	Scopes []string
	// Logger receives one Debug line per rejected request (reason, remote
	// address, method, path; never the token). nil means slog.Default().
	Logger *slog.Logger
	// Throttle, when set, is called for a request whose bearer token was
	// checked and did not authenticate (a guess), and only then: never
	// before the token is checked, never for a valid token (nor one that
	// lacks a scope) and never for a request without a token. When it
	// returns true it has answered the request (e.g. 429) and no 401 is
	// written. A guesser can therefore never slow a valid caller.
	Throttle func(w http.ResponseWriter, r *http.Request) bool
}

// Middleware authenticates every request and stores the Principal in the
// request context (read it with FromContext).
//
//   - Local mode: every request is Local; the Authorization header is ignored.
//   - No usable "Authorization: Bearer" header: 401,
//     WWW-Authenticate: Bearer resource_metadata="..."[, scope="..."]
//     (just "Bearer" without a metadata URL). Without OAuth the body says
//     an API key is expected and how to send it.
//   - Token given but unknown/invalid/expired: 401,
//     WWW-Authenticate: Bearer error="invalid_token", resource_metadata="..."[, scope="..."].
//     When opts.Throttle refuses the guess, its answer instead (429).
//   - Valid OAuth token lacking a required scope: 403,
//     WWW-Authenticate: Bearer error="insufficient_scope", scope="...", resource_metadata="...".
//
// Error bodies are small JSON objects {"error": ..., "error_description": ...}.
// Tokens are only read from the header, never from the query string. Mount the
// PRM handler outside this middleware.
func Middleware(a *Authenticator, opts MiddlewareOptions) func(http.Handler) http.Handler {
	if a == nil {
		panic("auth.Middleware: nil Authenticator")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	scopes := opts.Scopes
	if len(scopes) == 0 {
		scopes = a.RequiredScopes()
	}
	scope := strings.Join(scopes, " ")
	prm := opts.ResourceMetadataURL
	missing, invalid := keyHelp(a.OAuthEnabled(), a.keys.Len() > 0)

	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a.LocalMode() {
				next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), Local)))
				return
			}
			reject := func(status int, errCode, desc string, reason error) {
				logger.DebugContext(r.Context(), "auth: request rejected",
					"status", status, "reason", reason, "remote", r.RemoteAddr,
					"method", r.Method, "path", r.URL.Path)
				h := w.Header()
				h.Set("WWW-Authenticate", Challenge(errCode, scope, prm))
				h.Set("Content-Type", "application/json")
				h.Set("Cache-Control", "no-store")
				w.WriteHeader(status)
				body := map[string]string{"error": errCode, "error_description": desc}
				if errCode == "" {
					body["error"] = "unauthorized"
				}
				enc := json.NewEncoder(w)
				enc.SetEscapeHTML(false) // "<key>" reads as such in a raw body
				_ = enc.Encode(body)
			}

			token, given := bearerToken(r)
			if !given {
				reject(http.StatusUnauthorized, "", missing, errors.New("no bearer token"))
				return
			}
			p, err := a.Authenticate(r.Context(), token)
			switch {
			case err == nil:
				next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
			case errors.Is(err, ErrInsufficientScope):
				reject(http.StatusForbidden, "insufficient_scope", "the token lacks a required scope", err)
			default:
				if opts.Throttle != nil && opts.Throttle(w, r) {
					logger.DebugContext(r.Context(), "auth: guess throttled", "reason", err, "remote", r.RemoteAddr,
						"method", r.Method, "path", r.URL.Path)
					return
				}
				reject(http.StatusUnauthorized, "invalid_token", invalid, err)
			}
		})
	}
}

// keyHelp returns the 401 descriptions for a missing and an invalid token,
// naming what this server accepts, so a person (or a client showing the
// body) learns that a key is expected rather than an OAuth login.
// NoRegistration answers an OAuth dynamic client registration (RFC 7591)
// on a server that takes API keys only. A client that meets a 401
// without resource metadata tries OAuth against the server's own origin
// and ends at POST /register; mcp-remote, for one, then prints the
// registration's answer and nothing else its user could act on, so the
// answer is an RFC 7591 error that says what to send instead.
func NoRegistration(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusBadRequest)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{
		"error": "invalid_client_metadata",
		"error_description": "this MCP server has no OAuth sign-in: it takes an API key, sent as the header " +
			"\"Authorization: Bearer <key>\" (mcp-remote: --header \"Authorization: Bearer <key>\")",
	})
}

func keyHelp(oauth, keys bool) (missing, invalid string) {
	switch {
	case !oauth:
		return "an API key is required: send it as the header \"Authorization: Bearer <key>\"",
			"the API key is not valid: send a key this server knows as \"Authorization: Bearer <key>\""
	case keys:
		return "a bearer token is required: an API key or an OAuth access token, as \"Authorization: Bearer <token>\"",
			"the token is invalid or expired"
	default:
		return "missing bearer token", "the token is invalid or expired"
	}
}

// bearerToken returns the token of the request's Authorization header. given
// is false when there is no Authorization header or it uses another scheme
// (RFC 6750 §3.1: then the challenge carries no error code). A malformed
// Bearer header (empty token, several headers) is returned as given with an
// empty token, which then fails as invalid_token.
func bearerToken(r *http.Request) (token string, given bool) {
	vals := r.Header.Values("Authorization")
	if len(vals) == 0 {
		return "", false
	}
	if len(vals) > 1 {
		return "", true
	}
	scheme, rest, _ := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if strings.ContainsAny(rest, " \t") {
		return "", true
	}
	return rest, true
}

// Challenge formats a Bearer WWW-Authenticate value. errCode is "",
// "invalid_token" or "insufficient_scope"; empty scope or metadata URL are
// left out. For insufficient_scope the order is error, scope,
// resource_metadata; otherwise error, resource_metadata, scope.
func Challenge(errCode, scope, resourceMetadataURL string) string {
	var params []string
	if errCode != "" {
		params = append(params, param("error", errCode))
	}
	if errCode == "insufficient_scope" && scope != "" {
		params = append(params, param("scope", scope))
	}
	if resourceMetadataURL != "" {
		params = append(params, param("resource_metadata", resourceMetadataURL))
	}
	if errCode != "insufficient_scope" && scope != "" {
		params = append(params, param("scope", scope))
	}
	if len(params) == 0 {
		return "Bearer"
	}
	return "Bearer " + strings.Join(params, ", ")
}

func param(k, v string) string {
	v = strings.ReplaceAll(v, `\`, `\\`)
	v = strings.ReplaceAll(v, `"`, `\"`)
	return k + `="` + v + `"`
}
