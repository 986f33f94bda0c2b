package envelope

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FuzzParseBody: the fast paths' body parser never panics, never accepts
// data after the value, and agrees with go-sdk's own decoder on what a
// single message is: the method go-sdk would dispatch and whether it is a
// call. Whatever it accepts, go-sdk reads as the same request; so the rate
// class and the header checks decided on it are about what runs.
func FuzzParseBody(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"generate","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tasks/get","params":{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"generate"}},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_models","NAME":"generate"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"} {"jsonrpc":"2.0","id":2,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`  {"method":"a","method":"b","id":1}  `,
		`[]`, `null`, `"x"`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := ParseBody(body)
		if err != nil {
			if _, ok := err.(*RPCError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if _, err := ParseBody(append(bytes.Clone(body), '}')); err == nil {
			t.Fatalf("%q accepted with a byte after the value", body)
		}
		if e.IsBatch || !e.Request {
			return
		}
		msg, err := jsonrpc.DecodeMessage(body)
		if err != nil {
			return // go-sdk refuses it: nothing runs
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok {
			t.Fatalf("%q: a request here, a %T to go-sdk", body, msg)
		}
		if req.Method != e.Method {
			t.Fatalf("%q: method %q here, %q to go-sdk", body, e.Method, req.Method)
		}
		if req.IsCall() != e.Call {
			t.Fatalf("%q: call=%v here, %v to go-sdk", body, e.Call, req.IsCall())
		}
		// stdio's parse of go-sdk's message reads what HTTP's reads (the
		// same params: what the dispatcher decodes of them agrees too).
		if m := ParseRequest(req); m.Name != e.Name || m.Version != e.Version || m.HasCaps != e.HasCaps || !bytes.Equal(m.Params, e.Params) {
			t.Fatalf("%q: name %q, version %q, caps %v, params %s from the body; %q, %q, %v, %s from go-sdk's message",
				body, e.Name, e.Version, e.HasCaps, e.Params, m.Name, m.Version, m.HasCaps, m.Params)
		}
		if !json.Valid(body) {
			t.Fatalf("%q accepted but not valid JSON", body)
		}
	})
}
