package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	segjson "github.com/segmentio/encoding/json"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/internal/methods"
	"github.com/darkroom-mcp/darkroom/internal/netx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Envelope is the routing view of one JSON-RPC POST body, parsed once by
// Admit from the whole body and shared by every layer after it: what a
// layer decides (rate class, header checks, which path serves it) is
// decided on what will be executed, never on what the headers claim.
type Envelope struct {
	Message
	// Batch holds the elements of a JSON-RPC batch body (accepted by
	// go-sdk on eras before 2025-06-18); Message is then empty.
	Batch []Message
	// IsBatch is set for a body that is a JSON array.
	IsBatch bool
	// Body is the whole body as read.
	Body []byte
	// Recorder, when set (the Observer's), is told the request's outcome
	// by whoever answers it (Outcome).
	Recorder Outcome
	// admitted is set once Admit accepted the request.
	admitted bool
}

// Message is one JSON-RPC message of a body.
type Message struct {
	// Method is the message's method ("" for a response), and Row its
	// row in the one registry of methods (methods.Unlisted for a method
	// it does not list).
	Method string
	Row    *methods.Method
	// Name is params.name (tools/call, prompts/get), params.uri
	// (resources/read) or params.taskId (tasks/*), as go-sdk and the
	// dispatcher read them: case-sensitive keys, the last duplicate wins.
	Name string
	// ID is the raw id; Call reports a request (an id that is not null).
	ID   json.RawMessage
	Call bool
	// Version is params._meta's protocolVersion ("" when absent or not a
	// string); HasCaps reports a clientCapabilities object beside it.
	Version string
	HasCaps bool
	// Req is the message as the dispatcher needs it.
	Req *Request
	// jsonrpc and params are the raw fields the lean tool paths read.
	jsonrpc string
	params  *RawParams
}

// Params is the message's params as the one parse left them, raw (nil
// when they were not an object), and JSONRPC its jsonrpc member: what the
// lean engine checks before it takes a call.
func (m *Message) Params() *RawParams { return m.params }

// JSONRPC is the message's jsonrpc member as sent.
func (m *Message) JSONRPC() string { return m.jsonrpc }

type envelopeKey struct{}

// EnvelopeFrom returns the envelope Admit stored in ctx.
func EnvelopeFrom(ctx context.Context) (*Envelope, bool) {
	e, ok := ctx.Value(envelopeKey{}).(*Envelope)
	return e, ok
}

// The codes of a body that is not one JSON-RPC message (or batch):
// not JSON, or data after the value; JSON, but not a JSON-RPC message.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
)

func bodyError(code int64, msg string) *RPCError {
	return &RPCError{Code: code, Message: msg, HTTPStatus: http.StatusBadRequest}
}

// strictFlags decode as go-sdk does (segmentio/encoding with
// case-sensitive field names), so that this layer and go-sdk never read
// different methods or names out of one body.
const strictFlags = segjson.DontMatchCaseInsensitiveStructFields

// unmarshalStrict decodes exactly one JSON value from b into v, with
// go-sdk's field matching; anything but whitespace after the value is an
// error (go-sdk's own decoder would silently drop it). What it decodes may
// alias b: a request's body (or stdio message) is read once, kept whole
// and never modified.
func unmarshalStrict(b []byte, v any) error {
	rest, err := segjson.Parse(b, v, strictFlags|segjson.ZeroCopy)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("invalid character %q after top-level value", rest[0])
	}
	return nil
}

// wireMessage is one message as go-sdk's jsonrpc decoder reads it.
type wireMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// RawParams are the params fields any layer reads, raw so that a value
// of an unexpected type never hides the others.
type RawParams struct {
	Name           json.RawMessage `json:"name"`
	URI            json.RawMessage `json:"uri"`
	TaskID         json.RawMessage `json:"taskId"`
	Meta           json.RawMessage `json:"_meta"`
	Arguments      json.RawMessage `json:"arguments"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
	Notifications  json.RawMessage `json:"notifications"`
}

type wireMeta struct {
	ProtocolVersion    json.RawMessage `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
}

// RawString decodes a JSON string as go-sdk would, into a copy that
// holds no part of raw; plain printable ASCII, the usual case, is sliced
// out without a decoder.
func RawString(raw json.RawMessage) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		plain := true
		for _, c := range raw[1 : len(raw)-1] {
			if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
				plain = false
				break
			}
		}
		if plain {
			return string(raw[1 : len(raw)-1]), true
		}
	}
	var s string
	if len(raw) == 0 || unmarshalStrict(raw, &s) != nil {
		return "", false
	}
	return strings.Clone(s), true
}

// ParseBody parses a POST body: exactly one JSON value, a message or a
// batch of them, decoded as go-sdk decodes it (segmentio/encoding), one
// level at a time so that a value of an unexpected type never hides the
// others. Its error is an *RPCError (-32700 or -32600, HTTP 400).
func ParseBody(b []byte) (*Envelope, error) {
	edgecount.Parses.Add(1)
	if tooDeep(b) {
		return nil, bodyError(CodeParseError, fmt.Sprintf("Parse error: the body nests deeper than %d levels", sdkMaxDepth))
	}
	e := &Envelope{Body: b}
	if t := bytes.TrimLeft(b, " \t\n\r"); len(t) > 0 && t[0] == '[' {
		var raw []json.RawMessage
		if err := unmarshalStrict(b, &raw); err != nil {
			return nil, parseError(b, err)
		}
		e.IsBatch = true
		for _, r := range raw {
			m, err := parseMessage(r)
			if err != nil {
				return nil, err
			}
			e.Batch = append(e.Batch, *m)
		}
		return e, nil
	}
	m, err := parseMessage(b)
	if err != nil {
		return nil, err
	}
	e.Message = *m
	return e, nil
}

// sdkMaxDepth is go-sdk's limit on JSON nesting (internal/json
// defaultMaxDepth): deeper bodies it refuses whole, so every path here
// refuses them too, before any of them is executed.
const sdkMaxDepth = 1000

// tooDeep reports a body nested deeper than sdkMaxDepth, counted as go-sdk
// counts (brackets outside strings, a stray closer never below zero). A
// body with at most sdkMaxDepth openers cannot be, and is not scanned.
func tooDeep(b []byte) bool {
	if bytes.Count(b, []byte{'{'})+bytes.Count(b, []byte{'['}) <= sdkMaxDepth {
		return false
	}
	depth := 0
	for _, c := range outsideStrings(b) {
		switch c {
		case '{', '[':
			if depth++; depth > sdkMaxDepth {
				return true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}

// NumbersFit reports that every number in b (a valid JSON body) is one a
// float64 holds: on 2026-07-28 go-sdk decodes a call's params into Go
// values to check its headers, and refuses the whole request when a
// number overflows (-32020), so a lean path leaves such a body to it.
// Only a number with an exponent or over 300 digits can overflow.
func NumbersFit(b []byte) bool {
	start, exp := -1, false
	fits := func(end int) bool {
		if start < 0 || (!exp && end-start <= 300) {
			return true
		}
		_, err := strconv.ParseFloat(string(b[start:end]), 64)
		return err == nil
	}
	for i, c := range outsideStrings(b) {
		switch {
		case start < 0 && (c == '-' || c >= '0' && c <= '9'):
			start, exp = i, false
		case start >= 0 && strings.IndexByte("+-.0123456789eE", c) >= 0:
			exp = exp || c == 'e' || c == 'E'
		case start >= 0:
			if !fits(i) {
				return false
			}
			start = -1
		}
	}
	return fits(len(b))
}

// outsideStrings yields the bytes of JSON text b that are not inside a
// string (nor its quotes), with their offsets.
func outsideStrings(b []byte) iter.Seq2[int, byte] {
	return func(yield func(int, byte) bool) {
		inString, escaped := false, false
		for i, c := range b {
			switch {
			case !inString:
				if c == '"' {
					inString = true
				} else if !yield(i, c) {
					return
				}
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		}
	}
}

func parseError(b []byte, err error) *RPCError {
	if !segjson.Valid(b) {
		return bodyError(CodeParseError, "Parse error: the body must be exactly one JSON value: "+err.Error())
	}
	return bodyError(CodeInvalidRequest, "Invalid Request: "+err.Error())
}

// routeRaw is the params field the method's row names (nil for a method
// without one: RawString(nil) is "").
func routeRaw(row *methods.Method, p *RawParams) json.RawMessage {
	switch row.Named {
	case "name":
		return p.Name
	case "uri":
		return p.URI
	case "taskId":
		return p.TaskID
	}
	return nil
}

func parseMessage(b []byte) (*Message, error) {
	var w wireMessage
	if err := unmarshalStrict(b, &w); err != nil {
		return nil, parseError(b, err)
	}
	m := &Message{ID: w.ID, Call: len(w.ID) > 0 && string(w.ID) != "null", jsonrpc: w.JSONRPC}
	if w.Method == nil {
		return m, nil // a response (or invalid): nothing is executed for it
	}
	m.readRequest(*w.Method, w.Params)
	return m, nil
}

// readRequest fills in what every layer reads from a request: its method
// row and, from its params, the route name, _meta's version and
// capabilities, and the dispatcher's typed params.
func (m *Message) readRequest(method string, raw json.RawMessage) {
	m.Method = method
	m.Row, _ = methods.Lookup(method)
	m.Req = &Request{ID: m.ID, Method: method, Params: raw}
	p := new(RawParams)
	if len(raw) == 0 || unmarshalStrict(raw, p) != nil {
		return
	}
	m.params = p
	m.Name, _ = RawString(routeRaw(m.Row, p))
	var meta wireMeta
	metaOK := len(p.Meta) == 0 || string(p.Meta) == "null" || (p.Meta[0] == '{' && unmarshalStrict(p.Meta, &meta) == nil)
	if metaOK {
		m.Version, _ = RawString(meta.ProtocolVersion)
		m.HasCaps = len(meta.ClientCapabilities) > 0 && meta.ClientCapabilities[0] == '{'
	}
	if m.Row.Engine == methods.Tasks && metaOK && !repeatsObjectKey(raw) {
		// tasks/* and listen: the dispatcher's typed params, built from
		// the same pass. Anything that would not decode as the
		// dispatcher's own parse does is left to that parse (and its
		// error).
		m.Req.typed = typedParams(p, &meta)
	}
}

// ParseRequest is ParseBody for a message a transport other than HTTP
// already decoded (stdio's): the message as every layer reads it, parsed
// once and kept in req.Extra for the layers after the first (go-sdk's
// server reads only an *mcp.RequestExtra there, which stdio has none of).
func ParseRequest(req *jsonrpc.Request) *Message {
	if m, ok := req.Extra.(*Message); ok {
		return m
	}
	edgecount.Admissions.Add(1)
	edgecount.Parses.Add(1)
	id, _ := json.Marshal(req.ID.Raw())
	m := &Message{ID: id, Call: req.IsCall(), jsonrpc: "2.0"}
	m.readRequest(req.Method, req.Params)
	req.Extra = m
	return m
}

// Dispatched reports a message the dispatcher serves rather than go-sdk:
// a call of tasks/get, tasks/update or tasks/cancel, or a
// subscriptions/listen call that names taskIds.
func (m *Message) Dispatched() bool {
	if m.Req == nil || !m.Call {
		return false
	}
	return m.Row.Task() || m.Method == methodListen && m.taskIDs() != nil
}

// ListenIDs is the number of task ids a subscriptions/listen asks for (0
// when its params do not decode: the dispatcher then refuses it).
func (m *Message) ListenIDs() int { return len(m.taskIDs()) }

// taskIDs is params.notifications.taskIds as the dispatcher decodes them.
func (m *Message) taskIDs() []string {
	if m.Req == nil {
		return nil
	}
	if p := m.Req.decoded(); p != nil && p.Notifications != nil {
		return p.Notifications.TaskIDs
	}
	return nil
}

// objectKeys are the keys of params whose values the dispatcher decodes
// into structs or maps: where one repeats, the strict decode merges the
// objects, while the raw fields keep only the last.
var objectKeys = [][]byte{[]byte(`"_meta"`), []byte(`"notifications"`), []byte(`"inputResponses"`),
	[]byte(`"` + MetaClientCapabilities + `"`), []byte(`"extensions"`)}

// repeatsObjectKey reports raw params in which one of objectKeys occurs
// twice (or a string holds it: the typed params are then left to the
// dispatcher's own decode, which is only slower).
func repeatsObjectKey(raw []byte) bool {
	for _, k := range objectKeys {
		if i := bytes.Index(raw, k); i >= 0 && bytes.Contains(raw[i+len(k):], k) {
			return true
		}
	}
	return false
}

// typedParams is unmarshalStrict(params, &params{}) from the fields one
// pass read, or nil when that decode could fail or read more.
func typedParams(p *RawParams, meta *wireMeta) *params {
	tp := &params{TaskID: p.TaskID}
	if len(p.Meta) > 0 && string(p.Meta) != "null" {
		tp.Meta = new(paramsMeta)
		if !decodeRaw(meta.ProtocolVersion, &tp.Meta.ProtocolVersion) || !decodeRaw(meta.ClientCapabilities, &tp.Meta.ClientCapabilities) {
			return nil
		}
	}
	if !decodeRaw(p.Notifications, &tp.Notifications) || !decodeRaw(p.InputResponses, &tp.InputResponses) {
		return nil
	}
	return tp
}

// decodeRaw decodes a field one pass kept raw (absent: left as it is) as
// the strict decode of the whole params would.
func decodeRaw(raw json.RawMessage, v any) bool {
	return len(raw) == 0 || unmarshalStrict(raw, v) == nil
}

// Messages returns the body's messages: the batch's, or the one.
func (e *Envelope) Messages() []Message {
	if e.IsBatch {
		return e.Batch
	}
	return unsafe.Slice(&e.Message, 1) // no copy: the one message is e.Message
}

// readBody reads the whole body, at most maxBody bytes. A small declared
// length (a poll's) is read into a buffer of that size: net/http ends the
// body there, and reports a shorter one as an error. Any other body is
// read, and refused over the cap, by the MaxBytesReader, growing as bytes
// arrive: a large declared length alone never makes darkroom allocate.
// exactReadMax bounds what readBody allocates before the bytes arrive:
// enough for the largest listen (1,000 task ids, about 45 KB), read
// without growing a buffer; the caller is authenticated, and its
// connection's read timeout bounds how long it may hold it.
const exactReadMax = 64 << 10

func readBody(w http.ResponseWriter, r *http.Request, maxBody int64) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= min(maxBody, exactReadMax) {
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
}

// Admit is the door of the MCP endpoint below any caller-specific work:
// for a POST it reads and parses the whole body (at most maxBody bytes),
// leaves the envelope in the returned request's context, restores the
// body for the next handler, and answers, with
// nothing executed, a body over the cap (413), one that is not a JSON-RPC
// message (-32700 or -32600), and a 2026-07-28 request whose required
// headers are missing or disagree with its body (-32020). It reports
// false when it answered. It runs once a request (server's admit, or
// Middleware's when nothing admitted it before); every later layer reads
// the envelope it leaves in the context (Admitted). The Host was checked
// before it (HostAllowed, server's checkOrigin).
func Admit(w http.ResponseWriter, r *http.Request, maxBody int64) (*Envelope, *http.Request, bool) {
	edgecount.Admissions.Add(1)
	body, err := readBody(w, r, maxBody)
	_ = r.Body.Close()
	r.Body = http.NoBody
	var e *Envelope
	if err == nil {
		e, err = ParseBody(body)
	}
	if err != nil { // a body that fails is never handed on
		writeBodyError(w, err)
		return nil, r, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r = r.WithContext(context.WithValue(r.Context(), envelopeKey{}, e))
	for _, m := range e.Messages() {
		if re := checkEnvelopeHeaders(r.Header, &m, e.IsBatch); re != nil {
			WriteError(w, m.ID, re)
			return nil, r, false
		}
	}
	e.admitted = true
	return e, r, true
}

// Admitted returns the envelope Admit accepted for the request of ctx.
func Admitted(ctx context.Context) (*Envelope, bool) {
	e, ok := EnvelopeFrom(ctx)
	return e, ok && e.admitted
}

// HostAllowed is go-sdk's DNS-rebinding guard: on a loopback listener the
// Host must be loopback too. It runs once a request, at the door
// (server's checkOrigin; go-sdk's own is turned off behind it).
func HostAllowed(r *http.Request) bool {
	edgecount.HostChecks.Add(1)
	switch la := r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr: // the usual listener, read without formatting it
		return la == nil || !la.IP.IsLoopback() || netx.Loopback(r.Host)
	case interface{ String() string }:
		return la == nil || !netx.Loopback(la.String()) || netx.Loopback(r.Host)
	}
	return true
}

// checkEnvelopeHeaders refuses, before any work, a request whose headers
// are required and missing or differ from its body: a request carrying
// _meta protocolVersion needs an equal MCP-Protocol-Version header, and on
// 2026-07-28 every request needs Mcp-Method equal to its method and, for
// the named methods, Mcp-Name equal to the name. A 2026-07-28 call without
// the required _meta is -32602 first (the spec's order). Batches carry no
// such headers (go-sdk refuses them on these versions anyway).
func checkEnvelopeHeaders(h http.Header, m *Message, batch bool) *RPCError {
	if m.Req == nil {
		return nil
	}
	hv := h.Get("Mcp-Protocol-Version")
	modern := hv >= TasksVersion
	if m.Call && modern && (m.Version == "" || !m.HasCaps) {
		return missingMeta()
	}
	if m.Version != "" && hv != m.Version {
		return headerMismatch(fmt.Sprintf("MCP-Protocol-Version %q does not match _meta protocolVersion %q", hv, m.Version))
	}
	if !modern || batch {
		return nil
	}
	if v := decodeHeader(h.Get("Mcp-Method")); v != m.Method {
		return headerMismatch(fmt.Sprintf("Mcp-Method %q does not match method %q", v, m.Method))
	}
	if m.Row.Named != "" {
		if v := decodeHeader(h.Get("Mcp-Name")); v != m.Name || v == "" {
			return headerMismatch(fmt.Sprintf("Mcp-Name %q does not match the name in the body", v))
		}
	}
	return nil
}

// writeBodyError answers a request whose body could not be read or parsed.
func writeBodyError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	var re *RPCError
	switch {
	case errors.As(err, &mbe):
		http.Error(w, fmt.Sprintf("request body too large (over %d bytes)", mbe.Limit), http.StatusRequestEntityTooLarge)
	case errors.As(err, &re):
		WriteError(w, nil, re)
	default:
		w.Header().Set("Connection", "close")
		http.Error(w, "request body could not be read: "+err.Error(), http.StatusBadRequest)
	}
}
