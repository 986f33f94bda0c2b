package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/darkroom-mcp/darkroom/client"
)

const clientUsage = `Usage:
  darkroom client [flags] call TOOL [JSON-ARGS]   call a tool as a Tasks client, wait, print the result
  darkroom client [flags] resume                  finish the tasks an earlier run left pending

`

// clientConfig is the settings of darkroom client.
type clientConfig struct {
	Endpoint, Token, State string
}

func clientSettings() []setting[clientConfig] {
	home, _ := os.UserHomeDir()
	return []setting[clientConfig]{
		{flag: "endpoint", env: envs("DARKROOM_ENDPOINT"), def: "http://127.0.0.1:8080/mcp",
			help: "MCP endpoint",
			set:  func(c *clientConfig, v string) error { c.Endpoint = v; return nil }},
		{flag: "token", env: envs("DARKROOM_TOKEN"),
			help: "bearer token (API key)",
			set:  func(c *clientConfig, v string) error { c.Token = v; return nil }},
		{flag: "state", env: envs("DARKROOM_CLIENT_STATE"), def: filepath.Join(home, ".cache", "darkroom", "client.db"),
			doc: "`~/.cache/darkroom/client.db`", help: "task state file",
			set: func(c *clientConfig, v string) error { c.State = v; return nil }},
	}
}

// runClient is `darkroom client`: the Tasks flow from a shell, with task
// ids kept in a local file so an interrupted wait can be resumed.
func runClient(ctx context.Context, args []string, out io.Writer) error {
	var cfg clientConfig
	rest, err := parseSettings("client", clientSettings(), args, true, &cfg)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return usageError{errors.New("client: name a subcommand")}
	}
	if err := os.MkdirAll(filepath.Dir(cfg.State), 0o700); err != nil {
		return err
	}
	c, err := client.New(client.Options{Endpoint: cfg.Endpoint, Token: cfg.Token, StatePath: cfg.State, ClientName: "darkroom-cli", ClientVersion: buildVersion()})
	if err != nil {
		return err
	}
	defer c.Close()
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	switch rest[0] {
	case "call":
		if len(rest) < 2 || len(rest) > 3 {
			return usageError{errors.New("client call: want TOOL [JSON-ARGS]")}
		}
		toolArgs := json.RawMessage("{}")
		if len(rest) == 3 {
			if !json.Valid([]byte(rest[2])) {
				return fmt.Errorf("client call: arguments are not JSON: %s", rest[2])
			}
			toolArgs = json.RawMessage(rest[2])
		}
		o, err := c.CallTool(ctx, rest[1], toolArgs)
		if err != nil {
			return err
		}
		if err := enc.Encode(o.Result); err != nil {
			return err
		}
		if o.IsError() {
			return errors.New("the tool reported an error")
		}
		return nil
	case "resume":
		done, err := c.Resume(ctx)
		if err != nil {
			return err
		}
		for _, r := range done {
			if r.Err != nil {
				fmt.Fprintf(out, "%s: %v\n", r.TaskID, r.Err)
				continue
			}
			if err := enc.Encode(r.Outcome.Result); err != nil {
				return err
			}
		}
		return nil
	}
	return usageError{fmt.Errorf("client: unknown subcommand %q", rest[0])}
}
