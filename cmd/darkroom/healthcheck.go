package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const healthcheckUsage = `Usage: darkroom healthcheck [flags]

Probes a darkroom serving on this host: GET /healthz (liveness), or
/readyz with --ready. Exits 0 when it answers 200, 1 otherwise. It is the
Docker image's HEALTHCHECK (distroless has no curl).

`

type healthcheckConfig struct {
	Addr    string
	Ready   bool
	Timeout time.Duration
}

func healthcheckSettings() []setting[healthcheckConfig] {
	return []setting[healthcheckConfig]{
		{flag: "addr", env: envs("DARKROOM_ADDR"), def: "127.0.0.1:8080",
			help: "the address darkroom serve listens on (an unspecified host such as 0.0.0.0 is probed on loopback)",
			set:  func(c *healthcheckConfig, v string) error { c.Addr = v; return nil }},
		{flag: "ready", env: envs("DARKROOM_HEALTHCHECK_READY"), def: "false", isBool: true,
			help: "probe /readyz (store, blob storage and runner) instead of /healthz",
			set:  func(c *healthcheckConfig, v string) (err error) { c.Ready, err = strconv.ParseBool(v); return err }},
		{flag: "timeout", env: envs("DARKROOM_HEALTHCHECK_TIMEOUT"), def: "5s",
			help: "how long to wait for the answer",
			set: func(c *healthcheckConfig, v string) (err error) {
				c.Timeout, err = duration(v, time.Millisecond, time.Minute)
				return err
			}},
	}
}

// runHealthcheck is `darkroom healthcheck`.
func runHealthcheck(ctx context.Context, args []string, out io.Writer) error {
	var cfg healthcheckConfig
	if _, err := parseSettings("healthcheck", healthcheckSettings(), args, false, &cfg); err != nil {
		return err
	}
	u, err := probeURL(cfg.Addr, cfg.Ready)
	if err != nil {
		return usageError{err}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	_, err = fmt.Fprintf(out, "%s: %s", u, body)
	return err
}

// probeURL is the probe's URL for a listen address.
func probeURL(addr string, ready bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--addr %q: %w", addr, err)
	}
	if port == "0" {
		return "", errors.New("--addr names port 0: give the port darkroom serve listens on")
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	path := "/healthz"
	if ready {
		path = "/readyz"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
