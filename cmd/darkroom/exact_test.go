package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/server"
)

// sdkOracle serves s's app with go-sdk alone (no lean paths below it):
// what go-sdk answers is what every lean path must answer.
func sdkOracle(t *testing.T, s *testServer) *httptest.Server {
	cfg := s.app.serverConfig()
	cfg.Tasks = nil
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
