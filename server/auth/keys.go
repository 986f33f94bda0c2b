package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// APIKey is one configured API key. The secret itself is never kept: only its
// SHA-256 hash, which Lookup compares in constant time.
type APIKey struct {
	// Name identifies the caller; the principal ID is "key:" + Name.
	Name string
	// Limits are the per-caller overrides given after ';'.
	Limits Overrides
	// Source says where the key was defined ("keys.txt:3",
	// "DARKROOM_API_KEYS entry 2"), for error messages.
	Source string

	hash [sha256.Size]byte
}

// Principal returns the principal authenticated by this key.
func (k APIKey) Principal() Principal {
	return Principal{ID: "key:" + k.Name, Kind: KindKey, Limits: k.Limits}
}

const maxKeyNameLen = 64

// NewAPIKey builds a key from a name and secret, e.g. for a development key
// generated at start-up. Only the hash of secret is retained; the caller may
// clear secret afterwards.
func NewAPIKey(name string, secret []byte, limits Overrides) (APIKey, error) {
	if err := checkKeyName(name); err != nil {
		return APIKey{}, err
	}
	if err := checkSecret(secret); err != nil {
		return APIKey{}, fmt.Errorf("key %q: %w", name, err)
	}
	return APIKey{Name: name, Limits: limits, hash: sha256.Sum256(secret)}, nil
}

// LoadKeyFile reads and parses a DARKROOM_API_KEYS_FILE. The file buffer is
// zeroed after parsing so that no secret outlives this call.
func LoadKeyFile(path string) ([]APIKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("api keys file: %w", err)
	}
	defer clear(data)
	return ParseKeyFile(data, path)
}

// ParseKeyFile parses the DARKROOM_API_KEYS_FILE format:
//
//	# comment (only at the start of a line: secrets may contain '#')
//	alice=s3cret
//	bob=an0ther;rate=10;burst=40;budget=500;approvalAbove=50;inflight=8;createRate=2;createBurst=5
//
// One key per line, name=secret, optionally followed by ';'-separated
// overrides (see Overrides). Blank lines are ignored; surrounding whitespace is
// trimmed. Secrets may contain '=' but not ';' or whitespace. Errors name the
// source and line ("keys.txt:3: ...") and never echo a secret; all bad lines
// are reported at once.
func ParseKeyFile(data []byte, source string) ([]APIKey, error) {
	return parseEntries(bytes.Split(data, []byte("\n")), func(i int) string { return fmt.Sprintf("%s:%d", source, i+1) }, true)
}

// ParseKeyList parses the DARKROOM_API_KEYS format: "name=secret,name2=secret2",
// each entry with the same optional ';' overrides as ParseKeyFile. Secrets
// may not contain ',' here. source names the origin in errors (e.g.
// "DARKROOM_API_KEYS"); entries are numbered from 1.
func ParseKeyList(s, source string) ([]APIKey, error) {
	b := []byte(s)
	defer clear(b) // the secrets' copy does not outlive parsing
	return parseEntries(bytes.Split(b, []byte(",")), func(i int) string { return fmt.Sprintf("%s entry %d", source, i+1) }, false)
}

// parseEntries parses one key per entry, skipping blank ones (and, with
// comments, lines starting with '#'). where(i) names entry i in errors; all
// bad entries are reported at once.
func parseEntries(entries [][]byte, where func(i int) string, comments bool) ([]APIKey, error) {
	var keys []APIKey
	var errs []error
	for i, e := range entries {
		e = bytes.TrimSpace(e)
		if len(e) == 0 || (comments && e[0] == '#') {
			continue
		}
		k, err := parseEntry(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where(i), err))
			continue
		}
		k.Source = where(i)
		keys = append(keys, k)
	}
	errs = append(errs, checkUnique(keys)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return keys, nil
}

// parseEntry parses "name=secret[;k=v]...". It never puts the secret into an
// error message.
func parseEntry(b []byte) (APIKey, error) {
	cred, rest, _ := bytes.Cut(b, []byte(";"))
	name, secret, ok := bytes.Cut(cred, []byte("="))
	if !ok {
		return APIKey{}, errors.New("expected name=secret")
	}
	n := string(bytes.TrimSpace(name))
	secret = bytes.TrimSpace(secret)
	if err := checkKeyName(n); err != nil {
		return APIKey{}, err
	}
	if err := checkSecret(secret); err != nil {
		return APIKey{}, fmt.Errorf("key %q: %w", n, err)
	}
	lim, err := parseOverrides(string(rest))
	if err != nil {
		return APIKey{}, fmt.Errorf("key %q: %w", n, err)
	}
	return APIKey{Name: n, Limits: lim, hash: sha256.Sum256(secret)}, nil
}

func checkKeyName(n string) error {
	if n == "" {
		return errors.New("empty key name")
	}
	if len(n) > maxKeyNameLen {
		return fmt.Errorf("key name longer than %d characters", maxKeyNameLen)
	}
	for _, c := range []byte(n) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return errors.New("invalid key name: use only letters, digits, '.', '_' and '-'")
		}
	}
	return nil
}

func checkSecret(s []byte) error {
	if len(s) == 0 {
		return errors.New("empty secret")
	}
	if bytes.ContainsAny(s, " \t\r\n\v\f;,") {
		return errors.New("secret contains whitespace, ';' or ','")
	}
	return nil
}

// Override names, matched case-insensitively.
const knownOverrides = "rate, burst, createRate, createBurst, budget, approvalAbove, inflight"

func parseOverrides(s string) (Overrides, error) {
	var o Overrides
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return o, fmt.Errorf("override %q: expected name=value", part)
		}
		lk := strings.ToLower(k)
		if seen[lk] {
			return o, fmt.Errorf("override %q given twice", k)
		}
		seen[lk] = true
		var err error
		switch lk {
		case "rate", "pollrate":
			o.PollRate, err = parseRate(k, v)
		case "burst", "pollburst":
			o.PollBurst, err = parseCount(k, v)
		case "createrate":
			o.CreateRate, err = parseRate(k, v)
		case "createburst":
			o.CreateBurst, err = parseCount(k, v)
		case "inflight":
			o.MaxInFlight, err = parseCount(k, v)
		case "budget":
			o.BudgetPerDay, err = parseCredits(k, v)
		case "approvalabove":
			o.ApprovalAboveCredits, err = parseCredits(k, v)
		default:
			return o, fmt.Errorf("unknown override %q (known: %s)", k, knownOverrides)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

const maxOverride = 1_000_000

func parseRate(k, v string) (*float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > maxOverride {
		return nil, fmt.Errorf("override %s=%q: want a number of requests per second, > 0 and <= %d", k, v, maxOverride)
	}
	return &f, nil
}

func parseCount(k, v string) (*int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxOverride {
		return nil, fmt.Errorf("override %s=%q: want a whole number from 1 to %d", k, v, maxOverride)
	}
	return &n, nil
}

func parseCredits(k, v string) (*int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("override %s=%q: want a whole number of credits >= 0", k, v)
	}
	return &n, nil
}

// checkUnique reports duplicate names and duplicate secrets (a secret shared by
// two names would make the caller ambiguous).
func checkUnique(keys []APIKey) []error {
	var errs []error
	names := map[string]string{}
	hashes := map[[sha256.Size]byte]APIKey{}
	for _, k := range keys {
		if first, dup := names[k.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: duplicate key name %q (first defined at %s)", k.Source, k.Name, first))
			continue
		}
		names[k.Name] = k.Source
		if first, dup := hashes[k.hash]; dup {
			errs = append(errs, fmt.Errorf("%s: key %q has the same secret as key %q (%s)", k.Source, k.Name, first.Name, first.Source))
			continue
		}
		hashes[k.hash] = k
	}
	return errs
}

// KeyStore holds API keys by hash and looks them up in constant time.
type KeyStore struct {
	keys []APIKey
}

// NewKeyStore checks keys for duplicate names and secrets (also across
// sources, e.g. file plus environment) and returns a store.
func NewKeyStore(keys []APIKey) (*KeyStore, error) {
	if errs := checkUnique(keys); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &KeyStore{keys: slices.Clone(keys)}, nil
}

// Len returns the number of keys.
func (s *KeyStore) Len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// Lookup finds the key whose secret is secret. It hashes secret and compares
// the hash with every stored hash using crypto/subtle, visiting all keys even
// after a match so that the time taken does not depend on which key (if any)
// matched.
func (s *KeyStore) Lookup(secret string) (APIKey, bool) {
	if s == nil || len(s.keys) == 0 || secret == "" {
		return APIKey{}, false
	}
	h := sha256.Sum256([]byte(secret))
	found := 0 // index+1 of the match, 0 for none
	for i := range s.keys {
		eq := subtle.ConstantTimeCompare(h[:], s.keys[i].hash[:])
		found = subtle.ConstantTimeSelect(eq, i+1, found)
	}
	if found == 0 {
		return APIKey{}, false
	}
	return s.keys[found-1], true
}
