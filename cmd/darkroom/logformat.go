package main

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Log formats: json is one JSON object a line (what log collectors read),
// text slog's key=value lines and a start-up banner written for a person.
// auto, the default, is text when stderr is a terminal and json
// otherwise, so that a person running darkroom by hand reads sentences and
// every supervisor, container and host that pipes it gets JSON.
const (
	logJSON = "json"
	logText = "text"
)

// parseLogFormat reads --log-format; terminal says whether stderr is one.
func parseLogFormat(v string, terminal func() bool) (string, error) {
	switch v {
	case "auto":
		if terminal() {
			return logText, nil
		}
		return logJSON, nil
	case logJSON, logText:
		return v, nil
	}
	return "", fmt.Errorf("%q: want auto, json or text", v)
}

// stderrIsTerminal: stderr is a character device (a terminal, or the
// null device), not a pipe or a file.
func stderrIsTerminal() bool {
	fi, err := os.Stderr.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// logger is the process's logger for cfg's level and format, on stderr.
func (c *config) logger() *slog.Logger {
	if c.LogFormat == logText {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: c.LogLevel}))
	}
	return newLogger(c.LogLevel)
}

// bannerOut is where the text banner goes (tests replace it).
var bannerOut io.Writer = os.Stderr

// announce logs that darkroom is up: as one JSON line with everything
// (banner), or, in the text format, as a few lines for a person that end
// with what to do next.
func (a *app) announce(log *slog.Logger, msg, mcpURL string, metricsLn net.Listener) {
	if a.cfg.LogFormat != logText {
		log.Info(msg, a.banner(mcpURL, metricsLn)...)
		return
	}
	exe, err := os.Executable()
	if err != nil || strings.HasPrefix(exe, os.TempDir()) || strings.Contains(exe, "go-build") {
		exe = "darkroom" // go run's binary is gone once it exits
	}
	a.writeBanner(bannerOut, mcpURL, exe)
}

// writeBanner is the text banner: what runs and where, which providers,
// which key turns on each missing one, then the next step (the command
// that connects an assistant). exe is the command stdio is started as.
func (a *app) writeBanner(w io.Writer, mcpURL, exe string) {
	cfg := a.cfg
	stdio := mcpURL == "stdio"
	if stdio {
		fmt.Fprintf(w, "darkroom %s on stdio: an assistant starts this command and speaks MCP on its stdin and stdout\n", buildVersion())
	} else {
		fmt.Fprintf(w, "darkroom %s serving MCP at %s\n", buildVersion(), mcpURL)
	}
	store := "SQLite " + absPath(filepath.Join(cfg.DataDir, "darkroom.db"))
	if cfg.DatabaseURL != "" {
		store = "PostgreSQL " + redactURL(cfg.DatabaseURL)
	}
	files := "outputs in " + absPath(filepath.Join(cfg.DataDir, "files"))
	if cfg.S3.Bucket != "" {
		files = "outputs in S3 bucket " + cfg.S3.Bucket
	}
	fmt.Fprintf(w, "  data:      %s; %s\n", store, files)
	var have []string
	for _, p := range a.providers {
		have = append(have, fmt.Sprintf("%s (%d models)", p.Name(), len(p.Models())))
	}
	fmt.Fprintf(w, "  providers: %s\n", strings.Join(have, ", "))
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(providerKeys)) {
		if slices.ContainsFunc(a.providers, func(p provider.Provider) bool { return p.Name() == name }) {
			continue
		}
		for _, s := range serverSettings("serve") {
			if s.flag == providerKeys[name] {
				missing = append(missing, s.env[len(s.env)-1]+" ("+name+")")
			}
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(w, "  more:      set %s, and start again\n", strings.Join(missing, ", "))
	}
	keyed := !stdio && cfg.Auth.Configured()
	if !stdio {
		auth := "none: loopback only, as the single local user"
		if keyed {
			auth = "API keys or OAuth tokens (send Authorization: Bearer <key>)"
		}
		fmt.Fprintf(w, "  auth:      %s\n", auth)
	}
	fmt.Fprintln(w, "Next, connect your assistant (README.md, Install); with Claude Code:")
	switch {
	case stdio:
		fmt.Fprintf(w, "  claude mcp add darkroom -- %s stdio\n", exe)
	case keyed:
		fmt.Fprintf(w, "  claude mcp add --transport http darkroom %s --header \"Authorization: Bearer <key>\"\n", mcpURL)
	default:
		fmt.Fprintf(w, "  claude mcp add --transport http darkroom %s\n", mcpURL)
	}
}
