package generation

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Headline is g's state as one line for a person, as progress
// notifications and task status messages show it: the status, what the
// status message adds (a leading repeat of the status word left out), and
// the percentage once, floored, so a running generation never reads 100%:
// "Queued", "Queued: position 3 in line", "Running: rendering, 45%". A
// reserved generation's message says what it waits for. Ids are never part
// of it: the request or task already names the generation.
func (g *Generation) Headline() string {
	status := string(g.Status)
	detail := strings.TrimSpace(g.StatusMessage)
	if rest, ok := cutWord(detail, status); ok {
		detail = strings.TrimLeft(rest, " :,;-")
	}
	if g.Status == StatusReserved && detail != "" {
		return capitalize(detail)
	}
	if g.Progress > 0 && !g.Status.Terminal() && !strings.Contains(detail, "%") {
		pct := fmt.Sprintf("%d%%", int(g.Progress*100))
		if detail == "" {
			detail = pct
		} else {
			detail += ", " + pct
		}
	}
	if detail == "" {
		return capitalize(status)
	}
	return capitalize(status) + ": " + detail
}

// cutWord is s without a leading word w (any case), if s starts with it.
func cutWord(s, w string) (string, bool) {
	if len(s) < len(w) || !strings.EqualFold(s[:len(w)], w) {
		return s, false
	}
	rest := s[len(w):]
	if r, _ := utf8.DecodeRuneInString(rest); rest != "" && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
		return s, false // a longer word
	}
	return rest, true
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}
