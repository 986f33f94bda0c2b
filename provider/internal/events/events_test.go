package events

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

func TestEach(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"two events", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"data lines joined", "data: a\ndata:b\n\n", []string{"a\nb"}},
		{"comments and other fields skipped", ": keep-alive\n\nevent: x\nid: 1\ndata: a\n\n", []string{"a"}},
		{"an event not ended by a blank line is not read", "data: a\n\ndata: b", []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			lines := 0
			stopped, err := Each(strings.NewReader(tc.in), func() { lines++ }, func(d []byte) (bool, error) {
				got = append(got, string(d))
				return false, nil
			})
			if stopped || err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") || lines != strings.Count(tc.in, "\n")+boolInt(!strings.HasSuffix(tc.in, "\n")) {
				t.Fatalf("got %q (stopped %v, %v, %d lines)", got, stopped, err, lines)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestHold: a stream that stops sending is cut as stalled; one that ends
// first says so; fn's stop ends it with fn's error.
func TestHold(t *testing.T) {
	quiet := func(ctx context.Context) (io.ReadCloser, error) {
		r, w := io.Pipe()
		go func() { <-ctx.Done(); w.CloseWithError(ctx.Err()) }()
		return r, nil
	}
	ended := func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader("data: a\n\n")), nil
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		open func(context.Context) (io.ReadCloser, error)
		fn   func(context.Context, []byte) (bool, error)
		want error
	}{
		{"stalled", quiet, func(context.Context, []byte) (bool, error) { return false, nil }, provider.ErrStreamStalled},
		{"ended", ended, func(context.Context, []byte) (bool, error) { return false, nil }, provider.ErrStreamEnded},
		{"stopped", ended, func(context.Context, []byte) (bool, error) { return true, boom }, boom},
		{"done", ended, func(context.Context, []byte) (bool, error) { return true, nil }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Hold(context.Background(), "x", 50*time.Millisecond, time.Minute, tc.open, tc.fn)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Hold: %v, want %v", err, tc.want)
			}
		})
	}
}
