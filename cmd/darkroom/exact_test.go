package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/server"
)

// sdkOracle serves s's app with go-sdk alone (no lean paths below it):
// what go-sdk answers is what every lean path must answer.
func sdkOracle(t testing.TB, s *testServer) *httptest.Server {
	cfg := s.app.serverConfig()
	cfg.Edge = nil
	sdk := httptest.NewServer(s.app.observeHTTP(server.Handler(cfg, s.app.mcp)))
	t.Cleanup(sdk.Close)
	return sdk
}

// nested is v inside n arrays.
func nested(n int, v any) any {
	for range n {
		v = []any{v}
	}
	return v
}

// TestBodyTooDeep: a body nested deeper than go-sdk's 1000 levels is
// refused at the door (-32700, 400) whichever path would serve it, the
// lean get_credits as go-sdk's list_models; one at the limit is served,
// the lean path answering exactly as go-sdk alone.
func TestBodyTooDeep(t *testing.T) {
	s := startServer(t, 0)
	sdk := sdkOracle(t, s)
	// The body is {params:{arguments:{x: ...}}}: 3 levels around the arrays.
	for _, era := range []leanPost{{version: "2025-06-18"}, {version: "2026-07-28", meta: modernMeta(map[string]any{})}} {
		for _, tool := range []string{"get_credits", "list_models"} {
			deep, _ := era.post(t, s.url, tool, map[string]any{"x": nested(998, 1)})
			if !strings.HasPrefix(deep, "400 ") || !strings.Contains(deep, "-32700") || !strings.Contains(deep, "deeper than 1000") {
				t.Errorf("%s %s, 1001 levels: %.200s", era.version, tool, deep)
			}
			atLimit, _ := era.post(t, s.url, tool, map[string]any{"x": nested(997, 1)})
			want, _ := era.post(t, sdk.URL, tool, map[string]any{"x": nested(997, 1)})
			if atLimit != want || strings.Contains(atLimit, "deeper") {
				t.Errorf("%s %s, 1000 levels:\n got %.300s\nwant %.300s", era.version, tool, atLimit, want)
			}
		}
	}
}

// sdkAnswer is one answer as the oracle compares it: the status and the
// JSON-RPC message (the last SSE data line of a go-sdk stream, the whole
// body of a plain one).
func sdkAnswer(status int, body []byte) string {
	if i := bytes.LastIndex(body, []byte("\ndata: ")); i >= 0 || bytes.HasPrefix(body, []byte("data: ")) {
		msg := body[i+len("\ndata: "):]
		if i < 0 {
			msg = body[len("data: "):]
		}
		body, _, _ = bytes.Cut(msg, []byte("\n"))
	}
	return fmt.Sprintf("%d %s", status, bytes.TrimSpace(body))
}

// FuzzLeanAnswersAsGoSDK: for any body, whatever darkroom's door and lean
// read paths answer equals what go-sdk alone answers for the same request
// (status and message), on every era; only bodies that would create
// something (every tool but the lean reads, every method but tools/call)
// are skipped, the two servers sharing one store. The headers are the
// ones an honest client of the era sends for what the body says.
func FuzzLeanAnswersAsGoSDK(f *testing.F) {
	s := startServer(f, 0, func(c *config) {
		c.PollRate, c.PollBurst = 1e9, 1_000_000_000
		c.ByteRate, c.ByteBurst = 1<<40, 1<<40
	})
	sdk := sdkOracle(f, s)
	reads := map[string]bool{} // the tool table's lean reads
	for _, row := range s.app.tools.Table() {
		reads[row.Def.Name] = row.Read != nil
	}
	eras := []string{"", "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}
	modern := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for i := range eras {
		meta := ""
		if eras[i] == "2026-07-28" {
			meta = modern + ","
		}
		for _, call := range []string{
			`"name":"get_credits"`,
			`"name":"get_credits","arguments":{}`,
			`"name":"list_generations","arguments":{"limit":2}`,
			`"name":"get_generation","arguments":{"generationId":"g-0"}`,
			`"name":"download_output","arguments":{"generationId":"nope","output":1}`,
			`"name":"get_credits","arguments":{"x":[[[[1]]]]}`,
			`"name":"get_credits","arguments":null`,
		} {
			f.Add(uint8(i), []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{`+meta+call+`}}`))
		}
		f.Add(uint8(i), []byte(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{`+meta+`"name":"get_credits","_meta":{}}}`))
		f.Add(uint8(i), []byte(`{"jsonrpc":"2.0","id":1e400,"method":"tools/call","params":{`+meta+`"name":"get_credits"}}`))
		f.Add(uint8(i), []byte(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{`+meta+`"name":"list_generations","arguments":{"limit":1e400}}}`))
		f.Add(uint8(i), []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{`+meta+`"name":"get_credits","_meta":{"progressToken":1}}}`))
		f.Add(uint8(i), []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get_credits",`+meta+`"_meta":null}}`))
		f.Add(uint8(i), []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{`+meta+`"name":"get_credits","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`))
		f.Add(uint8(i), []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get_credits","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`))
		f.Add(uint8(i), []byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_credits"}}]`))
	}
	hc := benchClient(4)
	f.Fuzz(func(t *testing.T, era uint8, body []byte) {
		version := eras[int(era)%len(eras)]
		h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
		if version != "" {
			h["Mcp-Protocol-Version"] = version
		}
		if e, err := envelope.ParseBody(body); err == nil {
			for _, m := range e.Messages() {
				if read := reads[m.Name]; m.Request && (m.Method != "tools/call" || !read) {
					return // it could create or change something: the servers share a store
				}
			}
			if version >= "2026-07-28" {
				h["Mcp-Method"], h["Mcp-Name"] = e.Method, e.Name
			}
		}
		got, gotBody, err := postRaw(hc, s.url+"/mcp", body, h)
		if err != nil {
			t.Fatal(err)
		}
		want, wantBody, err := postRaw(hc, sdk.URL+"/mcp", body, h)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := sdkAnswer(got, gotBody), sdkAnswer(want, wantBody); g != w {
			t.Fatalf("era %q, body %q:\n lean   %.400s\n go-sdk %.400s", version, body, g, w)
		}
	})
}
