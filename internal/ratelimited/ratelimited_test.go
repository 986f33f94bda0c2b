package ratelimited

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestErrorFormatting(t *testing.T) {
	tests := []struct {
		d      time.Duration
		msg    string
		ms     int64
		header string
	}{
		{1200 * time.Millisecond, "rate limit exceeded: retry after 1.2s", 1200, "2"},
		{1201 * time.Millisecond, "rate limit exceeded: retry after 1.3s", 1201, "2"},
		{200 * time.Millisecond, "rate limit exceeded: retry after 0.2s", 200, "1"},
		{time.Second, "rate limit exceeded: retry after 1s", 1000, "1"},
		{1500 * time.Microsecond, "rate limit exceeded: retry after 0.1s", 2, "1"},
		{time.Nanosecond, "rate limit exceeded: retry after 0.1s", 1, "1"},
		{0, "rate limit exceeded: retry after 0.1s", 1, "1"},
		{3 * time.Second, "rate limit exceeded: retry after 3s", 3000, "3"},
		{time.Hour, "rate limit exceeded: retry after 3600s", 3600000, "3600"},
	}
	for _, tt := range tests {
		if got := Message(tt.d); got != tt.msg {
			t.Errorf("Message(%v) = %q, want %q", tt.d, got, tt.msg)
		}
		if got := RetryAfterMs(tt.d); got != tt.ms {
			t.Errorf("RetryAfterMs(%v) = %d, want %d", tt.d, got, tt.ms)
		}
		if got := RetryAfterHeader(tt.d); got != tt.header {
			t.Errorf("RetryAfterHeader(%v) = %q, want %q", tt.d, got, tt.header)
		}
	}
}

func TestRPCErrorShape(t *testing.T) {
	e := RPCError(1200 * time.Millisecond)
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":-31429,"message":"rate limit exceeded: retry after 1.2s","data":{"retryAfterMs":1200}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	// Outside every reserved range.
	if c := Code; c >= -32768 && c <= -32000 {
		t.Errorf("code %d is in the reserved JSON-RPC range", c)
	}
}

func TestWriteHTTP(t *testing.T) {
	tests := []struct {
		id   json.RawMessage
		want string
	}{
		{json.RawMessage(`7`), `{"jsonrpc":"2.0","id":7,"error":{"code":-31429,"message":"rate limit exceeded: retry after 1.2s","data":{"retryAfterMs":1200}}}`},
		{json.RawMessage(`"req-1"`), `{"jsonrpc":"2.0","id":"req-1","error":{"code":-31429,"message":"rate limit exceeded: retry after 1.2s","data":{"retryAfterMs":1200}}}`},
		{nil, `{"jsonrpc":"2.0","id":null,"error":{"code":-31429,"message":"rate limit exceeded: retry after 1.2s","data":{"retryAfterMs":1200}}}`},
		{json.RawMessage(`{bad`), `{"jsonrpc":"2.0","id":null,"error":{"code":-31429,"message":"rate limit exceeded: retry after 1.2s","data":{"retryAfterMs":1200}}}`},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		WriteHTTP(rec, tt.id, 1200*time.Millisecond)
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "2" || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("id %s: status %d, headers %v", tt.id, rec.Code, rec.Header())
		}
		if got := rec.Body.String(); got != tt.want+"\n" {
			t.Errorf("id %s: body\n got %s\nwant %s", tt.id, got, tt.want)
		}
	}
}
