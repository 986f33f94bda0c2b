package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/darkroom-mcp/darkroom/client"
)

const clientUsage = `Usage:
  darkroom client call TOOL [JSON-ARGS]   call a tool as a Tasks client, wait, print the result
  darkroom client resume                  finish the tasks an earlier run left pending

Flags (before the subcommand): --endpoint (DARKROOM_ENDPOINT, default http://127.0.0.1:8080/mcp),
--token (DARKROOM_TOKEN), --state (default ~/.cache/darkroom/client.db).
`

// runClient is `darkroom client`: the Tasks flow from a shell, with task
// ids kept in a local file so an interrupted wait can be resumed.
func runClient(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	endpoint := fs.String("endpoint", env("DARKROOM_ENDPOINT", "http://127.0.0.1:8080/mcp"), "MCP endpoint")
	token := fs.String("token", os.Getenv("DARKROOM_TOKEN"), "bearer token (API key)")
	home, _ := os.UserHomeDir()
	state := fs.String("state", filepath.Join(home, ".cache", "darkroom", "client.db"), "task state file")
	fs.Usage = func() { fmt.Fprint(fs.Output(), clientUsage) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return errors.New("client: name a subcommand")
	}
	if err := os.MkdirAll(filepath.Dir(*state), 0o700); err != nil {
		return err
	}
	c, err := client.New(client.Options{Endpoint: *endpoint, Token: *token, StatePath: *state, ClientName: "darkroom-cli", ClientVersion: buildVersion()})
	if err != nil {
		return err
	}
	defer c.Close()
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	switch rest[0] {
	case "call":
		if len(rest) < 2 || len(rest) > 3 {
			return errors.New("client call: want TOOL [JSON-ARGS]")
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
	return fmt.Errorf("client: unknown subcommand %q", rest[0])
}
