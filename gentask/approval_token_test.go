package gentask

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/testclock"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func newToken(c *testclock.Clock) *ApprovalToken {
	return &ApprovalToken{Secret: testSecret, Now: c.Now, TTL: 10 * time.Minute}
}

func newTestClock() *testclock.Clock {
	return testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

// Owner ids of every shape round-trip, and validate for nothing else.
func TestApprovalTokenOwners(t *testing.T) {
	t.Parallel()
	owners := []string{
		"local", "auth0|5f7c8ec7", "a b", "x=y", "José|ü", "a.b", "", "|", "||", ".", "=",
		"google-oauth2|1234567890", "key:ci", "日本語", "tab\there", "nul\x00byte",
	}
	digests := []string{"", "digest", "a|b", "b|c", "x.y", "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"}
	c := newTestClock()
	a := newToken(c)
	for _, owner := range owners {
		for _, digest := range digests {
			tok := a.Sign(owner, digest)
			if !a.Valid(tok, owner, digest) {
				t.Errorf("Sign(%q, %q) = %q does not validate", owner, digest, tok)
			}
			for _, other := range owners {
				if other != owner && a.Valid(tok, other, digest) {
					t.Errorf("token for owner %q validates for owner %q", owner, other)
				}
			}
			for _, other := range digests {
				if other != digest && a.Valid(tok, owner, other) {
					t.Errorf("token for digest %q validates for digest %q", digest, other)
				}
			}
		}
	}
}

// Moving a separator, or bytes, from one field to the other never gives a
// token that validates for the other pair.
func TestApprovalTokenFieldConfusion(t *testing.T) {
	t.Parallel()
	cases := []struct{ owner1, digest1, owner2, digest2 string }{
		{"a|b", "c", "a", "b|c"},
		{"a", "b|c", "a|b", "c"},
		{"ab", "", "a", "b"},
		{"", "ab", "a", "b"},
		{"a.b", "c", "a", "b.c"},
		{"x=y", "z", "x", "y=z"},
		{"José|ü", "d", "José", "ü|d"},
		{"auth0|5f7c8ec7", "d", "auth0", "5f7c8ec7|d"},
		{"a\x00\x00\x00\x00\x00\x00\x00\x01b", "", "a", "b"}, // a forged length prefix
	}
	c := newTestClock()
	a := newToken(c)
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%q,%q vs %q,%q", tc.owner1, tc.digest1, tc.owner2, tc.digest2), func(t *testing.T) {
			t1, t2 := a.Sign(tc.owner1, tc.digest1), a.Sign(tc.owner2, tc.digest2)
			if !a.Valid(t1, tc.owner1, tc.digest1) || !a.Valid(t2, tc.owner2, tc.digest2) {
				t.Fatal("own tokens do not validate")
			}
			if a.Valid(t1, tc.owner2, tc.digest2) {
				t.Errorf("token for (%q,%q) validates for (%q,%q)", tc.owner1, tc.digest1, tc.owner2, tc.digest2)
			}
			if a.Valid(t2, tc.owner1, tc.digest1) {
				t.Errorf("token for (%q,%q) validates for (%q,%q)", tc.owner2, tc.digest2, tc.owner1, tc.digest1)
			}
		})
	}
}

func TestApprovalTokenExpiry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		ttl   time.Duration
		after time.Duration
		valid bool
	}{
		{"at once", 10 * time.Minute, 0, true},
		{"just before", 10 * time.Minute, 10*time.Minute - time.Millisecond, true},
		{"at expiry", 10 * time.Minute, 10 * time.Minute, true},
		{"just after", 10 * time.Minute, 10*time.Minute + time.Millisecond, false},
		{"long after", 10 * time.Minute, 48 * time.Hour, false},
		{"short ttl", time.Second, 2 * time.Second, false},
		{"default ttl kept", 0, DefaultApprovalTTL, true},
		{"default ttl passed", 0, DefaultApprovalTTL + time.Millisecond, false},
		{"clock stepped back", 10 * time.Minute, -time.Hour, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newTestClock()
			a := &ApprovalToken{Secret: testSecret, Now: c.Now, TTL: tc.ttl}
			tok := a.Sign("auth0|5f7c8ec7", "d")
			c.Advance(tc.after)
			if got := a.Valid(tok, "auth0|5f7c8ec7", "d"); got != tc.valid {
				t.Fatalf("Valid after %v with TTL %v = %v, want %v", tc.after, tc.ttl, got, tc.valid)
			}
		})
	}
}

// Any change to any byte of a token, any prefix of it, and anything after
// it is refused.
func TestApprovalTokenTampered(t *testing.T) {
	t.Parallel()
	c := newTestClock()
	a := newToken(c)
	const owner, digest = "José|ü", "a.b"
	tok := a.Sign(owner, digest)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) != tokenRawLen {
		t.Fatalf("token %q: %v, %d bytes", tok, err, len(raw))
	}
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			b := append([]byte(nil), raw...)
			b[i] ^= bit
			if bad := base64.RawURLEncoding.EncodeToString(b); a.Valid(bad, owner, digest) {
				t.Errorf("byte %d ^ %#x: tampered token validates", i, bit)
			}
		}
	}
	for n := range len(tok) {
		if a.Valid(tok[:n], owner, digest) {
			t.Errorf("prefix of %d characters validates", n)
		}
	}
	for _, extra := range []string{"A", "=", "==", ".", "\n", "\r\n", " ", "." + tok, "|x"} {
		if a.Valid(tok+extra, owner, digest) {
			t.Errorf("token + %q validates", extra)
		}
		if a.Valid(extra+tok, owner, digest) {
			t.Errorf("%q + token validates", extra)
		}
	}
	// A later expiry, kept with the old MAC.
	b := append([]byte(nil), raw...)
	binary.BigEndian.PutUint64(b[1:9], binary.BigEndian.Uint64(b[1:9])+uint64(time.Hour.Milliseconds()))
	if a.Valid(base64.RawURLEncoding.EncodeToString(b), owner, digest) {
		t.Error("extended expiry validates")
	}
}

func TestApprovalTokenGarbage(t *testing.T) {
	t.Parallel()
	c := newTestClock()
	a := newToken(c)
	tok := a.Sign("a", "d")
	// The same bytes spelled another way: the last character carries two
	// spare bits, which must be zero.
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", tok[len(tok)-1])
	respelled := tok[:len(tok)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last^1])
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	cases := map[string]string{
		"empty":              "",
		"dot":                ".",
		"not base64":         strings.Repeat("!", len(tok)),
		"std alphabet":       base64.RawStdEncoding.EncodeToString(raw),
		"padded":             base64.URLEncoding.EncodeToString(raw),
		"respelled":          respelled,
		"all zero":           base64.RawURLEncoding.EncodeToString(make([]byte, tokenRawLen)),
		"old format":         oldState("a", "d", c.Now().Add(time.Hour).Unix()),
		"unicode same width": strings.Repeat("é", len(tok)/2) + "x",
	}
	for name, s := range cases {
		if s == tok {
			t.Fatalf("%s: is the token itself", name)
		}
		if a.Valid(s, "a", "d") {
			t.Errorf("%s: %q validates", name, s)
		}
	}
}

// oldState is the requestState server/gentasks.go made before this package:
// the same secret over "owner|digest|expiry".
func oldState(owner, digest string, exp int64) string {
	payload := fmt.Sprintf("%s|%s|%d", owner, digest, exp)
	m := hmac.New(sha256.New, testSecret)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// A MAC made with the same secret for another purpose (or another version
// of this one) over the same fields is not an approval.
func TestApprovalTokenPurposeBound(t *testing.T) {
	t.Parallel()
	c := newTestClock()
	a := newToken(c)
	expiry := c.Now().Add(time.Minute).UnixMilli()
	for _, purpose := range []string{"", "darkroom/gentask/approval-token/v2", "darkroom/files/link/v1"} {
		raw := []byte{tokenVersion}
		raw = binary.BigEndian.AppendUint64(raw, uint64(expiry))
		raw = a.mac(raw, purpose, "a", "d", expiry)
		if a.Valid(base64.RawURLEncoding.EncodeToString(raw), "a", "d") {
			t.Errorf("MAC for purpose %q validates", purpose)
		}
	}
	// The real purpose does, to show the forgery above was well formed.
	raw := []byte{tokenVersion}
	raw = binary.BigEndian.AppendUint64(raw, uint64(expiry))
	raw = a.mac(raw, approvalPurpose, "a", "d", expiry)
	if !a.Valid(base64.RawURLEncoding.EncodeToString(raw), "a", "d") {
		t.Error("a token built by hand with the approval purpose does not validate")
	}
}

func TestApprovalTokenSecret(t *testing.T) {
	t.Parallel()
	c := newTestClock()
	a := newToken(c)
	tok := a.Sign("a", "d")
	other := &ApprovalToken{Secret: []byte("another secret, just as long...."), Now: c.Now}
	if other.Valid(tok, "a", "d") {
		t.Error("token validates under another secret")
	}
	none := &ApprovalToken{Now: c.Now}
	if s := none.Sign("a", "d"); s != "" {
		t.Errorf("Sign without a secret = %q", s)
	}
	if none.Valid(tok, "a", "d") || none.Valid("", "a", "d") {
		t.Error("Valid without a secret accepts a token")
	}
	// nil Now is the wall clock.
	wall := &ApprovalToken{Secret: testSecret}
	if !wall.Valid(wall.Sign("a", "d"), "a", "d") {
		t.Error("token with the default clock does not validate")
	}
}

// Tokens are plain URL-safe text of one fixed length, and two signs of the
// same request at different times differ.
func TestApprovalTokenShape(t *testing.T) {
	t.Parallel()
	c := newTestClock()
	a := newToken(c)
	t1 := a.Sign("auth0|5f7c8ec7", "d")
	c.Advance(time.Millisecond)
	t2 := a.Sign("a much longer owner id, with spaces | and bars", "d")
	c.Advance(time.Millisecond)
	t3 := a.Sign("auth0|5f7c8ec7", "d")
	for _, tok := range []string{t1, t2, t3} {
		if len(tok) != len(t1) || strings.Trim(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Errorf("token %q: not %d URL-safe characters", tok, len(t1))
		}
	}
	if t1 == t3 {
		t.Error("tokens signed at different times are equal")
	}
	if !a.Valid(t1, "auth0|5f7c8ec7", "d") || !a.Valid(t3, "auth0|5f7c8ec7", "d") {
		t.Error("tokens do not validate")
	}
}
