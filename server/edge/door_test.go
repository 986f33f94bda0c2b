package edge

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// doorFixture serves the door (the Host check and Admit) in front of a
// handler that marks each request handed on.
type doorFixture struct {
	srv    *httptest.Server
	passed chan struct{}
}

func newDoorFixture(t *testing.T) *doorFixture {
	t.Helper()
	f := &doorFixture{passed: make(chan struct{}, 16)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !HostAllowed(r) {
			http.Error(w, "Forbidden: invalid Host header", http.StatusForbidden)
			return
		}
		if _, _, ok := Admit(w, r, 1<<20); !ok {
			return
		}
		f.passed <- struct{}{}
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func TestBodyTooLarge(t *testing.T) {
	f := newDoorFixture(t)
	big := strings.Repeat("x", 2<<20)
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"pad":"`+big+`"}}`))
	req.Header.Set("Mcp-Method", "tasks/get")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("HTTP %d, want 413", resp.StatusCode)
	}
}

// TestBodyRead: what the door reads of a body, whichever way its length
// is told: an exact small length, a length the client never finishes, a
// chunked body, a length above the small-read bound, and one over the
// cap. Only a whole body is parsed and handed on.
func TestBodyRead(t *testing.T) {
	f := newDoorFixture(t)
	addr := strings.TrimPrefix(f.srv.URL, "http://")
	msg := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	padded := func(n int) string { // msg padded with spaces to n bytes
		return msg + strings.Repeat(" ", n-len(msg))
	}
	cases := []struct {
		name    string
		headers string // after the request line
		body    string
		status  int
		passed  bool
	}{
		{"exact", fmt.Sprintf("Content-Length: %d\r\n", len(msg)), msg, http.StatusTeapot, true},
		{"short of its length", fmt.Sprintf("Content-Length: %d\r\n", len(msg)+40), msg, http.StatusBadRequest, false},
		{"chunked", "Transfer-Encoding: chunked\r\n", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(msg), msg), http.StatusTeapot, true},
		{"above the small read", fmt.Sprintf("Content-Length: %d\r\n", exactReadMax+1), padded(exactReadMax + 1), http.StatusTeapot, true},
		{"over the cap", fmt.Sprintf("Content-Length: %d\r\n", 1<<20+1), padded(1<<20 + 1), http.StatusRequestEntityTooLarge, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			req := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" + c.headers + "\r\n" + c.body
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			_ = conn.(*net.TCPConn).CloseWrite() // a short body ends here
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			passed := false
			select {
			case <-f.passed:
				passed = true
			default:
			}
			if resp.StatusCode != c.status || passed != c.passed {
				t.Fatalf("HTTP %d, handed on %v; want %d, %v", resp.StatusCode, passed, c.status, c.passed)
			}
		})
	}
}
