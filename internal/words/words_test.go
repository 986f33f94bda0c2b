package words

import "testing"

func TestOr(t *testing.T) {
	for _, c := range []struct {
		in   []any
		want string
	}{
		{nil, ""},
		{[]any{5}, "5"},
		{[]any{2, 4}, "2 or 4"},
		{[]any{2, 4, 6}, "2, 4 or 6"},
		{[]any{"16:9", "1:1", "9:16"}, "16:9, 1:1 or 9:16"},
	} {
		if got := Or(c.in); got != c.want {
			t.Errorf("Or(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestAnd(t *testing.T) {
	if got := And([]string{"a", "b", "c"}); got != "a, b and c" {
		t.Errorf("And = %q", got)
	}
}
