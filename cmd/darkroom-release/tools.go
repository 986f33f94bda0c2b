package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tool is one tool of tools/list as the release's files need it: its
// name, description and input schema.
type tool struct {
	Name        string
	Description string
	InputSchema map[string]any
}

// listTools starts bin as a host starts a stdio server (`darkroom stdio`,
// on a data folder of its own, offline) and returns its tools/list as a
// client that declares no extension sees it.
func listTools(ctx context.Context, bin string) ([]tool, error) {
	data, err := os.MkdirTemp("", "darkroom-tools-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(data)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "stdio", "--data", data, "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DARKROOM_MODELS_REFRESH=0")
	c := mcp.NewClient(&mcp.Implementation{Name: "darkroom-release", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("starting %s stdio: %w", bin, err)
	}
	defer cs.Close()
	var out []tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, err
		}
		var schema map[string]any
		if err := json.Unmarshal(b, &schema); err != nil {
			return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
		}
		out = append(out, tool{t.Name, t.Description, schema})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s stdio listed no tools", bin)
	}
	return out, nil
}
