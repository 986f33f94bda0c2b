package ratelimited

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Code is darkroom's JSON-RPC error code for "rate limit exceeded".
//
// It lies outside every range the MCP 2026-07-28 revision reserves:
// -32700 and -32600..-32603 (JSON-RPC standard), -32000..-32019 (legacy
// implementation-defined) and -32020..-32099 (spec-only). The digits echo HTTP
// 429. The error's data carries {"retryAfterMs": N}.
const Code = -31429

// ErrorData is the data member of a rate-limit error.
type ErrorData struct {
	RetryAfterMs int64 `json:"retryAfterMs"`
}

// Message returns "rate limit exceeded: retry after 1.2s", with d rounded up
// to a tenth of a second.
func Message(d time.Duration) string {
	tenths := max(ceilDiv(d, 100*time.Millisecond), 1)
	return "rate limit exceeded: retry after " + strconv.FormatFloat(float64(tenths)/10, 'f', -1, 64) + "s"
}

// RetryAfterMs is d rounded up to the millisecond, at least 1.
func RetryAfterMs(d time.Duration) int64 {
	return max(ceilDiv(d, time.Millisecond), 1)
}

// RetryAfterHeader is the HTTP Retry-After value for d: whole seconds,
// rounded up, at least 1.
func RetryAfterHeader(d time.Duration) string {
	s := max(ceilDiv(d, time.Second), 1)
	return strconv.FormatInt(s, 10)
}

// ceilDiv is ceil(d/unit) for d >= 0 without overflow; negative d gives 0.
func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	q := int64(d / unit)
	if d%unit != 0 {
		q++
	}
	return q
}

// RPCError returns the rate-limit error as go-sdk's JSON-RPC wire error, so
// an MCP method handler or middleware can return it and the SDK sends
// {"code": -31429, "message": "...", "data": {"retryAfterMs": N}}.
func RPCError(d time.Duration) *jsonrpc.Error {
	data, _ := json.Marshal(ErrorData{RetryAfterMs: RetryAfterMs(d)})
	return &jsonrpc.Error{Code: Code, Message: Message(d), Data: data}
}

// WriteHTTP answers an over-limit HTTP request: status 429, Retry-After, and
// a JSON-RPC error response for request id (raw JSON, e.g. `7` or `"abc"`;
// empty or invalid means null, e.g. before the body was read).
func WriteHTTP(w http.ResponseWriter, id json.RawMessage, d time.Duration) {
	if len(id) == 0 || !json.Valid(id) {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, RPCError(d)})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Retry-After", RetryAfterHeader(d))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(append(body, '\n'))
}
