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
	typed  params
	tmeta  struct {
		ProtocolVersion    *string     `json:"io.modelcontextprotocol/protocolVersion"`
		ClientCapabilities *clientCaps `json:"io.modelcontextprotocol/clientCapabilities"`
	}
	caps    clientCaps
	version string
}

// parseBodyOnePass is ParseBody's fast path; ok false means "not mine".
func parseBodyOnePass(b []byte) (*Envelope, bool) {
	s := scanner{b: b}
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' || !s.message() {
		return nil, false
	}
	if s.ws(); s.i != len(b) {
		return nil, false
	}
	op := &onePass{params: s.params}
	e := &op.env
	e.Body = b
	m := &e.Message
	m.ID = s.id
	m.Call = len(s.id) > 0 && string(s.id) != "null"
	m.jsonrpc = aliasString(s.jsonrpc)
	if s.hasMethod {
		m.Method = aliasString(s.method)
		op.req = Request{ID: s.id, Method: m.Method, Params: s.rawParams}
		m.Req = &op.req
		if p := s.rawParams; len(p) > 0 && (p[0] == '{' || string(p) == "null") {
			op.finishParams(m, &s)
		}
	}
	return e, true
}

// finishParams is parseMessage's work after its params decode, from the
// spans the scan recorded.
func (op *onePass) finishParams(m *Message, s *scanner) {
	p := &op.params
	m.params = p
	name := routeRaw(m.Method, p)
	metaOK := len(p.Meta) == 0 || string(p.Meta) == "null" || p.Meta[0] == '{'
	var version json.RawMessage
	if metaOK {
		version = s.meta.ProtocolVersion
		m.HasCaps = len(s.meta.ClientCapabilities) > 0 && s.meta.ClientCapabilities[0] == '{'
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
	if dispatcherMethod(m.Method) && metaOK && !repeatsObjectKey(s.rawParams) {
		m.Req.typed = op.typedParams(s, versionOK)
	}
}

// typedParams is typedParams(p, meta) from the scan; m.Version is
// rawString of the protocolVersion span (ok is its second result).
func (op *onePass) typedParams(s *scanner, versionOK bool) *params {
	p, meta := &op.params, &s.meta
	tp := &op.typed
	tp.TaskID = p.TaskID
	if !tp.decodeNotifications(p.Notifications) {
		return nil
	}
	if len(p.Meta) > 0 && string(p.Meta) != "null" {
		tp.Meta = &op.tmeta
		if v := meta.ProtocolVersion; len(v) > 0 && string(v) != "null" {
			if !versionOK {
				return nil // rawString fails (not a string)
			}
			op.version = op.env.Version
			tp.Meta.ProtocolVersion = &op.version
		}
		if c := meta.ClientCapabilities; len(c) > 0 && string(c) != "null" {
			if c[0] != '{' || s.capsBad {
				return nil // the struct decode refuses it
			}
			op.caps.Extensions.Tasks = s.capsTasks
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

// scanner walks one body; what it records of the fields is the last
// occurrence's (the last duplicate wins).
type scanner struct {
	b []byte
	i int

	jsonrpc, method []byte
	hasMethod       bool
	id, rawParams   json.RawMessage
	params          wireParams // of the last params object
	meta            wireMeta   // of the last _meta object
	capsTasks       json.RawMessage
	capsBad         bool // an extensions value the clientCaps decode refuses
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

// The walkers below read one object level each, as
//
//	more, ok := s.enter(depth)
//	for ; more; more, ok = s.next() {
//		k, start, ok := s.key() // s.i is at the value, at start
//		... consume the value ...
//	}
//	return ok

// message walks the message object.
func (s *scanner) message() bool {
	more, ok := s.enter(1)
	for ; more; more, ok = s.next() {
		k, start, kok := s.key()
		if !kok {
			return false
		}
		var vok bool
		switch string(k) {
		case "jsonrpc":
			s.jsonrpc, vok = s.plainString()
		case "method":
			s.method, vok = s.plainString()
			s.hasMethod = true
		case "id":
			vok = s.value(1)
			s.id = s.b[start:s.i]
		case "params":
			// Only the last params value is decoded: each starts afresh.
			s.params, s.meta, s.capsTasks, s.capsBad = wireParams{}, wireMeta{}, nil, false
			if s.b[s.i] == '{' {
				vok = s.paramsObject()
			} else {
				vok = s.value(1)
			}
			s.rawParams = s.b[start:s.i]
		default:
			vok = s.value(1)
		}
		if !vok {
			return false
		}
	}
	return ok
}

func (s *scanner) paramsObject() bool {
	p := &s.params
	more, ok := s.enter(2)
	for ; more; more, ok = s.next() {
		k, start, kok := s.key()
		if !kok {
			return false
		}
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
			dst = &p.Meta
			s.meta, s.capsTasks, s.capsBad = wireMeta{}, nil, false
			if s.b[s.i] == '{' {
				if !s.metaObject() {
					return false
				}
				*dst = s.b[start:s.i]
				continue
			}
		}
		if !s.value(2) {
			return false
		}
		if dst != nil {
			*dst = s.b[start:s.i]
		}
	}
	return ok
}

func (s *scanner) metaObject() bool {
	more, ok := s.enter(3)
	for ; more; more, ok = s.next() {
		k, start, kok := s.key()
		if !kok {
			return false
		}
		switch string(k) {
		case keyProtocolVersion:
			if !s.value(3) {
				return false
			}
			s.meta.ProtocolVersion = s.b[start:s.i]
		case keyClientCapabilities:
			s.capsTasks, s.capsBad = nil, false
			var vok bool
			if s.b[s.i] == '{' {
				vok = s.capsObject()
			} else {
				vok = s.value(3)
			}
			if !vok {
				return false
			}
			s.meta.ClientCapabilities = s.b[start:s.i]
		default:
			if !s.value(3) {
				return false
			}
		}
	}
	return ok
}

// capsObject reads clientCapabilities as the clientCaps decode does: every
// extensions object is merged into the same struct, null leaves it, any
// other value is a decode error.
func (s *scanner) capsObject() bool {
	more, ok := s.enter(4)
	for ; more; more, ok = s.next() {
		k, _, kok := s.key()
		if !kok {
			return false
		}
		var vok bool
		switch {
		case string(k) != "extensions" || s.b[s.i] == 'n':
			vok = s.value(4)
		case s.b[s.i] == '{':
			vok = s.extensionsObject()
		default:
			s.capsBad = true
			vok = s.value(4)
		}
		if !vok {
			return false
		}
	}
	return ok
}

func (s *scanner) extensionsObject() bool {
	more, ok := s.enter(5)
	for ; more; more, ok = s.next() {
		k, start, kok := s.key()
		if !kok || !s.value(5) {
			return false
		}
		if string(k) == keyTasksExtension {
			s.capsTasks = s.b[start:s.i]
		}
	}
	return ok
}

// enter consumes the '{' at s.i of an object at depth; more reports a
// member to read, ok false an invalid (or too deep) object.
func (s *scanner) enter(depth int) (more, ok bool) {
	if depth > maxScanDepth {
		return false, false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return false, true
	}
	return true, true
}

// key reads a member's key (without escapes) and its colon; s.i is then
// at the value, at start.
func (s *scanner) key() (k []byte, start int, ok bool) {
	if k, ok = s.plainString(); !ok {
		return nil, 0, false
	}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return nil, 0, false
	}
	s.i++
	s.ws()
	return k, s.i, s.i < len(s.b)
}

// next reads what follows a member's value: more after a ',', done after
// the closing '}'.
func (s *scanner) next() (more, ok bool) {
	s.ws()
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
			return true, true
		case '}':
			s.i++
			return false, true
		}
	}
	return false, false
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
		more, ok := s.enter(depth + 1)
		for ; more; more, ok = s.next() {
			if _, _, kok := s.key(); !kok || !s.value(depth+1) {
				return false
			}
		}
		return ok
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
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return esc, true
		case '\\':
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
		default: // a control byte, DEL or a byte of UTF-8
			return false, false
		}
	}
	return false, false
}

// plainByte is printable ASCII but '"' and '\\': a string's bytes that
// need no look.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
