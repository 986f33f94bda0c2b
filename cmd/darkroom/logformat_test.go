package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/darkroom-mcp/darkroom/server/auth"
)

// TestLogFormat: auto is text on a terminal and JSON on anything else;
// json and text are themselves; anything else is refused.
func TestLogFormat(t *testing.T) {
	cases := []struct {
		v        string
		terminal bool
		want     string
		err      bool
	}{
		{"auto", true, logText, false},
		{"auto", false, logJSON, false},
		{"json", true, logJSON, false},
		{"text", false, logText, false},
		{"xml", true, "", true},
		{"", false, "", true},
	}
	for _, c := range cases {
		got, err := parseLogFormat(c.v, func() bool { return c.terminal })
		if got != c.want || (err != nil) != c.err {
			t.Errorf("%q on a terminal %v: %q, %v; want %q", c.v, c.terminal, got, err, c.want)
		}
	}
}

// TestTextBanner: on a terminal the start-up banner is a few lines that
// say where darkroom serves and keeps its data, which key turns on each
// provider not configured, and end with the command that connects an
// assistant (stdio: the command itself; with keys: the header); in JSON
// it stays one log line.
func TestTextBanner(t *testing.T) {
	clearSettingsEnv(t)
	key, err := auth.NewAPIKey("alice", []byte("alice-valid-secret"), auth.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		url    string
		keys   bool
		last   string
		absent string
	}{
		{"serve", "http://127.0.0.1:8080/mcp", false, "  claude mcp add --transport http darkroom http://127.0.0.1:8080/mcp", "Bearer"},
		{"serve with keys", "http://127.0.0.1:8080/mcp", true, `  claude mcp add --transport http darkroom http://127.0.0.1:8080/mcp --header "Authorization: Bearer <key>"`, "loopback only"},
		{"stdio", "stdio", false, "  claude mcp add darkroom -- /opt/bin/darkroom stdio", "auth:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseConfig("serve", []string{"--log-format", "text"})
			if err != nil {
				t.Fatal(err)
			}
			cfg.DataDir, cfg.LocalLatency = t.TempDir(), 0
			if c.keys {
				cfg.Auth = auth.Config{Keys: []auth.APIKey{key}}
			}
			a, err := build(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer a.close()
			var b bytes.Buffer
			a.writeBanner(&b, c.url, "/opt/bin/darkroom")
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			t.Logf("\n%s", b.String())
			if len(lines) > 8 || lines[len(lines)-1] != c.last || !strings.HasPrefix(lines[len(lines)-2], "Next") {
				t.Errorf("the banner does not end with the next step %q", c.last)
			}
			for _, want := range []string{"darkroom ", cfg.DataDir, "local (", "REPLICATE_API_TOKEN (replicate)", "FAL_KEY (fal)", "GEMINI_API_KEY (google)", "OPENAI_API_KEY (openai)"} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("the banner does not say %q", want)
				}
			}
			if strings.Contains(b.String(), c.absent) || strings.Contains(b.String(), "alice-valid-secret") {
				t.Errorf("the banner says %q or a secret", c.absent)
			}
			for _, l := range lines {
				if len(l) > 160 {
					t.Errorf("a line of %d characters: %s", len(l), l)
				}
			}

			// JSON: one line, the banner's attributes.
			var j bytes.Buffer
			a.cfg.LogFormat = logJSON
			old := bannerOut
			bannerOut = &j // must stay empty
			defer func() { bannerOut = old }()
			var logged bytes.Buffer
			a.announce(slog.New(slog.NewJSONHandler(&logged, nil)), "darkroom serving", c.url, nil)
			if j.Len() != 0 || strings.Count(logged.String(), "\n") != 1 || !strings.Contains(logged.String(), `"msg":"darkroom serving"`) {
				t.Errorf("in JSON the banner is %q and %q", j.String(), logged.String())
			}
		})
	}
}
