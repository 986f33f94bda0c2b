package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReadinessCategories: a failing check is answered as its category;
// the error, with its path or host, goes to the log, once at warn while it
// stays failing, and its recovery at info.
func TestReadinessCategories(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"missing folder", fmt.Errorf("blob: folder /srv/darkroom/files is not writable: %w", &fs.PathError{Op: "open", Path: "/srv/darkroom/files/x", Err: fs.ErrNotExist}), "missing"},
		{"denied folder", fmt.Errorf("blob: folder /srv/darkroom/files is not writable: %w", &fs.PathError{Op: "open", Path: "/srv/darkroom/files/x", Err: fs.ErrPermission}), "not writable"},
		{"host down", fmt.Errorf("blob: bucket \"out\" at http://s3.internal:9000 is not reachable: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}), "unreachable"},
		{"timeout", fmt.Errorf("db postgres://app@db.internal/darkroom: %w", context.DeadlineExceeded), "timeout"},
		{"told", &NotReady{Category: "draining", Err: errors.New("draining: shutting down")}, "draining"},
		{"anything else", errors.New("db.internal said no"), "failing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logged bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo}))
			fail := true
			h := Readiness(log, time.Second, Check{Name: "x", Probe: func(context.Context) error {
				if fail {
					return c.err
				}
				return nil
			}}, Check{Name: "y", Probe: func(context.Context) error { return nil }})
			get := func() (int, string) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
				b, _ := io.ReadAll(rec.Body)
				return rec.Code, strings.TrimSpace(string(b))
			}
			want := `{"status":"unavailable","checks":{"x":"` + c.want + `","y":"ok"}}`
			for range 2 {
				if code, body := get(); code != http.StatusServiceUnavailable || body != want {
					t.Fatalf("readyz: %d %s, want 503 %s", code, body, want)
				}
			}
			if n := strings.Count(logged.String(), "level=WARN"); n != 1 || !strings.Contains(logged.String(), "err="+slogQuote(c.err.Error())) {
				t.Fatalf("log (want one warning with the error %q):\n%s", c.err, logged.String())
			}
			fail = false
			if code, _ := get(); code != http.StatusOK || !strings.Contains(logged.String(), "level=INFO msg=\"readiness check passes again\" check=x") {
				t.Fatalf("recovered: %d; log:\n%s", code, logged.String())
			}
		})
	}
}

// slogQuote is how the text handler writes a value that needs quoting.
func slogQuote(s string) string {
	if strings.ContainsAny(s, " \"=") {
		return strconv.Quote(s)
	}
	return s
}

// TestReadinessAdvisory: a failing advisory check is named but leaves the
// server ready.
func TestReadinessAdvisory(t *testing.T) {
	h := Readiness(nil, time.Second,
		Check{Name: "provider:google", Advisory: true, Probe: func(context.Context) error {
			return &NotReady{Category: "unreachable", Err: errors.New("down")}
		}},
		Check{Name: "store", Probe: func(context.Context) error { return nil }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	want := `{"status":"ready","checks":{"provider:google":"unreachable","store":"ok"}}`
	if body := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusOK || body != want {
		t.Fatalf("readyz: %d %s, want 200 %s", rec.Code, body, want)
	}
}
