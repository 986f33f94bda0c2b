package server

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

type failingListener struct {
	net.Listener
	err error
}

func (l failingListener) Accept() (net.Conn, error) { return nil, l.err }

// TestAcceptErrors: a failed accept is counted and said in one clear line
// (out of descriptors named as such), then handed on for net/http to
// retry; a closed listener is neither.
func TestAcceptErrors(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	cases := []struct {
		name    string
		err     error
		counted int
		logged  string
	}{
		{"out of descriptors", emfile, 3, "out of file descriptors"},
		{"other", errors.New("accept: boom"), 3, "accept failed"},
		{"closed", net.ErrClosed, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			n := 0
			ln := AcceptErrors(failingListener{err: c.err}, slog.New(slog.NewTextHandler(&buf, nil)), func() { n++ })
			for range 3 {
				if _, err := ln.Accept(); !errors.Is(err, c.err) {
					t.Fatalf("error %v, want %v handed on", err, c.err)
				}
			}
			if n != c.counted {
				t.Fatalf("counted %d, want %d", n, c.counted)
			}
			lines := strings.Count(buf.String(), "\n")
			switch {
			case c.logged == "" && lines != 0:
				t.Fatalf("logged %q", buf.String())
			case c.logged != "" && (lines != 1 || !strings.Contains(buf.String(), c.logged)):
				t.Fatalf("log %q, want one line with %q", buf.String(), c.logged)
			}
		})
	}
}
