// Package modelschema makes models outside the curated catalog usable:
// provider-qualified model ids ("<provider>:<path>[:<version>]", each
// provider's grammar its adapter's Dialect), the operator's allow list,
// the provider's published input schema (fetched once, stored with its
// age, bounded before it is decoded), a catalog entry derived from it,
// validation of a caller's provider-native input, and the price before
// the call. It knows no provider by name: it asks the adapters.
package modelschema

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
)

// Ref is a provider-qualified model id, parsed.
type Ref struct {
	Provider string // the provider's name, the id's prefix
	// Path is the model's path at the provider, as its Dialect reads it
	// (segments joined by "/").
	Path string
	// Version pins a version of the model (the provider's id for it);
	// empty means the latest, or a provider that has none.
	Version string
}

// ID is the ref's model id, as callers write it: "<provider>:<path>",
// then ":<version>" when one is pinned.
func (r Ref) ID() string {
	if r.Version != "" {
		return r.Provider + ":" + r.Path + ":" + r.Version
	}
	return r.Provider + ":" + r.Path
}

// Dialect is what one provider's qualified ids and schema documents mean:
// each adapter that publishes schemas implements it, and modelschema asks
// it where it would otherwise need the provider's name. A Dialect needs no
// credentials: a provider that is not configured still has one, so that
// its ids are read as its own and refused as not configured.
type Dialect interface {
	// Syntax is the form of what follows "<name>:" in one of its ids, for
	// messages: "owner/name[:version]".
	Syntax() string
	// ParseRef splits rest, what follows "<name>:" in id, into the
	// model's path and pinned version ("" for none), refusing what its
	// grammar does not allow; the error names id. modelschema then checks
	// that every path segment and the version are model name characters.
	ParseRef(id, rest string) (path, version string, err error)
	// Layout is where a document of format f keeps the input and output
	// schemas; 0 for a format that is not the provider's.
	Layout(f Format) Layout
	// Stale reports a stored Info read before darkroom read all it needs
	// from the provider: loaded, it is fetched once more (the stored copy
	// serves if the provider cannot answer).
	Stale(info Info) bool
	// EntryHints completes the entry Entry derives from a model's schema
	// with the provider's own rules: how a pinned version is run, the
	// output path when the output schema names none.
	EntryHints(e *catalog.Entry, ref Ref, info Info)
}

// Dialects are the providers whose models have qualified ids, by name
// (known whether or not each is configured).
type Dialects map[string]Dialect

// Names are the providers' names, sorted.
func (ds Dialects) Names() []string {
	names := make([]string, 0, len(ds))
	for n := range ds {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Qualified reports whether id has a provider prefix of ds (it may still
// be malformed: ParseID says).
func (ds Dialects) Qualified(id string) bool {
	prov, _, ok := strings.Cut(id, ":")
	_, known := ds[prov]
	return ok && known
}

// segment is one path segment of a model id: the characters providers use
// in owner, model and app names. Nothing else may reach a URL.
var segment = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// ParseID parses a qualified model id with its provider's Dialect. The
// error says what is wrong.
func (ds Dialects) ParseID(id string) (Ref, error) {
	prov, rest, ok := strings.Cut(id, ":")
	d, known := ds[prov]
	if !ok || !known {
		forms := make([]string, 0, len(ds))
		for _, n := range ds.Names() {
			forms = append(forms, n+":"+ds[n].Syntax())
		}
		if len(forms) == 0 {
			return Ref{}, fmt.Errorf("model id %q is not provider-qualified (no provider here serves qualified ids)", id)
		}
		return Ref{}, fmt.Errorf("model id %q is not provider-qualified (%s)", id, words.Or(forms))
	}
	path, version, err := d.ParseRef(id, rest)
	if err != nil {
		return Ref{}, err
	}
	for _, s := range strings.Split(path, "/") {
		if !segment.MatchString(s) || s == "." || s == ".." {
			return Ref{}, fmt.Errorf("model id %q: %q is not a model name segment (letters, digits, '.', '_', '-')", id, s)
		}
	}
	if version != "" && !segment.MatchString(version) {
		return Ref{}, fmt.Errorf("model id %q: the version %q is not a version id (letters, digits, '.', '_', '-')", id, version)
	}
	return Ref{Provider: prov, Path: path, Version: version}, nil
}
