package tasks

import (
	"reflect"
	"testing"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
)

// FuzzTypedParams: the typed params the body's parse builds for a tasks/* or listen body
// are exactly what the dispatcher's own strict decode of params gives,
// or absent (the dispatcher then decodes them itself).
func FuzzTypedParams(f *testing.F) {
	for _, s := range []string{
		`{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`,
		`{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":5}}}`,
		`{"taskId":"t","inputResponses":{"a":{"action":"accept"}},"_meta":null}`,
		`{"taskId":7,"_meta":{"io.modelcontextprotocol/protocolVersion":"\u0032026","io.modelcontextprotocol/clientCapabilities":null}}`,
		`{"taskId":"t","notifications":{"taskIds":["a"]}}`,
		`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":[],"io.modelcontextprotocol/tasks":{}}}}}`,
		`{"inputResponses":[]}`, `{"_meta":"x"}`, `{}`,
		// A duplicated object key: the strict decode merges the two objects.
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`,
		`{"notifications":{"taskIds":["a"]},"notifications":{}}`,
		`{"notifications":{"taskIds":["a","b"]},"_meta":null}`,
		`{"notifications":{"taskIds":[1]}}`, `{"notifications":null}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, listen bool) {
		method := "tasks/get"
		if listen {
			method = "subscriptions/listen"
		}
		body := append(append([]byte(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`), raw...), '}')
		e, err := envelope.ParseBody(body)
		if err != nil || !e.Request {
			return
		}
		req := requestOf(&e.Message)
		typed := req.fromParse()
		if typed == nil {
			return
		}
		var want params
		if err := envelope.Unmarshal(req.Params, &want); err != nil {
			t.Fatalf("typed params built for params the strict decode refuses (%v): %s", err, raw)
		}
		if !reflect.DeepEqual(typed, &want) {
			t.Fatalf("typed params differ for %s:\n parsed:   %#v\n strict:   %#v", raw, typed, &want)
		}
	})
}
