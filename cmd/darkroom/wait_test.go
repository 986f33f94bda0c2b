package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWaitProgressOverHTTP: a wait with a progressToken hears
// notifications/progress on its own response stream, in both eras, and
// still gets its result.
func TestWaitProgressOverHTTP(t *testing.T) {
	s := startServer(t, 0.05) // video: about a second
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			var mu sync.Mutex
			var got []*mcp.ProgressNotificationParams
			c := mcp.NewClient(&mcp.Implementation{Name: "e2e-progress", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					got = append(got, req.Params)
					mu.Unlock()
				},
			})
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			var g genView
			call(t, cs, "generate", map[string]any{"modelId": "local-motion", "prompt": "progress " + version, "durationSeconds": 2}, &g)
			p := &mcp.CallToolParams{Name: "wait_generation", Arguments: map[string]any{"generationId": g.GenerationID, "timeoutSeconds": 60}}
			p.SetProgressToken("wait-" + version)
			res, err := cs.CallTool(context.Background(), p)
			if err != nil || res.IsError {
				t.Fatalf("wait_generation: %v %s", err, text(res))
			}
			if out, _ := res.StructuredContent.(map[string]any); out["status"] != "completed" {
				t.Fatalf("status %v, want completed", out["status"])
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) == 0 {
				t.Fatal("no notifications/progress during the wait")
			}
			for _, n := range got {
				if n.ProgressToken != "wait-"+version || n.Message == "" || strings.Contains(n.Message, g.GenerationID) { // a person's line: no id
					t.Fatalf("notification %+v", n)
				}
			}
		})
	}
}
