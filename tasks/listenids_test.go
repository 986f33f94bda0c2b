package tasks

import (
	"strings"
	"testing"
)

// TestListenIDs: a listen's ids are counted as the dispatcher would
// decode them, without decoding them.
func TestListenIDs(t *testing.T) {
	many := `"` + strings.Repeat(`t",  "`, 999) + `t"`
	for _, c := range []struct {
		params string
		want   int
	}{
		{`{"notifications":{"taskIds":["a","b"]}}`, 2},
		{`{"notifications":{"taskIds":[ "a" ]}}`, 1},
		{`{"notifications":{"taskIds":[]}}`, 0},
		{`{"notifications":{"taskIds":[ ]}}`, 0},
		{`{"notifications":{"taskIds":null}}`, 0},
		{`{"notifications":{"taskIds":["a,b","c\",d"]}}`, 2}, // commas inside ids
		{`{"notifications":{"taskIds":[` + many + `]}}`, 1000},
		{`{"notifications":{"taskIds":["a"],"taskIds":["a","b","c"]}}`, 3}, // the last duplicate
		{`{"notifications":{"TaskIds":["a"]}}`, 0},                         // case-sensitive, as the dispatcher
		{`{"notifications":{}}`, 0},
		{`{}`, 0},
		{``, 0},
	} {
		if got := ListenIDs([]byte(c.params)); got != c.want {
			t.Errorf("ListenIDs(%.80s) = %d, want %d", c.params, got, c.want)
		}
		// The dispatcher's own decode agrees wherever it decodes.
		var p params
		if c.params != "" && unmarshalStrict([]byte(c.params), &p) == nil {
			n := 0
			if p.Notifications != nil {
				n = len(p.Notifications.TaskIDs)
			}
			if n != c.want {
				t.Errorf("%.80s: the dispatcher reads %d ids", c.params, n)
			}
		}
	}
}
