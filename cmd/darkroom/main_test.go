package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestRunHelp: -h and --help print the command's usage to stdout and exit
// 0; command lines that do not parse exit 2 with a message on stderr.
func TestRunHelp(t *testing.T) {
	cases := []struct {
		args   []string
		code   int
		stdout []string // substrings
		stderr string
	}{
		{args: []string{"-h"}, stdout: []string{"darkroom serve [flags]", "DARKROOM_*"}},
		{args: []string{"--help"}, stdout: []string{"darkroom serve [flags]"}},
		{args: []string{"help"}, stdout: []string{"darkroom serve [flags]"}},
		{args: []string{"help", "client"}, stdout: []string{"--endpoint"}},
		{args: []string{"serve", "-h"}, stdout: []string{"darkroom serve [flags]", "--addr", "DARKROOM_ADDR", "--unsafe-output-fetch", "DARKROOM_UNSAFE_OUTPUT_FETCH", "REPLICATE_API_TOKEN"}},
		{args: []string{"serve", "--help"}, stdout: []string{"--fal-key  DARKROOM_FAL_KEY or FAL_KEY"}},
		{args: []string{"stdio", "-h"}, stdout: []string{"darkroom stdio [flags]", "--data"}},
		{args: []string{"stdio", "--help"}, stdout: []string{"darkroom stdio [flags]"}},
		{args: []string{"client", "-h"}, stdout: []string{"darkroom client [flags] call", "DARKROOM_ENDPOINT", "DARKROOM_CLIENT_STATE"}},
		{args: []string{"client", "--help"}, stdout: []string{"darkroom client [flags] call"}},
		{args: []string{"version", "-h"}, stdout: []string{"darkroom version"}},
		{args: []string{"version", "--help"}, stdout: []string{"darkroom version"}},
		{args: []string{"version"}, stdout: []string{"darkroom "}},
		{args: nil, code: 2, stderr: "Usage:"},
		{args: []string{"bogus"}, code: 2, stderr: `unknown command "bogus"`},
		{args: []string{"serve", "--nope"}, code: 2, stderr: "-nope"},
		{args: []string{"stdio", "extra"}, code: 2, stderr: `unexpected argument "extra"`},
		{args: []string{"version", "extra"}, code: 2, stderr: `unexpected argument "extra"`},
		{args: []string{"client"}, code: 2, stderr: "name a subcommand"},
		{args: []string{"serve", "--retention", "1s"}, code: 1, stderr: "--retention"},
	}
	for _, c := range cases {
		t.Run(strings.Join(append([]string{"darkroom"}, c.args...), " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), c.args, &out, &errOut)
			check := func(how string, code int, out, errOut string) {
				t.Helper()
				if code != c.code {
					t.Errorf("%s: exit %d, want %d; stderr %q", how, code, c.code, errOut)
				}
				for _, s := range c.stdout {
					if !strings.Contains(out, s) {
						t.Errorf("%s: stdout lacks %q:\n%s", how, s, out)
					}
				}
				if !strings.Contains(errOut, c.stderr) {
					t.Errorf("%s: stderr lacks %q: %q", how, c.stderr, errOut)
				}
			}
			check("run", code, out.String(), errOut.String())
			// The built binary exits with the same code.
			var bout, berr bytes.Buffer
			cmd := exec.Command(binary, c.args...)
			cmd.Stdout, cmd.Stderr = &bout, &berr
			_ = cmd.Run()
			check("binary", cmd.ProcessState.ExitCode(), bout.String(), berr.String())
		})
	}
}
