// Package auth authenticates HTTP callers of darkroom.
//
// A caller is identified by a [Principal]. Three kinds exist, and their IDs live
// in disjoint namespaces so that a record's owner can never be claimed by a
// caller of another kind:
//
//   - "key":   API keys from DARKROOM_API_KEYS_FILE / DARKROOM_API_KEYS.
//     ID = "key:" + name (names are [A-Za-z0-9._-], so the ID has no space).
//   - "oauth": OAuth 2.1 JWT access tokens. ID = iss + " " + sub, separated by
//     one ASCII space. An issuer is an https URL and cannot contain a space, so
//     splitting at the first space recovers (iss, sub) unambiguously.
//   - "local": the single local user ([Local], ID "local"), used on stdio and
//     when nothing is configured on a loopback-only HTTP listener.
//
// The [Authenticator] tries API keys first, then JWTs. When neither is
// configured it is in local mode and every request is [Local]; [CheckBind]
// refuses to expose such a server on a non-loopback address.
//
// Secrets are never stored: only SHA-256 hashes of API keys are kept, and
// tokens are never logged.
package auth

import (
	"context"
	"slices"
)

// Principal kinds.
const (
	KindKey   = "key"
	KindOAuth = "oauth"
	KindLocal = "local"
)

// Principal is an authenticated caller.
type Principal struct {
	// ID is stable and unique across kinds; use it as the owner of records.
	ID string
	// Kind is "key", "oauth" or "local".
	Kind string
	// Scopes granted by an OAuth token. API keys and the local principal carry
	// every scope (see HasScope) and leave this nil.
	Scopes []string
	// Limits are per-caller overrides of server defaults (API keys only).
	Limits Overrides
}

// Overrides are per-caller limits; nil means "use the server default".
type Overrides struct {
	PollRate             *float64 // rate=      poll requests per second
	PollBurst            *int     // burst=     poll bucket size
	CreateRate           *float64 // createRate= creations per second
	CreateBurst          *int     // createBurst= creation bucket size
	BudgetPerDay         *int64   // budget=    credits per day
	ApprovalAboveCredits *int64   // approvalAbove= ask for approval above this cost
	MaxInFlight          *int     // inflight=  concurrent unfinished generations
}

// Local is the principal of the local user (stdio, or an unauthenticated
// loopback listener).
var Local = Principal{ID: "local", Kind: KindLocal}

// HasScope reports whether p may act with scope s. API-key and local
// principals hold every scope; OAuth principals hold the scopes of their token.
func (p Principal) HasScope(s string) bool {
	if p.Kind == KindKey || p.Kind == KindLocal {
		return true
	}
	return slices.Contains(p.Scopes, s)
}

type principalKey struct{}

// WithPrincipal returns a copy of ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal stored by WithPrincipal (or Middleware).
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
