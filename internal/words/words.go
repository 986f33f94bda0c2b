// Package words writes lists for a person: "2, 4 or 6", never Go's
// "[2 4 6]".
package words

import (
	"fmt"
	"strings"
)

// Or is the items in words, the last two joined by "or": "16:9", "2 or 4",
// "2, 4 or 6"; "" for none.
func Or[T any](items []T) string { return join(items, " or ") }

// And is the items in words, the last two joined by "and".
func And[T any](items []T) string { return join(items, " and ") }

func join[T any](items []T, last string) string {
	s := make([]string, len(items))
	for i, it := range items {
		s[i] = fmt.Sprint(it)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + last + s[len(s)-1]
}

// Count is n and the noun, plural unless n is 1: "1 model", "3 models"
// (nouns whose plural adds an s).
func Count[N ~int | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
