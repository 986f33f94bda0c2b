package tasks

import (
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/internal/envelope"
)

// TestListenIDs: a listen's ids are counted from the one parse, as the
// dispatcher decodes them, with no second parse.
func TestListenIDs(t *testing.T) {
	many := `"` + strings.Repeat(`t",  "`, 999) + `t"`
	for _, c := range []struct {
		params     string
		want       int
		dispatched bool
	}{
		{`{"notifications":{"taskIds":["a","b"]}}`, 2, true},
		{`{"notifications":{"taskIds":[ "a" ]}}`, 1, true},
		{`{"notifications":{"taskIds":[]}}`, 0, true},
		{`{"notifications":{"taskIds":null}}`, 0, false},
		{`{"notifications":{"taskIds":["a,b","c\",d"]}}`, 2, true}, // commas inside ids
		{`{"notifications":{"taskIds":[` + many + `]}}`, 1000, true},
		{`{"notifications":{"taskIds":["a"],"taskIds":["a","b","c"]}}`, 3, true}, // the last duplicate
		{`{"notifications":{"TaskIds":["a"]}}`, 0, false},                        // case-sensitive, as the dispatcher
		{`{"Notifications":{"taskIds":["a"]}}`, 0, false},
		{`{"notifications":{}}`, 0, false},
		{`{"notifications":{"taskIds":[1]}}`, 0, false}, // refused by the dispatcher's decode
		{`{}`, 0, false},
	} {
		body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":` + c.params + `}`
		before := edgecount.Parses.Load()
		e, err := envelope.ParseBody([]byte(body))
		if err != nil {
			t.Fatalf("%.80s: %v", c.params, err)
		}
		if got := ListenIDs(&e.Message); got != c.want {
			t.Errorf("ListenIDs(%.80s) = %d, want %d", c.params, got, c.want)
		}
		if got := Dispatched(&e.Message); got != c.dispatched {
			t.Errorf("Dispatched(%.80s) = %v, want %v", c.params, got, c.dispatched)
		}
		if n := edgecount.Parses.Load() - before; n != 1 && c.want > 0 {
			t.Errorf("%.80s: parsed %d times", c.params, n)
		}
		// The dispatcher's own decode agrees wherever it decodes.
		var p params
		if envelope.Unmarshal([]byte(c.params), &p) == nil {
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
