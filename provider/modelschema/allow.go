package modelschema

import (
	"fmt"
	"slices"
	"strings"

	"github.com/darkroom-mcp/darkroom/internal/words"
)

// Allow is the operator's list of qualified model ids that may be used
// (DARKROOM_MODELS_ALLOW). A pattern is "provider:path" where "*" matches
// any characters within one path segment ("fal:fal-ai/flux*" matches
// fal:fal-ai/flux-pro but not fal:fal-ai/flux/dev), and a pattern ending
// in "/*" matches everything below that prefix, any depth
// ("replicate:black-forest-labs/*", "fal:fal-ai/*"; "fal:*" allows all
// of fal). A pinned version (":version") is ignored: allowing a model
// allows its versions. The empty list allows nothing (only the curated
// catalog).
type Allow struct {
	patterns []string
}

// ParseAllow reads a comma-separated pattern list; each pattern names one
// of providers (Dialects.Names: those whose models have qualified ids).
func ParseAllow(s string, providers []string) (Allow, error) {
	var a Allow
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		prov, path, ok := strings.Cut(p, ":")
		if !ok || !slices.Contains(providers, prov) || path == "" {
			if len(providers) == 0 {
				return Allow{}, fmt.Errorf("models allow pattern %q: no provider here serves qualified ids", p)
			}
			forms := make([]string, len(providers))
			for i, n := range providers {
				forms[i] = n + ":PATTERN"
			}
			return Allow{}, fmt.Errorf("models allow pattern %q is not %s", p, words.Or(forms))
		}
		a.patterns = append(a.patterns, p)
	}
	return a, nil
}

// Empty reports whether nothing is allowed.
func (a Allow) Empty() bool { return len(a.patterns) == 0 }

// Patterns lists the patterns.
func (a Allow) Patterns() []string { return a.patterns }

// Provider reports whether some pattern names the provider.
func (a Allow) Provider(name string) bool {
	for _, p := range a.patterns {
		if strings.HasPrefix(p, name+":") {
			return true
		}
	}
	return false
}

// Allows reports whether the ref's model may be used.
func (a Allow) Allows(r Ref) bool {
	id := r.Provider + ":" + r.Path
	for _, p := range a.patterns {
		if match(p, id) {
			return true
		}
	}
	return false
}

// match matches id against pattern, segment by segment ("/" and the
// provider's ":" separate segments).
func match(pattern, id string) bool {
	ps := split(pattern)
	is := split(id)
	for i, p := range ps {
		if p == "*" && i == len(ps)-1 {
			return len(is) > i // a trailing "/*" (or "prov:*"): anything below
		}
		if i >= len(is) || !segmentMatch(p, is[i]) {
			return false
		}
	}
	return len(ps) == len(is)
}

func split(s string) []string {
	prov, path, _ := strings.Cut(s, ":")
	return append([]string{prov}, strings.Split(path, "/")...)
}

// segmentMatch is glob matching of one segment with "*" only.
func segmentMatch(p, s string) bool {
	parts := strings.Split(p, "*")
	if len(parts) == 1 {
		return p == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

// Hint is a pattern that would allow r, for the refusal's message.
func Hint(r Ref) string {
	owner, _, _ := strings.Cut(r.Path, "/")
	return r.Provider + ":" + owner + "/*"
}
