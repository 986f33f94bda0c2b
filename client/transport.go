package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	// maxMessage caps one JSON-RPC message read from the server.
	maxMessage = 64 << 20
	// maxRateLimitRetries bounds consecutive 429 answers to one request.
	maxRateLimitRetries = 10
)

// message is any JSON-RPC message the server sends.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
}

func (m *message) isResponse() bool { return m.Method == "" && (m.Result != nil || m.Error != nil) }

type request struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      int64          `json:"id"`
	Method  string         `json:"method"`
	Params  map[string]any `json:"params"`
}

// headerValue encodes a header value per SEP-2243: non-ASCII or
// whitespace-edged values travel as =?base64?...?=.
func headerValue(v string) string {
	plain := v == strings.TrimSpace(v)
	for i := 0; plain && i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			plain = false
		}
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

// idMatches reports whether a raw JSON-RPC id is the integer id.
func idMatches(raw json.RawMessage, id int64) bool {
	return strings.TrimSpace(string(raw)) == strconv.FormatInt(id, 10)
}

func isNullID(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// post sends one JSON-RPC request, waiting out 429 answers as their
// Retry-After says and re-sending with a new id. It returns the first other
// response, unread, and the id of the attempt that got it. name is the
// Mcp-Name header value ("" for none).
func (c *Client) post(ctx context.Context, method, name string, params map[string]any) (*http.Response, int64, error) {
	p := make(map[string]any, len(params)+1)
	for k, v := range params {
		p[k] = v
	}
	p["_meta"] = c.meta
	for attempt := 0; ; attempt++ {
		id := c.nextID.Add(1)
		body, err := json.Marshal(request{JSONRPC: "2.0", ID: id, Method: method, Params: p})
		if err != nil {
			return nil, 0, fmt.Errorf("client: encode %s: %w", method, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
		if err != nil {
			return nil, 0, err
		}
		h := req.Header
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "application/json, text/event-stream")
		h.Set("MCP-Protocol-Version", ProtocolVersion)
		h.Set("Mcp-Method", method)
		if name != "" {
			h.Set("Mcp-Name", headerValue(name))
		}
		if c.opts.Token != "" {
			h.Set("Authorization", "Bearer "+c.opts.Token)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			return nil, 0, fmt.Errorf("client: %s: %w", method, err)
		}
		if resp.StatusCode != http.StatusTooManyRequests {
			return resp, id, nil
		}
		wait := retryAfter(resp)
		_ = resp.Body.Close()
		if attempt >= maxRateLimitRetries {
			return nil, 0, fmt.Errorf("client: %s: still rate limited after %d retries: %w", method, attempt, &HTTPError{StatusCode: resp.StatusCode})
		}
		c.log.Warn("client: rate limited; retrying", "method", method, "name", name, "after", wait)
		if err := sleepCtx(ctx, wait); err != nil {
			return nil, 0, err
		}
	}
}

// retryAfter reads how long a 429 asks to wait: the Retry-After header
// (seconds or an HTTP date), else the body's data.retryAfterMs (darkroom),
// else one second.
func retryAfter(resp *http.Response) time.Duration {
	if v := strings.TrimSpace(resp.Header.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(time.Until(t), 0)
		}
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var m struct {
		Error struct {
			Data struct {
				RetryAfterMs int64 `json:"retryAfterMs"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &m) == nil && m.Error.Data.RetryAfterMs > 0 {
		return time.Duration(m.Error.Data.RetryAfterMs) * time.Millisecond
	}
	return time.Second
}

// sleepCtx waits d on a timer, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// call sends one request and returns its result object; a JSON-RPC error
// comes back as *RPCError.
func (c *Client) call(ctx context.Context, method, name string, params map[string]any) (json.RawMessage, error) {
	resp, id, err := c.post(ctx, method, name, params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m, err := c.readResponse(resp, id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("client: %s: %w", method, err)
	}
	if m.Error != nil {
		return nil, m.Error
	}
	return m.Result, nil
}

func mediaType(resp *http.Response) string {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return strings.ToLower(mt)
}

func httpError(resp *http.Response) *HTTPError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return &HTTPError{StatusCode: resp.StatusCode, WWWAuthenticate: resp.Header.Get("WWW-Authenticate"), Body: strings.TrimSpace(string(b))}
}

// readResponse reads the response to request id: a single JSON object, or
// an SSE stream whose notifications are logged and skipped until the
// response arrives.
func (c *Client) readResponse(resp *http.Response, id int64) (*message, error) {
	switch mediaType(resp) {
	case "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxMessage {
			return nil, protocolErr("response larger than %d bytes", maxMessage)
		}
		var m message
		if err := json.Unmarshal(b, &m); err != nil || !m.isResponse() {
			if resp.StatusCode >= 300 {
				return nil, &HTTPError{StatusCode: resp.StatusCode, WWWAuthenticate: resp.Header.Get("WWW-Authenticate"), Body: strings.TrimSpace(string(b))}
			}
			return nil, protocolErr("HTTP %d body is not a JSON-RPC response: %.200s", resp.StatusCode, b)
		}
		if !idMatches(m.ID, id) && !(m.Error != nil && isNullID(m.ID)) {
			return nil, protocolErr("response id %s does not match request id %d", m.ID, id)
		}
		return &m, nil
	case "text/event-stream":
		if resp.StatusCode != http.StatusOK {
			return nil, httpError(resp)
		}
		sr := newSSEReader(resp.Body)
		for {
			data, err := sr.next()
			if errors.Is(err, io.EOF) {
				return nil, ErrStreamEnded
			}
			if err != nil {
				return nil, err
			}
			var m message
			if err := json.Unmarshal(data, &m); err != nil {
				return nil, protocolErr("SSE event is not JSON-RPC: %.200s", data)
			}
			switch {
			case m.isResponse() && (idMatches(m.ID, id) || (m.Error != nil && isNullID(m.ID))):
				return &m, nil
			case m.isResponse():
				c.log.Warn("client: response for another request on the stream", "id", string(m.ID), "want", id)
			case len(m.ID) > 0:
				// Servers never send requests on 2026-07-28 (§1.1).
				c.log.Warn("client: ignoring a server request", "method", m.Method)
			default:
				c.log.Debug("client: notification", "method", m.Method, "params", string(m.Params))
			}
		}
	default:
		if resp.StatusCode == http.StatusAccepted {
			return nil, protocolErr("request answered 202 without a response")
		}
		if resp.StatusCode >= 300 {
			return nil, httpError(resp)
		}
		return nil, protocolErr("unexpected Content-Type %q", resp.Header.Get("Content-Type"))
	}
}

// sseReader splits a text/event-stream into the data of its events.
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the data of the next event (several data lines joined with
// "\n"), skipping comments, other fields and data-less events. It returns
// io.EOF at the end of the stream; an unterminated last event is dropped,
// as the SSE spec says.
func (s *sseReader) next() ([]byte, error) {
	var data []byte
	has := false
	for {
		line, err := s.r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if has {
				return data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // comment (keep-alive)
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(field) != "data" {
			continue // event, id, retry: not used on this wire
		}
		if has {
			data = append(data, '\n')
		}
		data = append(data, value...)
		has = true
		if len(data) > maxMessage {
			return nil, protocolErr("SSE event larger than %d bytes", maxMessage)
		}
	}
}

// resultType returns a result's resultType ("complete" when absent, as
// from a pre-2026 server).
func resultType(res json.RawMessage) (string, error) {
	var r struct {
		ResultType *string `json:"resultType"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", protocolErr("result is not an object: %.200s", res)
	}
	if r.ResultType == nil {
		return "complete", nil
	}
	return *r.ResultType, nil
}

// expectComplete checks that a non-tools/call result is "complete": any
// other value (including "task") is invalid there.
func expectComplete(res json.RawMessage, method string) error {
	rt, err := resultType(res)
	if err != nil {
		return err
	}
	if rt != "complete" {
		return protocolErr("%s answered resultType %q", method, rt)
	}
	return nil
}
