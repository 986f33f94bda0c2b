package auth

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// WellKnownPRM is the RFC 9728 well-known path prefix.
const WellKnownPRM = "/.well-known/oauth-protected-resource"

// PRMHandler serves OAuth 2.0 Protected Resource Metadata (RFC 9728) for
// resource, e.g. "https://darkroom.example.com/mcp":
//
//	{"resource": "...", "authorization_servers": [...], "scopes_supported": [...],
//	 "bearer_methods_supported": ["header"], "resource_name": "darkroom"}
//
// It answers GET (and CORS preflight OPTIONS) with Access-Control-Allow-Origin
// "*", as the metadata is public; other methods get 405. Mount it, outside the
// auth middleware, at every path of PRMPaths(resource). It is go-sdk's
// auth.ProtectedResourceMetadataHandler over oauthex.ProtectedResourceMetadata.
func PRMHandler(resource string, authServers []string, scopes []string) http.Handler {
	return sdkauth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   slices.Clone(authServers),
		ScopesSupported:        slices.Clone(scopes),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "darkroom",
	})
}

// PRMPaths returns the paths at which to mount PRMHandler: the root
// well-known path and, when resource has a path such as "/mcp", the
// path-suffixed one ("/.well-known/oauth-protected-resource/mcp").
func PRMPaths(resource string) ([]string, error) {
	u, err := parseResource(resource)
	if err != nil {
		return nil, err
	}
	paths := []string{WellKnownPRM}
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		paths = append(paths, WellKnownPRM+p)
	}
	return paths, nil
}

// MetadataURL returns the metadata URL for resource per RFC 9728 §3.1 (the
// well-known segment is inserted between host and path), for use as
// MiddlewareOptions.ResourceMetadataURL:
// "https://h/mcp" → "https://h/.well-known/oauth-protected-resource/mcp".
func MetadataURL(resource string) (string, error) {
	u, err := parseResource(resource)
	if err != nil {
		return "", err
	}
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	return u.Scheme + "://" + u.Host + WellKnownPRM + p, nil
}

func parseResource(resource string) (*url.URL, error) {
	u, err := url.Parse(resource)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("resource %q must be an absolute http(s) URL without query or fragment", resource)
	}
	return u, nil
}
