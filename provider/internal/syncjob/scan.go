package syncjob

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Scanner walks a JSON reply as it arrives and hands out the string
// values of chosen keys as readers, so a multi-megabyte base64 image is
// decoded on its way to the spool and never held whole (neither the
// reply nor the decoded file). Small values of other chosen keys (error
// messages, finish reasons, a "done": true, a flat list of reasons) are
// kept whole in Small, as text.
//
// It is a lexical scanner, not a validator: a key is any string followed
// by ':', at any depth. That suffices for the vendors' replies, whose
// streamed keys (b64_json, bytesBase64Encoded, data) only ever hold files.
type Scanner struct {
	r       *bufio.Reader
	stream  map[string]bool
	capture map[string]bool
	pending *valueReader
	// Small holds the captured values, by key, in order of appearance.
	Small map[string][]string
}

// maxSmall bounds a captured value; longer ones are cut. maxValues bounds
// the values kept per key; later ones are read past, not kept.
const (
	maxSmall  = 4096
	maxValues = 8
)

// NewScanner scans r; stream are the keys whose values Next hands out,
// capture those kept in Small.
func NewScanner(r io.Reader, stream, capture []string) *Scanner {
	s := &Scanner{r: bufio.NewReaderSize(r, 64<<10), stream: set(stream), capture: set(capture), Small: map[string][]string{}}
	return s
}

func set(keys []string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// Next returns the next streamed value: its key and a reader of its raw
// characters (base64 text, escapes removed), valid until the next call.
// It returns io.EOF at the end of the reply.
func (s *Scanner) Next() (string, io.Reader, error) {
	if s.pending != nil {
		if _, err := io.Copy(io.Discard, s.pending); err != nil {
			return "", nil, err
		}
		s.pending = nil
	}
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return "", nil, err
		}
		if c != '"' {
			continue
		}
		str, err := s.readString(256)
		if err != nil {
			return "", nil, err
		}
		if !s.colon() {
			continue // a value, not a key
		}
		key := str
		if !s.peekQuote() {
			if s.capture[key] {
				if err := s.captureOther(key); err != nil {
					return "", nil, err
				}
			}
			continue
		}
		switch {
		case s.stream[key]:
			s.r.ReadByte()
			s.pending = &valueReader{r: s.r}
			return key, s.pending, nil
		case s.capture[key]:
			s.r.ReadByte()
			limit := maxSmall
			if len(s.Small[key]) >= maxValues {
				limit = 0
			}
			v, err := s.readString(limit)
			if err != nil {
				return "", nil, err
			}
			s.keep(key, v)
		}
	}
}

// keep stores a captured value of key, within the bounds.
func (s *Scanner) keep(key, v string) {
	if len(s.Small[key]) < maxValues {
		s.Small[key] = append(s.Small[key], v)
	}
}

// captureOther captures a non-string value of a captured key: a literal
// (true, a number) as its text, or each string of a flat array of
// strings ("raiMediaFilteredReasons": ["..."]). Objects and nested
// arrays are left to the scan.
func (s *Scanner) captureOther(key string) error {
	b, err := s.r.Peek(1)
	if err != nil {
		return nil
	}
	if b[0] != '[' {
		var lit []byte
		for len(lit) < 64 {
			c, err := s.r.ReadByte()
			if err != nil {
				break
			}
			if !(c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				s.r.UnreadByte()
				break
			}
			lit = append(lit, c)
		}
		if len(lit) > 0 {
			s.keep(key, string(lit))
		}
		return nil
	}
	s.r.ReadByte()
	for {
		s.skipBlanks()
		c, err := s.r.ReadByte()
		switch {
		case err != nil:
			return errUnexpectedEnd(err)
		case c == ']':
			return nil
		case c == ',':
		case c == '"':
			v, err := s.readString(maxSmall)
			if err != nil {
				return err
			}
			s.keep(key, v)
		default:
			s.r.UnreadByte() // not a flat array of strings: let the scan go on
			return nil
		}
	}
}

// colon skips blanks and reports (consuming it) whether a ':' follows.
func (s *Scanner) colon() bool {
	s.skipBlanks()
	c, err := s.r.ReadByte()
	if err != nil {
		return false
	}
	if c == ':' {
		s.skipBlanks()
		return true
	}
	s.r.UnreadByte()
	return false
}

func (s *Scanner) peekQuote() bool {
	b, err := s.r.Peek(1)
	return err == nil && b[0] == '"'
}

func (s *Scanner) skipBlanks() {
	for {
		b, err := s.r.Peek(1)
		if err != nil || (b[0] != ' ' && b[0] != '\n' && b[0] != '\r' && b[0] != '\t') {
			return
		}
		s.r.ReadByte()
	}
}

// readString reads the rest of a JSON string (the opening quote is
// read), decoding escapes; past limit bytes the rest is skipped.
func (s *Scanner) readString(limit int) (string, error) {
	raw := []byte{'"'}
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return "", errUnexpectedEnd(err)
		}
		if c == '"' {
			break
		}
		keep := len(raw) < limit
		if keep {
			raw = append(raw, c)
		}
		if c == '\\' {
			e, err := s.r.ReadByte()
			if err != nil {
				return "", errUnexpectedEnd(err)
			}
			if keep {
				raw = append(raw, e)
			}
		}
	}
	if raw[len(raw)-1] == '\\' && (len(raw) < 2 || raw[len(raw)-2] != '\\') {
		raw = raw[:len(raw)-1] // a cut escape
	}
	raw = append(raw, '"')
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw[1 : len(raw)-1]), nil // a cut \u escape: keep it raw
	}
	return v, nil
}

func errUnexpectedEnd(err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("reply ended inside a string: %w", io.ErrUnexpectedEOF)
	}
	return err
}

// valueReader yields a streamed string's characters up to its closing
// quote. Base64 needs no escapes but JSON encoders may write "\/".
type valueReader struct {
	r    *bufio.Reader
	done bool
}

func (v *valueReader) Read(p []byte) (int, error) {
	if v.done {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) {
		// Copy the run up to the next quote or escape in one go.
		buf, err := v.r.Peek(max(min(v.r.Buffered(), len(p)-n), 1))
		if len(buf) == 0 {
			return n, errUnexpectedEnd(err)
		}
		if i := bytes.IndexAny(buf, `\"`); i != 0 {
			if i < 0 {
				i = len(buf)
			}
			n += copy(p[n:], buf[:i])
			v.r.Discard(i)
			continue
		}
		c, _ := v.r.ReadByte()
		if c == '"' {
			v.done = true
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		e, err := v.r.ReadByte() // after a backslash
		if err != nil {
			return n, errUnexpectedEnd(err)
		}
		if e == '/' {
			p[n] = '/'
			n++
		}
		// \n, \r and the like are line breaks base64 ignores.
		if v.r.Buffered() == 0 {
			return n, nil
		}
	}
	return n, nil
}
