package server

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestStalledHandshakeReleased: a stranger who names the handshake and
// then sends no body holds its connection for handshakeReadTimeout, not
// for the request read timeout a keyed caller's body gets.
func TestStalledHandshakeReleased(t *testing.T) {
	handshakeReadTimeout = 200 * time.Millisecond
	t.Cleanup(func() { handshakeReadTimeout = DefaultReadHeaderTimeout })
	tools, _ := realTools(t)
	cfg := Config{Version: "test", Tools: tools, Auth: aliceKeyOnly(t), ResourceURL: "https://darkroom.example/mcp", Logger: discard}
	srv := HTTPServer(Handler(cfg, New(cfg)), Timeouts{ReadHeader: time.Minute, Read: time.Minute, Idle: time.Minute})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("POST /mcp HTTP/1.1\r\nHost: " + ln.Addr().String() + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
		"Mcp-Method: initialize\r\nContent-Length: 300\r\n\r\n{\"jsonrpc\":")); err != nil {
		t.Fatal(err)
	}
	// The guard: a minute, the keyed body's read timeout, is what the
	// stall would cost without the handshake's own deadline.
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled handshake: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Errorf("a stalled handshake answered %d", resp.StatusCode)
	}
}
