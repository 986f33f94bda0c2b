package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/internal/testrig"
	"github.com/darkroom-mcp/darkroom/server"
	"github.com/darkroom-mcp/darkroom/server/edge"
	"github.com/darkroom-mcp/darkroom/server/limit"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// debugLines keeps the Observer's debug lines: what each request was
// labelled and which path served it.
type debugLines struct {
	mu    sync.Mutex
	lines []map[string]string
}

func (d *debugLines) Enabled(context.Context, slog.Level) bool { return true }
func (d *debugLines) WithAttrs([]slog.Attr) slog.Handler       { return d }
func (d *debugLines) WithGroup(string) slog.Handler            { return d }
func (d *debugLines) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "request" {
		return nil
	}
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	d.mu.Lock()
	d.lines = append(d.lines, m)
	d.mu.Unlock()
	return nil
}

func (d *debugLines) last() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lines[len(d.lines)-1]
}

// TestAddToolFromTestPackage adds a tool from outside gentools by one row
// of the table and its handler, and nothing else: it is listed, charged
// its class, labelled by its name, served below go-sdk when its
// predicate takes the call, byte for byte as go-sdk answers it when the
// predicate does not.
func TestAddToolFromTestPackage(t *testing.T) {
	rig := testrig.New(t)
	svc := rig.Service(t, generation.Config{})
	tools := gentools.New(gentools.Config{Service: svc, Owner: server.ToolOwner})
	echo := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Text string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil
	}
	tools.Add(gentools.Tool{
		Def:     &mcp.Tool{Name: "echo", Description: "Says it back.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"lean":{"type":"boolean"}}}`)},
		Handler: echo,
		Class:   gentools.ClassPoll,
		Read: func(ctx context.Context, req *mcp.CallToolRequest) (edge.Reply, error) {
			res, err := echo(ctx, req)
			return edge.Reply{Result: res}, err
		},
		Lean: func(req *mcp.CallToolRequest) bool {
			var a struct{ Lean bool }
			return json.Unmarshal(req.Params.Arguments, &a) == nil && a.Lean
		},
	})

	const polls = 3 // tools/list and echo twice; a third echo is refused
	classes := limit.NewClasses(limit.Options{})
	classes.Poll.Rate, classes.Poll.Burst = 1e-9, polls
	impl := server.Implementation("test")
	d := tasks.NewDispatcher(tasks.Options{Store: tasks.NewStore(rig.DB.Tasks(), time.Now), ServerInfo: impl})
	log := &debugLines{}
	cfg := server.Config{Version: "test", Tools: tools, Edge: edge.New(d, edge.Options{}), Limits: classes, Configure: func(s *mcp.Server) { s.AddReceivingMiddleware(tasks.SDKMiddleware()) }}
	obs := &server.Observer{Log: slog.New(log), Tools: tools.Names(), ToolClass: tools.RateClass}
	srv := httptest.NewServer(obs.HTTP(server.Handler(cfg, server.New(cfg))))
	t.Cleanup(srv.Close)

	post := func(method string, params map[string]any) (int, string) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") { // the one message of go-sdk's stream
			for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					return resp.StatusCode, data
				}
			}
		}
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	if _, list := post("tools/list", map[string]any{}); !strings.Contains(list, `"name":"echo"`) {
		t.Fatalf("tools/list does not list echo: %s", list)
	}
	if c := server.ClassOf("tools/call", "echo", tools.RateClass); c != gentools.ClassPoll {
		t.Errorf("echo is charged %q, want its row's %q", c, gentools.ClassPoll)
	}
	answers := map[bool]string{}
	for _, lean := range []bool{true, false} {
		code, answer := post("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi", "lean": lean}})
		line := log.last()
		if want := map[bool]string{true: string(envelope.PathLean), false: string(envelope.PathSDK)}[lean]; line["path"] != want || line["tool"] != "echo" {
			t.Errorf("lean=%v: labelled %q served by %q; want echo, %s", lean, line["tool"], line["path"], want)
		}
		if code != http.StatusOK || !strings.Contains(answer, "echo: hi") {
			t.Fatalf("lean=%v: %d %s", lean, code, answer)
		}
		answers[lean] = answer
	}
	// The argument that chose the path is no part of the answer.
	if answers[true] != answers[false] {
		t.Errorf("the lean answer differs from go-sdk's:\nlean   %s\ngo-sdk %s", answers[true], answers[false])
	}
	if code, answer := post("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "again"}}); code != http.StatusTooManyRequests {
		t.Errorf("a call after a poll burst of %d: %d %s; want 429 (echo is charged)", polls, code, fmt.Sprint(answer))
	}
}
