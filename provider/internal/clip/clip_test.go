package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTo(t *testing.T) {
	cases := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer text", 10, "a longe…"},
		{"ééééé", 8, "éé…"}, // never half a character
	}
	for _, c := range cases {
		if got := To(c.s, c.n); got != c.want || len(got) > c.n || !utf8.ValidString(got) {
			t.Errorf("To(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	if got := Description(strings.Repeat("x", 12<<20)); len(got) > MaxDescription {
		t.Errorf("a 12 MB description kept %d bytes", len(got))
	}
	if Cursor(strings.Repeat("c", MaxCursor+1)) != "" || Cursor("abc") != "abc" {
		t.Error("Cursor")
	}
}
