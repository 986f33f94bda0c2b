// Package clip bounds the text darkroom keeps from a provider, where the
// adapters read it: a model's title and description and a search hit's
// (a model author writes them, and what is kept is stored, cached and
// sent to every caller who asks), a search cursor, a failure's message.
package clip

import "unicode/utf8"

// The bounds, in bytes.
const (
	MaxTitle       = 200
	MaxDescription = 2000
	MaxMessage     = 2000
	MaxCursor      = 1024
)

// Title, Description and Message cut s to their bound.
func Title(s string) string       { return To(s, MaxTitle) }
func Description(s string) string { return To(s, MaxDescription) }
func Message(s string) string     { return To(s, MaxMessage) }

// Cursor is s, or "" (no further page) if longer than MaxCursor: a cut
// cursor would name no page.
func Cursor(s string) string {
	if len(s) > MaxCursor {
		return ""
	}
	return s
}

// To cuts s to at most n bytes, on a character boundary, ending in "…"
// when cut.
func To(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
