package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/server/auth"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestOneParsePerRequest walks every method and tool (walkedMethods) on
// every era and both transports, and counts darkroom's parses of each
// request (tasks.Parses): the door's, and any layer's after it. Each
// request is parsed exactly once, whichever path serves it. Not parallel:
// the count is the process's.
func TestOneParsePerRequest(t *testing.T) {
	keys, err := auth.ParseKeyList("parse=parse-secret-000001", "test")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, 0, func(c *config) {
		c.Auth = auth.Config{Keys: keys}
		c.PollRate, c.PollBurst = 1e6, 1e6
		c.CreateRate, c.CreateBurst = 1e6, 1e6
		c.ByteRate, c.ByteBurst = 1<<40, 1<<40
	})
	methods := walkedMethods(t, s.app.tools.Names())
	countedN := func(t *testing.T, what string, want int64, send func()) {
		t.Helper()
		before := tasks.Parses()
		send()
		if n := tasks.Parses() - before; n != want {
			t.Errorf("%s was parsed %d times; want %d", what, n, want)
		}
	}
	counted := func(t *testing.T, what string, send func()) { t.Helper(); countedN(t, what, 1, send) }
	for _, era := range walkEras {
		for _, m := range methods {
			kinds := []bool{false}
			if era == "2025-03-26" {
				kinds = append(kinds, true) // a one-message batch too
			}
			for _, batch := range kinds {
				t.Run(fmt.Sprintf("http/%s/%s/%s/batch=%v", era, m.method, m.name, batch), func(t *testing.T) {
					msg := httpMessage(m, era, !m.notification, 1)
					counted(t, "the body", func() { postWalk(t, s.url, "parse-secret-000001", era, m, msg, batch) })
				})
			}
		}
	}
	for _, era := range walkEras {
		t.Run("stdio/"+era, func(t *testing.T) {
			c := limit.NewClasses(limit.Options{})
			c.Poll.Rate, c.Poll.Burst = 1e6, 1e6
			c.Create.Rate, c.Create.Burst = 1e6, 1e6
			c.Bytes.Rate, c.Bytes.Burst = 1<<40, 1<<40
			conn := stdioWalk(t, s.app, c)
			if era != "2026-07-28" {
				init, _ := json.Marshal(map[string]any{"protocolVersion": era, "capabilities": map[string]any{},
					"clientInfo": map[string]any{"name": "walk", "version": "1"}})
				counted(t, "initialize", func() { stdioSend(t, conn, &jsonrpc.Request{ID: rpcID(100), Method: "initialize", Params: init}) })
				// A notification has no answer to wait for: it is counted
				// with the ping answered after it.
				countedN(t, "notifications/initialized and a ping", 2, func() {
					stdioSend(t, conn, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
					stdioSend(t, conn, &jsonrpc.Request{ID: rpcID(101), Method: "ping", Params: json.RawMessage(`{}`)})
				})
			}
			for i, m := range methods {
				if strings.HasPrefix(m.method, "notifications/") || m.method == "initialize" {
					continue // answered by nothing to wait for (or already sent)
				}
				p, _ := json.Marshal(withMeta(m, era))
				req := &jsonrpc.Request{ID: rpcID(int64(i + 1)), Method: m.method, Params: p}
				counted(t, m.method+" "+m.name, func() { stdioSend(t, conn, req) })
			}
		})
	}
}
