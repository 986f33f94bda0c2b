package gentask

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"
)

// DefaultApprovalTTL is how long an approval token stays valid when
// ApprovalToken.TTL is not set.
const DefaultApprovalTTL = 10 * time.Minute

// approvalPurpose is the first field under every approval MAC. The secret
// also keys other HMACs (signed file links, say); this tag keeps a MAC made
// for one use from ever verifying as another, and its version lets the
// layout change without old tokens meaning something new.
const approvalPurpose = "darkroom/gentask/approval-token/v1"

// Token layout, before base64url (no padding): one version byte, the expiry
// in Unix milliseconds (8 bytes, big-endian), the HMAC-SHA256 (32 bytes).
// The owner and the digest are not carried: the checker knows them, and
// the MAC binds them.
const (
	tokenVersion = 1
	tokenRawLen  = 1 + 8 + sha256.Size
)

// tokenEncoding is strict: a token has exactly one spelling (no padding,
// no stray bits in the last character, no line breaks).
var tokenEncoding = base64.RawURLEncoding.Strict()

// ApprovalToken signs and checks the requestState that carries a pending
// spend approval through an MRTR round trip: the server hands the token
// out with its elicitation, and accepts the answer only when the retry
// echoes a token made for the same caller and the same arguments, before
// it expired.
//
// The token does not split a text payload on a separator: the owner and
// the digest go under the MAC as length-prefixed fields, so any owner id
// (Auth0 subjects such as "auth0|5f7c8ec7…", ids with spaces, dots, '=' or
// non-ASCII text) works, and no pair of fields can pass for another pair
// ("a|b","c" is not "a","b|c"). A zero ApprovalToken with a Secret set is
// ready to use; it is safe for concurrent use as long as its fields are not
// changed.
type ApprovalToken struct {
	// Secret keys the HMAC. With an empty Secret, Sign returns "" and
	// Valid reports false: never a token anyone could forge.
	Secret []byte
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// TTL is how long a token is valid after Sign (<= 0:
	// DefaultApprovalTTL).
	TTL time.Duration
}

func (a *ApprovalToken) now() time.Time {
	if a.Now == nil {
		return time.Now()
	}
	return a.Now()
}

// Sign returns a token approving digest (of the request's arguments) for
// owner, valid for TTL from now. The token is URL-safe text.
func (a *ApprovalToken) Sign(owner, digest string) string {
	if len(a.Secret) == 0 {
		return ""
	}
	ttl := a.TTL
	if ttl <= 0 {
		ttl = DefaultApprovalTTL
	}
	expiry := a.now().Add(ttl).UnixMilli()
	raw := make([]byte, 0, tokenRawLen)
	raw = append(raw, tokenVersion)
	raw = binary.BigEndian.AppendUint64(raw, uint64(expiry))
	raw = a.mac(raw, approvalPurpose, owner, digest, expiry)
	return tokenEncoding.EncodeToString(raw)
}

// Valid reports whether token came from Sign(owner, digest) with this
// Secret and has not expired (it is valid up to and including its expiry
// instant). Anything else is false: another owner or digest, a changed,
// truncated or extended token, another spelling of it, or garbage. The MAC
// is compared in constant time.
func (a *ApprovalToken) Valid(token, owner, digest string) bool {
	if len(a.Secret) == 0 || len(token) != tokenEncoding.EncodedLen(tokenRawLen) {
		return false
	}
	raw, err := tokenEncoding.DecodeString(token)
	if err != nil || len(raw) != tokenRawLen || raw[0] != tokenVersion {
		return false
	}
	expiry := int64(binary.BigEndian.Uint64(raw[1:9]))
	want := a.mac(nil, approvalPurpose, owner, digest, expiry)
	if !hmac.Equal(raw[9:], want) {
		return false
	}
	return a.now().UnixMilli() <= expiry
}

// mac appends to dst the HMAC-SHA256 of purpose, owner, digest and expiry,
// each string preceded by its length (8 bytes, big-endian) and the expiry
// in 8 bytes: an encoding no two different field tuples share.
func (a *ApprovalToken) mac(dst []byte, purpose, owner, digest string, expiry int64) []byte {
	m := hmac.New(sha256.New, a.Secret)
	var n [8]byte
	for _, f := range [...]string{purpose, owner, digest} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	binary.BigEndian.PutUint64(n[:], uint64(expiry))
	m.Write(n[:])
	return m.Sum(dst)
}
