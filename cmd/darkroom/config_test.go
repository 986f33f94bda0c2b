package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/server/auth"
)

// clearSettingsEnv unsets (sets empty, which counts as unset) every
// variable a setting reads, so the developer's environment cannot leak in.
func clearSettingsEnv(t *testing.T) {
	for _, s := range serverSettings("serve") {
		for _, e := range s.env {
			t.Setenv(e, "")
		}
	}
	for _, s := range clientSettings() {
		for _, e := range s.env {
			t.Setenv(e, "")
		}
	}
}

// TestParseConfig: the default, then the environment, then a flag; the
// conventional provider variables; bool flags; errors name the source.
func TestParseConfig(t *testing.T) {
	cases := []struct {
		name    string
		cmd     string
		env     map[string]string
		args    []string
		check   func(*config) bool
		wantErr string // substring; "" = no error
	}{
		{name: "defaults", check: func(c *config) bool {
			return c.Addr == "127.0.0.1:8080" && c.DataDir == "./darkroom-data" && c.Retention == 168*time.Hour &&
				c.MaxBodyBytes == 16<<20 && c.S3.Region == "us-east-1" && c.FalConcurrency == 2 && c.ApprovalAbove == nil &&
				!c.UnsafeOutputFetch && !c.CreateBucket && !c.Webhooks && c.AuthServers == nil
		}},
		{name: "environment", env: map[string]string{"DARKROOM_RETENTION": "2h", "DARKROOM_DATA_DIR": "/d"},
			check: func(c *config) bool { return c.Retention == 2*time.Hour && c.DataDir == "/d" }},
		{name: "flag over environment", env: map[string]string{"DARKROOM_RETENTION": "2h"}, args: []string{"--retention", "3h", "-data=/f"},
			check: func(c *config) bool { return c.Retention == 3*time.Hour && c.DataDir == "/f" }},
		{name: "empty variable is unset", env: map[string]string{"DARKROOM_RETENTION": "", "DARKROOM_S3_REGION": ""},
			check: func(c *config) bool { return c.Retention == 168*time.Hour && c.S3.Region == "us-east-1" }},
		{name: "conventional credentials", env: map[string]string{"REPLICATE_API_TOKEN": "r8_a", "FAL_KEY": "fal_a"},
			check: func(c *config) bool { return c.ReplicateToken == "r8_a" && c.FalKey == "fal_a" }},
		{name: "DARKROOM_ name first", env: map[string]string{"REPLICATE_API_TOKEN": "r8_a", "DARKROOM_REPLICATE_API_TOKEN": "r8_b"},
			check: func(c *config) bool { return c.ReplicateToken == "r8_b" }},
		{name: "credential flag", env: map[string]string{"FAL_KEY": "fal_a"}, args: []string{"--fal-key", "fal_b"},
			check: func(c *config) bool { return c.FalKey == "fal_b" }},
		{name: "bool flags alone", args: []string{"--unsafe-output-fetch", "--create-bucket", "--s3-path-style"},
			check: func(c *config) bool { return c.UnsafeOutputFetch && c.CreateBucket && c.S3.PathStyle }},
		{name: "bool variables as before", env: map[string]string{"DARKROOM_UNSAFE_OUTPUT_FETCH": "1", "DARKROOM_S3_PATH_STYLE": "true"},
			check: func(c *config) bool { return c.UnsafeOutputFetch && c.S3.PathStyle }},
		{name: "bool flag turns a variable off", env: map[string]string{"DARKROOM_UNSAFE_OUTPUT_FETCH": "1"}, args: []string{"--unsafe-output-fetch=false"},
			check: func(c *config) bool { return !c.UnsafeOutputFetch }},
		{name: "lists", env: map[string]string{"DARKROOM_OUTPUT_HOSTS": " cdn.example.com:443, ,b.example ", "DARKROOM_ALLOWED_ORIGINS": "https://a.example/,https://b.example"},
			check: func(c *config) bool {
				return slices.Equal(c.OutputHosts, []string{"cdn.example.com", "b.example"}) &&
					slices.Equal(c.AllowedOrigins, []string{"https://a.example", "https://b.example"})
			}},
		{name: "trusted proxies", env: map[string]string{"DARKROOM_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7 2001:db8::/32"},
			check: func(c *config) bool {
				return fmt.Sprint(c.TrustedProxies) == "[10.0.0.0/8 192.0.2.7/32 2001:db8::/32]"
			}},
		{name: "no trusted proxies by default", check: func(c *config) bool { return c.TrustedProxies == nil }},
		{name: "public URL turns webhooks on", args: []string{"--public-url", "https://dr.example/"},
			check: func(c *config) bool { return c.PublicURL == "https://dr.example" && c.Webhooks }},
		{name: "credits", env: map[string]string{"DARKROOM_APPROVAL_ABOVE_CREDITS": "0", "DARKROOM_DAILY_BUDGET": "500"},
			check: func(c *config) bool { return *c.ApprovalAbove == 0 && *c.DailyBudget == 500 }},
		{name: "authorization servers default to the issuer", args: []string{"--oauth-issuer", "https://as.example"},
			check: func(c *config) bool { return slices.Equal(c.AuthServers, []string{"https://as.example"}) }},
		{name: "authorization servers", env: map[string]string{"DARKROOM_OAUTH_ISSUER": "https://as.example", "DARKROOM_OAUTH_AUTHORIZATION_SERVERS": "https://a, https://b"},
			check: func(c *config) bool { return slices.Equal(c.AuthServers, []string{"https://a", "https://b"}) }},
		{name: "stdio: the fixed files port", cmd: "stdio", check: func(c *config) bool { return c.Addr == stdioFilesAddr }},
		{name: "stdio: the variable's port", cmd: "stdio", env: map[string]string{"DARKROOM_ADDR": "127.0.0.1:9000"},
			check: func(c *config) bool { return c.Addr == "127.0.0.1:9000" }},
		{name: "stdio: the flag's port", cmd: "stdio", args: []string{"--addr", "127.0.0.1:9001"},
			check: func(c *config) bool { return c.Addr == "127.0.0.1:9001" }},
		{name: "bad variable", env: map[string]string{"DARKROOM_RETENTION": "1s"}, wantErr: `DARKROOM_RETENTION: "1s" is not a duration`},
		{name: "bad flag", env: map[string]string{"DARKROOM_RETENTION": "1s"}, args: []string{"--retention", "2s"}, wantErr: `--retention: "2s" is not a duration`},
		{name: "history shorter than retention", env: map[string]string{"DARKROOM_RETENTION": "800h"}, wantErr: "DARKROOM_HISTORY (720h0m0s) must be at least DARKROOM_RETENTION"},
		{name: "history shorter than the task TTL", args: []string{"--history", "60h", "--retention", "1h", "--task-ttl", "72h"}, wantErr: "DARKROOM_TASK_TTL (72h0m0s)"},
		{name: "history too short", env: map[string]string{"DARKROOM_HISTORY": "47h"}, wantErr: `DARKROOM_HISTORY: "47h" is not a duration of at least 48h`},
		{name: "bad conventional variable", env: map[string]string{"DARKROOM_FAL_MAX_CONCURRENT": "0"}, wantErr: "DARKROOM_FAL_MAX_CONCURRENT:"},
		{name: "bad trusted proxy", env: map[string]string{"DARKROOM_TRUSTED_PROXIES": "10.0.0.0/8,proxy.internal"}, wantErr: `DARKROOM_TRUSTED_PROXIES: trusted proxy "proxy.internal"`},
		{name: "bad bool", env: map[string]string{"DARKROOM_S3_PATH_STYLE": "yes"}, wantErr: "DARKROOM_S3_PATH_STYLE"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "not defined"},
		{name: "stray argument", args: []string{"serve"}, wantErr: "unexpected argument"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearSettingsEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cmd := c.cmd
			if cmd == "" {
				cmd = "serve"
			}
			cfg, err := parseConfig(cmd, c.args)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(cfg) {
				t.Fatalf("unexpected config %+v", *cfg)
			}
		})
	}
}

// TestParseConfigErrors: every invalid setting is reported at once, and a
// command line that does not parse is a usage error.
func TestParseConfigErrors(t *testing.T) {
	clearSettingsEnv(t)
	t.Setenv("DARKROOM_POLL_RATE", "x")
	t.Setenv("DARKROOM_LOG_LEVEL", "loud")
	_, err := parseConfig("serve", nil)
	if err == nil || !strings.Contains(err.Error(), "DARKROOM_POLL_RATE") || !strings.Contains(err.Error(), "DARKROOM_LOG_LEVEL") {
		t.Fatalf("error %v, want both settings named", err)
	}
	if errors.As(err, new(usageError)) {
		t.Fatal("a bad value is not a usage error")
	}
	for _, args := range [][]string{{"--nope"}, {"stray"}} {
		if _, err := parseConfig("serve", args); !errors.As(err, new(usageError)) {
			t.Errorf("%q: %v is not a usage error", args, err)
		}
	}
	if _, err := parseConfig("serve", []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

// TestAuthSettings: each variable auth.ConfigFromEnv reads is a setting,
// and authEnv hands it the flag's value.
func TestAuthSettings(t *testing.T) {
	names := []string{auth.EnvAPIKeysFile, auth.EnvAPIKeys, auth.EnvOAuthJWKSURL, auth.EnvOAuthJWKSFile, auth.EnvOAuthIssuer,
		auth.EnvOAuthAudience, auth.EnvOAuthScopes, auth.EnvOAuthClockSkew, auth.EnvOAuthAlgorithms}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			clearSettingsEnv(t)
			i := slices.IndexFunc(serverSettings("serve"), func(s setting[config]) bool { return slices.Contains(s.env, name) })
			if i < 0 {
				t.Fatalf("no setting reads %s", name)
			}
			s := serverSettings("serve")[i]
			cfg, err := parseConfig("serve", []string{"--" + s.flag + "=v-" + s.flag})
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.authEnv(name); got != "v-"+s.flag {
				t.Fatalf("authEnv(%s) = %q, want the flag's value", name, got)
			}
		})
	}
	clearSettingsEnv(t)
	t.Setenv("DARKROOM_API_KEYS", "ann=0123456789abcdef0123456789abcdef")
	cfg, err := parseConfig("serve", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.ConfigFromEnv(cfg.authEnv, "http://127.0.0.1/mcp")
	if err != nil || len(a.Keys) != 1 || a.OAuth.Enabled() {
		t.Fatalf("ConfigFromEnv through authEnv: %+v %v", a, err)
	}
}

// TestSettingNames: flags are unique, and each has a DARKROOM_* variable
// first.
func TestSettingNames(t *testing.T) {
	cases := []struct {
		name string
		rows []settingRow
	}{
		{"serve", rowsOf(serverSettings("serve"))},
		{"client", rowsOf(clientSettings())},
		{"healthcheck", rowsOf(healthcheckSettings())},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen := map[string]bool{}
			for _, r := range c.rows {
				if seen[r.flag] {
					t.Errorf("flag %s twice", r.flag)
				}
				seen[r.flag] = true
				if !strings.HasPrefix(r.env, "`DARKROOM_") {
					t.Errorf("%s: first variable %s is not DARKROOM_*", r.flag, r.env)
				}
			}
		})
	}
}
