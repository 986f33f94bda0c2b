package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
)

func TestClientCommand(t *testing.T) {
	s := startServer(t, 0)
	state := filepath.Join(t.TempDir(), "client.db")
	var out bytes.Buffer
	err := runClient(context.Background(), []string{"--endpoint", s.url + "/mcp", "--state", state,
		"call", "generate", `{"modelId":"local-sketch","prompt":"from the shell"}`}, &out)
	if err != nil {
		t.Fatalf("client call: %v\n%s", err, out.String())
	}
	var res struct {
		StructuredContent struct {
			Status  string `json:"status"`
			Outputs []any  `json:"outputs"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.StructuredContent.Status != "completed" || len(res.StructuredContent.Outputs) != 1 {
		t.Fatalf("client call printed %s (%v)", out.String(), err)
	}
	out.Reset()
	if err := runClient(context.Background(), []string{"--endpoint", s.url + "/mcp", "--state", state, "call", "generate", `{"prompt":"x","modelId":"local-sketch","aspectRatio":"7:3"}`}, &out); err == nil {
		t.Fatalf("a tool error should fail the command: %s", out.String())
	}
	if err := runClient(context.Background(), []string{"--endpoint", s.url + "/mcp", "--state", state, "call", "generate", `{not json`}, &out); err == nil {
		t.Fatal("bad JSON arguments accepted")
	}
}
