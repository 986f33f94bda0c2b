// Package envelope is the one parse of a JSON-RPC message on the MCP
// endpoint (a POST body, or a message another transport decoded) and the
// framing of the answers to it: what every layer after the door reads
// (the method's row, the route name, _meta's version, the raw params) and
// writes (WriteFramed, WriteError, the Outcome a recorder is told). It
// knows no method's semantics beyond the row internal/methods gives it:
// the Tasks dispatcher builds its typed params from the raw fields kept
// here (tasks), and the door that reads a request's body is server/edge's.
package envelope

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	segjson "github.com/segmentio/encoding/json"

	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/internal/methods"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Envelope is the routing view of one JSON-RPC POST body, parsed once by
// the door (server/edge's Admit) from the whole body and shared by every layer after it: what a
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
	// Admitted is set once the door accepted the request (its header
	// checks passed).
	Admitted bool
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
	// Request reports a message with a method: a request or a
	// notification, not a response.
	Request bool
	// Params is the params member as sent (nil when absent); Fields are
	// its members the layers read, raw (nil when params are not an
	// object); Meta is _meta's members, raw, and MetaOK reports a _meta
	// that is absent, null or an object that decodes. The dispatcher
	// builds its typed params from them (tasks).
	Params json.RawMessage
	Fields *RawParams
	Meta   Meta
	MetaOK bool
	// Dispatch is the dispatcher's request for this message, made by
	// tasks on first use and kept here so that its params decode once.
	Dispatch any
	// JSONRPC is the message's jsonrpc member as sent.
	JSONRPC string
}

type envelopeKey struct{}

// NewContext returns ctx carrying e, for every layer after the door.
func NewContext(ctx context.Context, e *Envelope) context.Context {
	return context.WithValue(ctx, envelopeKey{}, e)
}

// From returns the envelope the door stored in ctx.
func From(ctx context.Context) (*Envelope, bool) {
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

// Unmarshal decodes exactly one JSON value from b into v, with
// go-sdk's field matching; anything but whitespace after the value is an
// error (go-sdk's own decoder would silently drop it). What it decodes may
// alias b: a request's body (or stdio message) is read once, kept whole
// and never modified.
func Unmarshal(b []byte, v any) error {
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

// Meta is params._meta's members, raw.
type Meta struct {
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
	if len(raw) == 0 || Unmarshal(raw, &s) != nil {
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
		if err := Unmarshal(b, &raw); err != nil {
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
	if err := Unmarshal(b, &w); err != nil {
		return nil, parseError(b, err)
	}
	m := &Message{ID: w.ID, Call: len(w.ID) > 0 && string(w.ID) != "null", JSONRPC: w.JSONRPC}
	if w.Method == nil {
		return m, nil // a response (or invalid): nothing is executed for it
	}
	m.readRequest(*w.Method, w.Params)
	return m, nil
}

// readRequest fills in what every layer reads from a request: its method
// row and, from its params, the route name, _meta's version and
// capabilities, and the raw fields the dispatcher's typed params are
// built from.
func (m *Message) readRequest(method string, raw json.RawMessage) {
	m.Method, m.Request, m.Params = method, true, raw
	m.Row, _ = methods.Lookup(method)
	p := new(RawParams)
	if len(raw) == 0 || Unmarshal(raw, p) != nil {
		return
	}
	m.Fields = p
	m.Name, _ = RawString(routeRaw(m.Row, p))
	m.MetaOK = len(p.Meta) == 0 || string(p.Meta) == "null" || (p.Meta[0] == '{' && Unmarshal(p.Meta, &m.Meta) == nil)
	if m.MetaOK {
		m.Version, _ = RawString(m.Meta.ProtocolVersion)
		m.HasCaps = len(m.Meta.ClientCapabilities) > 0 && m.Meta.ClientCapabilities[0] == '{'
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
	m := &Message{ID: id, Call: req.IsCall(), JSONRPC: "2.0"}
	m.readRequest(req.Method, req.Params)
	req.Extra = m
	return m
}

// Messages returns the body's messages: the batch's, or the one.
func (e *Envelope) Messages() []Message {
	if e.IsBatch {
		return e.Batch
	}
	return unsafe.Slice(&e.Message, 1) // no copy: the one message is e.Message
}
