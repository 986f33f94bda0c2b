// Package modelschema makes models outside the curated catalog usable:
// provider-qualified model ids ("replicate:owner/name[:version]",
// "fal:owner/app[/path]"), the operator's allow list, the provider's
// published input schema (fetched once, stored with its age, bounded
// before it is decoded), a catalog entry derived from it, validation of a
// caller's provider-native input, and the price before the call.
package modelschema

import (
	"fmt"
	"regexp"
	"strings"
)

// Ref is a provider-qualified model id, parsed.
type Ref struct {
	Provider string // "replicate" or "fal"
	// Path is Replicate's "owner/name" or fal's "owner/app[/path]".
	Path string
	// Version pins a Replicate version (its id); empty means the latest.
	Version string
}

// ID is the ref's model id, as callers write it.
func (r Ref) ID() string {
	if r.Version != "" {
		return r.Provider + ":" + r.Path + ":" + r.Version
	}
	return r.Provider + ":" + r.Path
}

// Qualified reports whether id has a provider prefix darkroom knows (it
// may still be malformed: ParseID says).
func Qualified(id string) bool {
	return strings.HasPrefix(id, "replicate:") || strings.HasPrefix(id, "fal:")
}

// segment is one path segment of a model id: the characters Replicate and
// fal use in owner, model and app names. Nothing else may reach a URL.
var segment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
var version = regexp.MustCompile(`^[0-9a-f]{8,128}$`)

// ParseID parses a qualified model id. The error says what is wrong.
func ParseID(id string) (Ref, error) {
	prov, rest, ok := strings.Cut(id, ":")
	if !ok || (prov != "replicate" && prov != "fal") {
		return Ref{}, fmt.Errorf("model id %q is not provider-qualified (replicate:owner/name or fal:owner/app)", id)
	}
	r := Ref{Provider: prov}
	if prov == "replicate" {
		r.Path, r.Version, _ = strings.Cut(rest, ":")
		if r.Version != "" && !version.MatchString(r.Version) {
			return Ref{}, fmt.Errorf("model id %q: the version %q is not a Replicate version id (hex)", id, r.Version)
		}
		if strings.Count(r.Path, "/") != 1 {
			return Ref{}, fmt.Errorf("model id %q: a Replicate model is replicate:owner/name[:version]", id)
		}
	} else {
		r.Path = rest
		if n := strings.Count(r.Path, "/"); n < 1 || n > 4 {
			return Ref{}, fmt.Errorf("model id %q: a fal model is fal:owner/app[/path]", id)
		}
	}
	for _, s := range strings.Split(r.Path, "/") {
		if !segment.MatchString(s) || s == "." || s == ".." {
			return Ref{}, fmt.Errorf("model id %q: %q is not a model name segment (letters, digits, '.', '_', '-')", id, s)
		}
	}
	return r, nil
}
