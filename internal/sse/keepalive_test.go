package sse

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestKeepAlive runs handlers shaped as go-sdk's servePOST (headers set,
// nothing written until the answer) behind KeepAlive, and reads what the
// client gets. A held SSE answer gets comments before its event; a JSON
// answer, an unheld one and one released at once get none; a late error
// status is framed as an event.
func TestKeepAlive(t *testing.T) {
	const every = 5 * time.Millisecond
	cases := []struct {
		name        string
		contentType string
		hold        bool
		answer      func(w http.ResponseWriter)
		wantComment bool
		wantBody    string // suffix, after any comments
		wantStatus  int
	}{
		{name: "held SSE", contentType: "text/event-stream", hold: true, wantComment: true,
			answer:   func(w http.ResponseWriter) { _, _ = io.WriteString(w, "event: message\ndata: {}\n\n") },
			wantBody: "event: message\ndata: {}\n\n", wantStatus: 200},
		{name: "held JSON", contentType: "application/json", hold: true,
			answer:   func(w http.ResponseWriter) { _, _ = io.WriteString(w, "{}") },
			wantBody: "{}", wantStatus: 200},
		{name: "not held", contentType: "text/event-stream",
			answer:   func(w http.ResponseWriter) { _, _ = io.WriteString(w, "event: message\ndata: {}\n\n") },
			wantBody: "event: message\ndata: {}\n\n", wantStatus: 200},
		{name: "late error status", contentType: "text/event-stream", hold: true, wantComment: true,
			answer: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{}}`)
			},
			wantBody: "event: message\ndata: {\"error\":{}}\n\n", wantStatus: 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen := make(chan struct{}) // the client read a comment
			h := KeepAlive(every, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.contentType)
				release := Hold(r.Context())
				if !c.hold {
					release()
				}
				if c.wantComment {
					<-seen
				} else {
					// Long enough for several ticks, had any been due.
					time.Sleep(4 * every)
				}
				release()
				c.answer(w)
			}))
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != c.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.wantStatus)
			}
			br := bufio.NewReader(resp.Body)
			var rest strings.Builder
			if c.wantComment {
				line, err := br.ReadString('\n')
				if err != nil || line != ":\r\n" {
					t.Fatalf("first line %q, %v; want a comment", line, err)
				}
				close(seen)
			}
			b, _ := io.ReadAll(br)
			rest.Write(b)
			body := strings.TrimLeft(strings.ReplaceAll(rest.String(), ":\r\n\r\n", ""), "\r\n")
			if body != c.wantBody {
				t.Fatalf("body %q, want %q", rest.String(), c.wantBody)
			}
			if !c.wantComment && strings.Contains(rest.String(), ":\r\n") {
				t.Fatalf("a comment in %q", rest.String())
			}
		})
	}
}

// TestHoldWithoutKeepAlive: Hold on a context KeepAlive did not make
// (stdio, the lean path) does nothing.
func TestHoldWithoutKeepAlive(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	Hold(r.Context())()
	var inner http.Handler = http.NewServeMux()
	if KeepAlive(0, inner) != inner {
		t.Fatal("interval 0 wraps")
	}
}
