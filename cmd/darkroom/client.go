package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/client"
	"github.com/darkroom-mcp/darkroom/gentask"
)

const clientUsage = `Usage:
  darkroom client [flags] call TOOL [JSON-ARGS]   call a tool as a Tasks client, wait, print the result
  darkroom client [flags] resume [TASK-ID]        finish the tasks an earlier run left pending (or one)

While it waits it prints each change of the task to stderr, and the
result as JSON to stdout. Ctrl-C stops waiting (the task goes on) and
prints the command that resumes it. A task that waits for what this
command cannot give (an upload_input, input it cannot answer) is not
waited for: its status message is printed and the command exits 1.

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
// ids kept in a local file so an interrupted wait can be resumed. Results
// go to out as JSON; progress, the result's line and how to resume go to
// errw.
func runClient(ctx context.Context, args []string, out, errw io.Writer) error {
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
	p := &progress{w: errw, start: time.Now()}
	c, err := client.New(client.Options{Endpoint: cfg.Endpoint, Token: cfg.Token, StatePath: cfg.State,
		ClientName: "darkroom-cli", ClientVersion: buildVersion(), OnProgress: p.show,
		Blocked: func(t *client.DetailedTask) bool { return gentask.WaitsForUpload(t.StatusMessage) }})
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
			return p.stopped(ctx, err, cfg)
		}
		return printOutcome(enc, errw, o)
	case "resume":
		if len(rest) > 2 {
			return usageError{errors.New("client resume: want at most one TASK-ID")}
		}
		if len(rest) == 2 {
			p.taskID = rest[1]
			o, err := c.Wait(ctx, rest[1])
			if err != nil && o == nil {
				return p.stopped(ctx, err, cfg)
			}
			if err != nil && o.Result == nil {
				return err
			}
			return printOutcome(enc, errw, o)
		}
		p.all = true
		done, err := c.Resume(ctx)
		if err != nil {
			return err
		}
		if len(done) == 0 {
			return fmt.Errorf("client resume: nothing to resume: no pending task in %s", cfg.State)
		}
		if ctx.Err() != nil {
			return p.interrupted(ctx, ctx.Err(), cfg)
		}
		unfinished := 0
		for _, r := range done {
			if r.Err != nil {
				unfinished++
				if !p.blocked(r.Err, r.TaskID, cfg) {
					fmt.Fprintf(errw, "%s: %v\n", r.TaskID, r.Err)
				}
				continue
			}
			if err := enc.Encode(r.Outcome.Result); err != nil {
				return err
			}
		}
		if unfinished > 0 {
			return fmt.Errorf("client resume: %d of %d tasks did not complete (see above)", unfinished, len(done))
		}
		return nil
	}
	return usageError{fmt.Errorf("client: unknown subcommand %q", rest[0])}
}

// printOutcome writes the result as JSON, and its first line (written for
// a person) to errw.
func printOutcome(enc *json.Encoder, errw io.Writer, o *client.Outcome) error {
	if err := enc.Encode(o.Result); err != nil {
		return err
	}
	var res struct {
		Content []struct{ Type, Text string } `json:"content"`
	}
	if json.Unmarshal(o.Result, &res) == nil && len(res.Content) > 0 && res.Content[0].Type == "text" {
		fmt.Fprintln(errw, res.Content[0].Text)
	}
	if o.IsError() {
		return errors.New("the tool reported an error")
	}
	return nil
}

// progress prints one line per change of the task being waited for.
type progress struct {
	w      io.Writer
	start  time.Time
	taskID string // the task last heard of
	all    bool   // waiting for every pending task (resume without an id)
}

func (p *progress) show(t *client.DetailedTask) {
	if p.taskID == "" {
		fmt.Fprintf(p.w, "task %s (Ctrl-C stops waiting; the task goes on)\n", t.TaskID)
	}
	p.taskID = t.TaskID
	line := string(t.Status)
	if m := t.StatusMessage; strings.HasPrefix(m, line) {
		line = m // "completed: 1 output" says the status already
	} else if m != "" {
		line += ": " + m
	}
	fmt.Fprintf(p.w, "%5.0fs %s\n", time.Since(p.start).Seconds(), line)
}

// stopped explains a wait that ended before its task did: a task blocked
// on what this command cannot give, or Ctrl-C (interrupted).
func (p *progress) stopped(ctx context.Context, err error, cfg clientConfig) error {
	var be *client.BlockedError
	if errors.As(err, &be) && p.blocked(err, be.TaskID, cfg) {
		return fmt.Errorf("task %s waits for what this command cannot give; not waiting", be.TaskID)
	}
	return p.interrupted(ctx, err, cfg)
}

// blocked prints what a blocked task waits for and how to go on, and
// reports whether err was such a task.
func (p *progress) blocked(err error, taskID string, cfg clientConfig) bool {
	var be *client.BlockedError
	if !errors.As(err, &be) {
		return false
	}
	msg := be.StatusMessage
	if msg == "" {
		msg = "(the server gave no status message)"
	}
	fmt.Fprintf(p.w, "Task %s is %s and waits for what this command cannot give:\n  %s\n", taskID, be.Status, msg)
	if errors.Is(err, client.ErrNoInputHandler) {
		fmt.Fprintf(p.w, "This command answers no input requests; use an MCP client that does.\n")
	}
	fmt.Fprintf(p.w, "Once that is done, wait for it with:\n  %s\n", p.resumeCommand(cfg, taskID))
	return true
}

// interrupted turns a wait ended by Ctrl-C into the command that resumes
// it; any other error is returned as is. It never wraps context.Canceled,
// so the command exits non-zero.
func (p *progress) interrupted(ctx context.Context, err error, cfg clientConfig) error {
	if ctx.Err() == nil {
		return err
	}
	if p.taskID == "" && !p.all {
		return errors.New("interrupted before the server created a task: nothing to resume (to retry safely, call again with the same idempotencyKey)")
	}
	what, id := "task "+p.taskID+" is", p.taskID
	if p.all {
		what, id = "the pending tasks are", ""
	}
	fmt.Fprintf(p.w, "Stopped waiting; %s still running on the server. To wait again:\n  %s\n", what, p.resumeCommand(cfg, id))
	return errors.New("interrupted: " + what + " still running; resume as shown above")
}

// resumeCommand is the shell command that waits for taskID again (every
// pending task when "").
func (p *progress) resumeCommand(cfg clientConfig, taskID string) string {
	cmd := []string{"darkroom", "client", "--endpoint", cfg.Endpoint}
	if def := clientDefault("state"); cfg.State != def {
		cmd = append(cmd, "--state", cfg.State)
	}
	cmd = append(cmd, "resume")
	if taskID != "" {
		cmd = append(cmd, taskID)
	}
	for i, a := range cmd {
		cmd[i] = shellQuote(a)
	}
	how := strings.Join(cmd, " ")
	if cfg.Token != "" {
		how += "   (with the same DARKROOM_TOKEN)"
	}
	return how
}

// clientDefault is the default of a client setting.
func clientDefault(flag string) string {
	for _, s := range clientSettings() {
		if s.flag == flag {
			return s.def
		}
	}
	return ""
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
