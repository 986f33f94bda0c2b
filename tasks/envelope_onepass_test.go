package tasks

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Realistic bodies, as the clients and cmd/darkroom's benchmarks send them.
const (
	benchTasksGet      = `{"id":2,"jsonrpc":"2.0","method":"tasks/get","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"taskId":"01JF3Q6W8N2V4ZC5T7B9D1KX0M"}}`
	benchGetGeneration = `{"id":2,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{"generationId":"01JF3Q6W8N2V4ZC5T7B9D1KX0M"},"name":"get_generation"}}`
)

// onePassSeeds are the fuzz corpus's seeds and the table's bodies.
var onePassSeeds = []string{
	benchTasksGet, benchGetGeneration,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"generate","arguments":{"prompt":"a cat","size":[1024,768],"seed":-12.5e+3,"opts":{"hdr":true,"neg":null}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":7}}}`,
	`{"jsonrpc":"2.0","id":"a","method":"tasks/update","params":{"taskId":"t","inputResponses":{"q1":{"action":"accept","content":{"x":1}}},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`,
	`{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{"taskId":"t","requestState":"opaque","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":[],"io.modelcontextprotocol/tasks":{"v":1}}}}}}`,
	`{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"t","notifications":{"taskIds":["a"]}}}`,
	`{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"darkroom://generations/x"}}`,
	`{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"p","arguments":{}}}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"generate"}},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"} {"jsonrpc":"2.0","id":2,"method":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"p":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"café"}}`,
	`{"method":"tasks/get","params":{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-\u0030728","io.modelcontextprotocol/clientCapabilities":{"extensions":null}}}}`,
	`{"method":"tasks/get","params":{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":5,"io.modelcontextprotocol/clientCapabilities":{"extensions":5}}}}`,
	`{`, ``, `null`, `[]`, `{"method":"a","x":01}`, `{"method":"a","x":1.}`,
}

// TestEnvelopeOnePass: each body takes the path expected of it (the
// one-pass scanner, or the reference for what the scanner leaves), and
// whatever the scanner answers is exactly the reference's envelope.
func TestEnvelopeOnePass(t *testing.T) {
	for _, c := range onePassCases() {
		t.Run(c.name, func(t *testing.T) {
			_, fast := parseBodyOnePass([]byte(c.body))
			if fast != c.fast {
				t.Fatalf("one pass answered %v, want %v, for %s", fast, c.fast, c.body)
			}
			checkOnePass(t, []byte(c.body))
		})
	}
}

type onePassCase struct {
	name, body string
	fast       bool // the one-pass parse answers (else the reference)
}

// onePassCases are hand-picked bodies of every kind the scanner must take
// or leave.
func onePassCases() []onePassCase {
	const get = `"method":"tasks/get"`
	meta := func(pv, caps string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":` + pv + `,"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	// deep nests n arrays in arguments: the innermost is at depth n+2.
	deep := func(n int) string {
		return `{"method":"tools/call","params":{"name":"x","arguments":` + strings.Repeat(`[`, n) + strings.Repeat(`]`, n) + `}}`
	}
	deepObjects := func(n int) string {
		return `{"method":"tools/call","params":{"name":"x","arguments":` + strings.Repeat(`{"a":`, n) + `1` + strings.Repeat(`}`, n) + `}}`
	}
	return []onePassCase{
		{"tasks/get", benchTasksGet, true},
		{"get_generation", benchGetGeneration, true},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, true},
		{"response", `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, true},
		{"empty object", `{}`, true},
		{"whitespace everywhere", " \t\r\n{ \"jsonrpc\" : \"2.0\" ,\n\"id\"\t:\r1 , \"method\" : \"tasks/get\" , \"params\" : { \"taskId\" : \"t\" , " + meta(` "v" `, ` { "extensions" : { } } `) + " } } \n", true},
		{"null params", `{"id":1,"method":"tasks/get","params":null}`, true},
		{"empty params", `{"id":1,"method":"tasks/get","params":{}}`, true},
		{"array params", `{"id":1,"method":"tools/call","params":[1,2]}`, true},
		{"string params", `{"id":1,"method":"tools/call","params":"x"}`, true},
		{"null _meta", `{"id":1,` + get + `,"params":{"taskId":"t","_meta":null}}`, true},
		{"empty _meta", `{"id":1,` + get + `,"params":{"taskId":"t","_meta":{}}}`, true},
		{"_meta not an object", `{"id":1,` + get + `,"params":{"taskId":"t","_meta":[1]}}`, true},
		{"null meta values", `{"id":1,` + get + `,"params":{"taskId":"t",` + meta(`null`, `null`) + `}}`, true},
		{"number version", `{"id":1,` + get + `,"params":{"taskId":"t",` + meta(`5`, `{}`) + `}}`, true},
		{"escaped version", `{"id":1,` + get + `,"params":{"taskId":"t",` + meta(`"2026-07-2\u0038"`, `{}`) + `}}`, true},
		{"escaped task id", `{"id":1,` + get + `,"params":{"taskId":"\u0074",` + meta(`"v"`, `{}`) + `}}`, true},
		{"number task id", `{"id":1,` + get + `,"params":{"taskId":7}}`, true},
		{"caps not an object", `{"id":1,` + get + `,"params":{"taskId":"t",` + meta(`"v"`, `"x"`) + `}}`, true},
		{"extensions not an object", `{"id":1,` + get + `,"params":{"taskId":"t",` + meta(`"v"`, `{"extensions":5}`) + `}}`, true},
		{"extensions merged", `{"id":1,` + get + `,"params":{"taskId":"t",` + meta(`"v"`, `{"extensions":{"io.modelcontextprotocol/tasks":{}},"extensions":{},"extensions":null}`) + `}}`, true},
		{"duplicate method", `{"method":"tools/list","method":"tasks/get","id":1}`, true},
		{"duplicate params", `{"id":1,` + get + `,"params":{"taskId":"a","_meta":{}},"params":{"taskId":"b"}}`, true},
		{"duplicate name", `{"id":1,"method":"tools/call","params":{"name":"a","name":"b","NAME":"c"}}`, true},
		{"duplicate _meta", `{"id":1,` + get + `,"params":{` + meta(`"v"`, `{}`) + `,"_meta":null}}`, true},
		{"duplicate caps", `{"id":1,` + get + `,"params":{` + meta(`"v"`, `{"extensions":5}`) + `,"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`, true},
		{"Go field names", `{"ID":1,"Method":"a","method":"tasks/get","Params":{},"params":{"TaskID":"x","Meta":{},"_meta":{"ProtocolVersion":"v","ClientCapabilities":{}}}}`, true},
		{"Go field names in caps", `{"method":"tasks/get","params":{` + meta(`"v"`, `{"Extensions":{"Tasks":{}},"extensions":{"tasks":1,"IO.modelcontextprotocol/tasks":2}}`) + `}}`, true},
		{"duplicate id", `{"id":1,"id":null,"method":"tools/list"}`, true},
		{"null id", `{"id":null,"method":"tools/list"}`, true},
		{"object id", `{"id":{"a":[]},"method":"tools/list"}`, true},
		{"numbers", `{"id":-0.5e-7,"method":"a","params":{"x":[0,-0,1E5,1e+5,123.456,-1.0E-0]}}`, true},
		{"literals", `{"method":"a","params":{"x":[true,false,null]}}`, true},
		{"input responses", `{"id":1,"method":"tasks/update","params":{"taskId":"t","inputResponses":{"a":{}}}}`, true},
		{"input responses array", `{"id":1,"method":"tasks/update","params":{"taskId":"t","inputResponses":[]}}`, true},
		{"notifications", `{"id":1,` + get + `,"params":{"notifications":null}}`, true},
		{"nested within bound", deep(maxScanDepth - 2), true},
		{"escaped string value", `{"method":"a","params":{"x":"\"\\\/\b\f\n\r\t\u00E9\ud800"}}`, true},
		{"escaped name", `{"method":"tools/call","params":{"name":"gen\u0065rate"}}`, true},

		{"nested beyond bound", deep(maxScanDepth - 1), false},
		{"nested objects within bound", deepObjects(maxScanDepth - 2), true},
		{"nested objects beyond bound", deepObjects(maxScanDepth - 1), false},
		{"batch", `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`, false},
		{"non-ASCII", `{"method":"tools/call","params":{"name":"café"}}`, false},
		{"DEL", "{\"method\":\"a\",\"x\":\"\x7f\"}", false},
		{"control byte", "{\"method\":\"a\",\"x\":\"\x01\"}", false},
		{"escaped key", `{"meth\u006fd":"tasks/get"}`, false},
		{"escaped method", `{"method":"tasks\/get"}`, false},
		{"null method", `{"method":null}`, false},
		{"number jsonrpc", `{"jsonrpc":2,"method":"a"}`, false},
		{"top-level null", `null`, false},
		{"top-level string", `"x"`, false},
		{"empty body", ``, false},
		{"only whitespace", ` `, false},
		{"trailing data", `{"method":"a"} {"method":"b"}`, false},
		{"trailing comma", `{"method":"a",}`, false},
		{"unterminated", `{"method":"a"`, false},
		{"missing colon", `{"method" "a"}`, false},
		{"leading zero", `{"method":"a","x":01}`, false},
		{"bare dot", `{"method":"a","x":1.}`, false},
		{"bare minus", `{"method":"a","x":-}`, false},
		{"bare exponent", `{"method":"a","x":1e}`, false},
		{"plus sign", `{"method":"a","x":+1}`, false},
		{"short literal", `{"method":"a","x":nul}`, false},
		{"long literal", `{"method":"a","x":nulll}`, false},
		{"bad escape", `{"method":"a","x":"\x"}`, false},
		{"short unicode escape", `{"method":"a","x":"\u12"}`, false},
		{"array trailing comma", `{"method":"a","x":[1,]}`, false},
		{"unterminated string", `{"method":"a","x":"abc`, false},
	}
}

// checkOnePass holds the one-pass parse of body to the reference's: when
// it answers, the whole Envelope (unexported fields and what they point
// to included) is deeply equal; and the body is never modified.
func checkOnePass(t *testing.T, body []byte) {
	t.Helper()
	orig := bytes.Clone(body)
	fast, ok := parseBodyOnePass(body)
	if !bytes.Equal(body, orig) {
		t.Fatalf("the one-pass parse modified the body %q", orig)
	}
	ref, err := parseBodyReference(bytes.Clone(body))
	if !ok {
		return
	}
	if err != nil {
		t.Fatalf("one pass accepts %q, the reference refuses it: %v", body, err)
	}
	if !reflect.DeepEqual(fast, ref) {
		t.Fatalf("envelopes differ for %q:\n one pass:  %s\n reference: %s", body, describe(fast), describe(ref))
	}
}

func describe(e *Envelope) string {
	m := e.Message
	s := fmt.Sprintf("method=%q name=%q id=%q call=%v version=%q caps=%v jsonrpc=%q batch=%v",
		m.Method, m.Name, m.ID, m.Call, m.Version, m.HasCaps, m.jsonrpc, e.IsBatch)
	if m.params != nil {
		s += fmt.Sprintf(" params=%+q", *m.params)
	}
	if m.Req != nil {
		s += fmt.Sprintf(" req={%q %q %q}", m.Req.ID, m.Req.Method, m.Req.Params)
		if tp := m.Req.typed; tp != nil {
			s += fmt.Sprintf(" typed={task=%q in=%q notif=%v", tp.TaskID, tp.InputResponses, tp.Notifications)
			if tp.Meta != nil {
				if tp.Meta.ProtocolVersion != nil {
					s += fmt.Sprintf(" pv=%q", *tp.Meta.ProtocolVersion)
				}
				if tp.Meta.ClientCapabilities != nil {
					s += fmt.Sprintf(" tasks=%q", tp.Meta.ClientCapabilities.Extensions.Tasks)
				}
			}
			s += "}"
		}
	}
	return s
}

// FuzzParseBodyOnePass: the differential oracle. On every input, as a
// whole body and set in as the params, _meta and clientCapabilities of a
// tasks/get (so that the inner levels are fuzzed as hard as the outer),
// each after a full earlier duplicate (which must not leak into it), the
// one-pass parse either declines or gives exactly the reference's
// Envelope.
func FuzzParseBodyOnePass(f *testing.F) {
	for _, s := range onePassSeeds {
		f.Add([]byte(s))
	}
	for _, c := range onePassCases() {
		f.Add([]byte(c.body))
	}
	for _, s := range []string{
		`{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":5}}`,
		`{"extensions":{"io.modelcontextprotocol/tasks":{}},"extensions":null}`,
		`{"inputResponses":{"a":{"action":"accept"}},"notifications":null}`,
	} {
		f.Add([]byte(s))
	}
	const (
		caps     = `{"extensions":{"io.modelcontextprotocol/tasks":{"a":1}}}`
		metaHead = `{"io.modelcontextprotocol/protocolVersion":"v","io.modelcontextprotocol/clientCapabilities":` + caps
		meta     = metaHead + `}`
		// params (the last, then fuzzed below) has no notifications: they
		// would leave the typed params (and so the caps) unbuilt.
		params = `{"taskId":"a","name":"n","uri":"u","arguments":{},"inputResponses":{},"requestState":"s","_meta":` + meta
		head   = `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":` + params + `,"notifications":{}},"params":`
	)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkOnePass(t, b)
		checkOnePass(t, []byte(head+string(b)+`}`))
		checkOnePass(t, []byte(head+params+`,"_meta":`+string(b)+`}}`))
		checkOnePass(t, []byte(head+params+`,"_meta":`+metaHead+`,"io.modelcontextprotocol/clientCapabilities":`+string(b)+`}}}`))
	})
}

// BenchmarkParseBody: the reference and the one-pass parse on the bodies
// of cmd/darkroom's BenchmarkPollHandler (tasks/get; a tools/call
// get_generation).
func BenchmarkParseBody(b *testing.B) {
	for _, c := range []struct{ name, body string }{{"tasks_get", benchTasksGet}, {"get_generation", benchGetGeneration}} {
		body := []byte(c.body)
		for _, p := range []struct {
			name  string
			parse func([]byte) (*Envelope, error)
		}{{"reference", parseBodyReference}, {"one_pass", ParseBody}} {
			b.Run(c.name+"/"+p.name, func(b *testing.B) {
				if _, ok := parseBodyOnePass(body); !ok {
					b.Fatal("the one-pass parse declines the benchmark body")
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if _, err := p.parse(body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
