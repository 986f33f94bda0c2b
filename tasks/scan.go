package tasks

import (
	"encoding/json"
	"strings"
	"unsafe"
)

// The one-pass body parse: a hand-written scanner walks a POST body once,
// validating it, and records the raw spans of the fields the layers read
// (message, params, _meta, clientCapabilities, extensions), with go-sdk's
// decoding semantics: case-sensitive keys, the last duplicate wins, raw
// values alias the body (which is never modified). It handles only a
// subset it can prove identical to parseBodyReference — printable ASCII,
// one object, keys without escapes, a plain-string method and jsonrpc,
// bounded depth, valid JSON — and answers "not mine" for everything else,
// so every error (and every odd body) comes from the reference.
// FuzzParseBodyOnePass holds the two to the same Envelope.

// maxScanDepth bounds the nesting the scanner walks (the message object is
// depth 1); deeper bodies go to the reference parse.
const maxScanDepth = 32

// Keys of _meta and clientCapabilities.extensions, as in wireMeta and
// clientCaps.
const (
	keyProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	keyClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	keyTasksExtension     = "io.modelcontextprotocol/tasks"
)

// onePass is everything a one-pass parse builds, allocated together.
type onePass struct {
	env    Envelope
	req    Request
	params wireParams
	meta   wireMeta
	typed  params
	tmeta  struct {
		ProtocolVersion    *string     `json:"io.modelcontextprotocol/protocolVersion"`
		ClientCapabilities *clientCaps `json:"io.modelcontextprotocol/clientCapabilities"`
	}
	caps clientCaps
	// What the scanner saw of the message and of the last
	// clientCapabilities value.
	jsonrpc, method []byte
	hasMethod       bool
	id, rawParams   json.RawMessage
	capsTasks       json.RawMessage
	capsBad         bool // an extensions value the clientCaps decode refuses
}

// parseBodyOnePass is ParseBody's fast path; ok false means "not mine".
func parseBodyOnePass(b []byte) (*Envelope, bool) {
	op := new(onePass)
	s := scanner{b: b}
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' || !s.message(op) {
		return nil, false
	}
	if s.ws(); s.i != len(b) {
		return nil, false
	}
	e := &op.env
	e.Body = b
	m := &e.Message
	m.ID = op.id
	m.Call = len(op.id) > 0 && string(op.id) != "null"
	m.jsonrpc = aliasString(op.jsonrpc)
	if op.hasMethod {
		m.Method = aliasString(op.method)
		op.req = Request{ID: op.id, Method: m.Method, Params: op.rawParams}
		m.Req = &op.req
		if p := op.rawParams; len(p) > 0 && (p[0] == '{' || string(p) == "null") {
			if !op.finishParams(m) {
				return nil, false
			}
		}
	}
	e.one[0] = *m
	return e, true
}

// finishParams is parseMessage's work after its params decode, from the
// spans the scan recorded; false sends the body to the reference.
func (op *onePass) finishParams(m *Message) bool {
	p := &op.params
	m.params = p
	name, _ := routeRaw(m.Method, p)
	metaOK := len(p.Meta) == 0 || string(p.Meta) == "null" || p.Meta[0] == '{'
	var version json.RawMessage
	if metaOK {
		version = op.meta.ProtocolVersion
		m.HasCaps = len(op.meta.ClientCapabilities) > 0 && op.meta.ClientCapabilities[0] == '{'
	}
	// Name and Version are copied (as rawString does), in one allocation.
	n, nok := plainContent(name)
	v, vok := plainContent(version)
	versionOK := true
	if nok && vok {
		var sb strings.Builder
		sb.Grow(len(n) + len(v))
		sb.Write(n)
		sb.Write(v)
		all := sb.String()
		m.Name, m.Version = all[:len(n)], all[len(n):]
	} else {
		m.Name, _ = rawString(name)
		m.Version, versionOK = rawString(version)
	}
	if isTaskMethod(m.Method) && metaOK {
		m.Req.typed = op.typedParams(m.Version, versionOK)
	}
	return true
}

// typedParams is typedParams(p, meta) from the scan: version is
// rawString of the protocolVersion span (as the reference computes it).
func (op *onePass) typedParams(version string, versionOK bool) *params {
	p, meta := &op.params, &op.meta
	if p.Notifications != nil {
		return nil
	}
	tp := &op.typed
	tp.TaskID = p.TaskID
	if len(p.Meta) > 0 && string(p.Meta) != "null" {
		tp.Meta = &op.tmeta
		if v := meta.ProtocolVersion; len(v) > 0 && string(v) != "null" {
			if v[0] != '"' || !versionOK {
				return nil // rawString fails
			}
			s := version
			tp.Meta.ProtocolVersion = &s
		}
		if c := meta.ClientCapabilities; len(c) > 0 && string(c) != "null" {
			if c[0] != '{' || op.capsBad {
				return nil // the struct decode refuses it
			}
			op.caps.Extensions.Tasks = op.capsTasks
			tp.Meta.ClientCapabilities = &op.caps
		}
	}
	if r := p.InputResponses; len(r) > 0 && string(r) != "null" {
		if unmarshalBody(r, &tp.InputResponses) != nil {
			return nil
		}
	}
	return tp
}

// routeRaw is the params field routeName reads for method.
func routeRaw(method string, p *wireParams) (json.RawMessage, bool) {
	switch method {
	case methodToolsCall, "prompts/get":
		return p.Name, true
	case "resources/read":
		return p.URI, true
	case methodGet, methodUpdate, methodCancel:
		return p.TaskID, true
	}
	return nil, false
}

// plainContent is the content of a JSON string without escapes (what
// rawString slices out without a decoder), or nil for an absent value;
// ok false means rawString must decide.
func plainContent(raw json.RawMessage) ([]byte, bool) {
	if len(raw) == 0 {
		return nil, true
	}
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false
	}
	c := raw[1 : len(raw)-1]
	for _, x := range c {
		if x == '\\' {
			return nil, false
		}
	}
	return c, true // the scanner admitted only printable ASCII
}

// aliasString is b as a string without a copy, as the reference's
// zero-copy decode gives it: the body is never modified.
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// message walks the message object at s.i.
func (s *scanner) message(op *onePass) bool {
	return s.object(1, func(k []byte, start int) bool {
		switch string(k) {
		case "jsonrpc":
			c, ok := s.plainString()
			op.jsonrpc = c
			return ok
		case "method":
			c, ok := s.plainString()
			op.method, op.hasMethod = c, true
			return ok
		case "id":
			if !s.value(1) {
				return false
			}
			op.id = s.b[start:s.i]
		case "params":
			// Only the last params value is decoded: each starts afresh.
			op.params, op.meta = wireParams{}, wireMeta{}
			op.capsTasks, op.capsBad = nil, false
			if !s.sub(2, op.paramsField) {
				return false
			}
			op.rawParams = s.b[start:s.i]
		default:
			return s.value(1)
		}
		return true
	})
}

func (op *onePass) paramsField(s *scanner, k []byte, start int) bool {
	p := &op.params
	var dst *json.RawMessage
	switch string(k) {
	case "name":
		dst = &p.Name
	case "uri":
		dst = &p.URI
	case "taskId":
		dst = &p.TaskID
	case "arguments":
		dst = &p.Arguments
	case "inputResponses":
		dst = &p.InputResponses
	case "requestState":
		dst = &p.RequestState
	case "notifications":
		dst = &p.Notifications
	case "_meta":
		op.meta = wireMeta{}
		op.capsTasks, op.capsBad = nil, false
		if !s.sub(3, op.metaField) {
			return false
		}
		p.Meta = s.b[start:s.i]
		return true
	default:
		return s.value(2)
	}
	if !s.value(2) {
		return false
	}
	*dst = s.b[start:s.i]
	return true
}

func (op *onePass) metaField(s *scanner, k []byte, start int) bool {
	switch string(k) {
	case keyProtocolVersion:
		if !s.value(3) {
			return false
		}
		op.meta.ProtocolVersion = s.b[start:s.i]
	case keyClientCapabilities:
		op.capsTasks, op.capsBad = nil, false
		if !s.sub(4, op.capsField) {
			return false
		}
		op.meta.ClientCapabilities = s.b[start:s.i]
	default:
		return s.value(3)
	}
	return true
}

// capsField reads clientCapabilities as the clientCaps decode does: every
// extensions object is merged into the same struct, null leaves it, any
// other value is a decode error.
func (op *onePass) capsField(s *scanner, k []byte, start int) bool {
	if string(k) != "extensions" {
		return s.value(4)
	}
	switch s.b[s.i] {
	case '{':
		return s.object(5, func(k []byte, start int) bool {
			if !s.value(5) {
				return false
			}
			if string(k) == keyTasksExtension {
				op.capsTasks = s.b[start:s.i]
			}
			return true
		})
	case 'n':
		return s.value(4)
	}
	op.capsBad = true
	return s.value(4)
}

// sub walks the value at s.i with field when it is an object (at depth),
// or skips it.
func (s *scanner) sub(depth int, field func(s *scanner, k []byte, start int) bool) bool {
	if s.b[s.i] != '{' {
		return s.value(depth - 1)
	}
	return s.object(depth, func(k []byte, start int) bool { return field(s, k, start) })
}

// object walks the object at s.i ('{'), at depth, calling field with each
// key and the value's offset (s.i is there too); field consumes the value.
func (s *scanner) object(depth int, field func(k []byte, start int) bool) bool {
	if depth > maxScanDepth {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		k, ok := s.plainString()
		if !ok {
			return false
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.ws()
		if s.i >= len(s.b) || !field(k, s.i) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// value skips one valid value at s.i inside a container at depth.
func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; c {
	case '"':
		_, ok := s.str()
		return ok
	case '{':
		return s.object(depth+1, func([]byte, int) bool { return s.value(depth + 1) })
	case '[':
		return s.array(depth + 1)
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.number()
}

func (s *scanner) array(depth int) bool {
	if depth > maxScanDepth {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// number scans the full JSON number grammar:
// -? (0 | [1-9][0-9]*) (\.[0-9]+)? ([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || !isDigit(b[i]) {
			return false
		}
		i = digits(b, i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return false
		}
		i = digits(b, i)
	}
	s.i = i
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// plainString scans the string at s.i and returns its content; it fails
// on anything but a string without escapes.
func (s *scanner) plainString() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	start := s.i
	esc, ok := s.str()
	if !ok || esc {
		return nil, false
	}
	return s.b[start+1 : s.i-1], true
}

// str scans the string at s.i ('"'), validating its escapes; any byte
// outside printable ASCII is "not mine".
func (s *scanner) str() (esc, ok bool) {
	b := s.b
	for i := s.i + 1; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return esc, true
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false, false
				}
				i += 6
			default:
				return false, false
			}
		case c < 0x20 || c >= 0x7f:
			return false, false
		default:
			i++
		}
	}
	return false, false
}

func isHex(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
