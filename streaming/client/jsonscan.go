package client

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// scanner reads JSON from a byte slice in one pass, validating what it
// reads, for the frame decoder: it decodes the few fields the client acts
// on and steps over everything else (a record's payload, fields it does
// not know) without decoding it, checking only that it is well-formed JSON
// and finding where it ends.
type scanner struct {
	b []byte
	i int
	// stack holds the containers open in a value being skipped (true
	// for an object), reused from value to value.
	stack []bool
}

// maxDepth bounds the nesting of arrays and objects, as encoding/json does.
const maxDepth = 10000

// syntaxError is an undecodable frame: what is wrong, and where. A
// mismatch is well-formed JSON with a value of another type than the
// field's (or out of its range); otherwise the frame is not JSON.
type syntaxError struct {
	off      int
	msg      string
	mismatch bool
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.off) }

func (s *scanner) errorf(format string, args ...any) error {
	return &syntaxError{off: s.i, msg: fmt.Sprintf(format, args...)}
}

// want is a mismatch: the next value is not what the field takes.
func (s *scanner) want(what string) error {
	return &syntaxError{off: s.i, msg: fmt.Sprintf("want %s, got %s", what, s.describe()), mismatch: true}
}

// ws skips whitespace.
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

// peek returns the next byte after whitespace (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// describe names the value starting at the next byte, for errors.
func (s *scanner) describe() string {
	switch c := s.peek(); {
	case c == 0:
		return "the end of the frame"
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	default:
		return strconv.QuoteRune(rune(c))
	}
}

// null consumes a null if one is next.
func (s *scanner) null() (bool, error) {
	if s.peek() != 'n' {
		return false, nil
	}
	return true, s.literal("null")
}

func (s *scanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.errorf("invalid literal")
	}
	s.i += len(lit)
	return nil
}

// object reads an object, calling field for each key with the scanner at
// its value, which field must consume.
func (s *scanner) object(field func(key []byte) error) error {
	if s.peek() != '{' {
		return s.want("an object")
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.errorf("want a key, got %s", s.describe())
		}
		key, escaped, err := s.stringBytes()
		if err != nil {
			return err
		}
		if escaped {
			// A key with escapes is not one the decoder looks for; its
			// value is stepped over.
			key = nil
		}
		if s.peek() != ':' {
			return s.errorf("want ':' after a key")
		}
		s.i++
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errorf("want ',' or '}' in an object, got %s", s.describe())
		}
	}
}

// array reads an array, calling elem with the scanner at each element,
// which elem must consume.
func (s *scanner) array(elem func(i int) error) error {
	if s.peek() != '[' {
		return s.want("an array")
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for n := 0; ; n++ {
		if err := elem(n); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.errorf("want ',' or ']' in an array, got %s", s.describe())
		}
	}
}

// stringClass marks the bytes that end the fast scan of a string's
// contents: the closing quote, a backslash, control characters and bytes
// beyond ASCII (which the decoded string may need to repair).
var stringClass = func() (t [256]byte) {
	for c := range 256 {
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			t[c] = 1
		}
	}
	return t
}()

// stringBytes reads a string and returns its contents as they are in the
// frame (without the quotes), and whether they hold escapes or bytes
// beyond ASCII, which str decodes.
func (s *scanner) stringBytes() (raw []byte, special bool, err error) {
	s.i++ // the opening quote
	start := s.i
	for {
		for s.i < len(s.b) && stringClass[s.b[s.i]] == 0 {
			s.i++
		}
		if s.i >= len(s.b) {
			return nil, false, s.errorf("unterminated string")
		}
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], special, nil
		case c == '\\':
			special = true
			if err := s.escape(); err != nil {
				return nil, false, err
			}
		case c < 0x20:
			return nil, false, s.errorf("control character %#x in a string", c)
		default:
			special = true
			s.i++
		}
	}
}

// escape steps over an escape sequence, checking it.
func (s *scanner) escape() error {
	if s.i+1 >= len(s.b) {
		return s.errorf("unterminated string")
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return nil
	case 'u':
		if len(s.b)-s.i < 6 {
			return s.errorf("unterminated string")
		}
		for _, c := range s.b[s.i+2 : s.i+6] {
			if !isHex(c) {
				return s.errorf("invalid \\u escape")
			}
		}
		s.i += 6
		return nil
	}
	return s.errorf("invalid escape \\%c", s.b[s.i+1])
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// str reads a string value.
func (s *scanner) str() (string, error) {
	if s.peek() != '"' {
		return "", s.want("a string")
	}
	start := s.i
	raw, special, err := s.stringBytes()
	if err != nil {
		return "", err
	}
	if !special {
		return string(raw), nil
	}
	if !hasEscape(raw) && utf8.Valid(raw) {
		return string(raw), nil
	}
	// Escapes or invalid UTF-8: decoded as encoding/json does (invalid
	// bytes become U+FFFD); rare in the frames the client reads.
	var v string
	if err := json.Unmarshal(s.b[start:s.i], &v); err != nil {
		return "", &syntaxError{off: start, msg: err.Error()}
	}
	return v, nil
}

func hasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// boolean reads true or false.
func (s *scanner) boolean() (bool, error) {
	switch s.peek() {
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	}
	return false, s.want("a boolean")
}

// number steps over a number, checking its grammar, and returns its text.
func (s *scanner) number() ([]byte, error) {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return nil, s.errorf("invalid number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return nil, s.errorf("invalid number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return nil, s.errorf("invalid number")
		}
	}
	return s.b[start:s.i], nil
}

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// int reads an integer that fits in bits bits (signed), as encoding/json
// reads one into an intN: a fraction or an exponent is an error.
func (s *scanner) int(bits int) (int64, error) {
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		return 0, s.want("an integer")
	}
	start := s.i
	text, err := s.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(string(text), 10, bits)
	if err != nil {
		return 0, &syntaxError{off: start, msg: fmt.Sprintf("want an integer of %d bits, got %s", bits, text), mismatch: true}
	}
	return v, nil
}

// uint reads an unsigned integer of 64 bits.
func (s *scanner) uint() (uint64, error) {
	c := s.peek()
	if c < '0' || c > '9' {
		return 0, s.want("an unsigned integer")
	}
	start := s.i
	text, err := s.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(string(text), 10, 64)
	if err != nil {
		return 0, &syntaxError{off: start, msg: fmt.Sprintf("want an unsigned integer of 64 bits, got %s", text), mismatch: true}
	}
	return v, nil
}

// skip steps over any value, checking that it is well-formed, and returns
// its bytes as they are in the frame (their capacity cut at their end).
func (s *scanner) skip() ([]byte, error) {
	s.ws()
	start := s.i
	if end, ok := skipWellFormed(s.b, s.i); ok {
		s.i = end
		return s.b[start:s.i:s.i], nil
	}
	if err := s.skipValue(); err != nil {
		return nil, err
	}
	return s.b[start:s.i:s.i], nil
}

// skipValue steps over a value in one loop, with the containers it is in
// on a stack, checking it and saying what is wrong where (skip's way when
// skipWellFormed gives up).
func (s *scanner) skipValue() error {
	s.stack = s.stack[:0]
	for {
		opened, err := s.skipScalarOrOpen()
		if err != nil {
			return err
		}
		if opened {
			continue // to the container's first value
		}
		// After a value: close the containers that end here, or go on to
		// the next element of the innermost.
	next:
		for {
			if len(s.stack) == 0 {
				return nil
			}
			obj := s.stack[len(s.stack)-1]
			switch c := s.peek(); {
			case c == ',':
				s.i++
				if obj {
					if err := s.key(); err != nil {
						return err
					}
				}
				break next
			case obj && c == '}' || !obj && c == ']':
				s.i++
				s.stack = s.stack[:len(s.stack)-1]
			case obj:
				return s.errorf("want ',' or '}' in an object, got %s", s.describe())
			default:
				return s.errorf("want ',' or ']' in an array, got %s", s.describe())
			}
		}
	}
}

// skipScalarOrOpen steps over a scalar, or an empty array or object, or
// opens a container, pushing it on s.stack, and reads up to its first
// value; it reports whether it opened one.
func (s *scanner) skipScalarOrOpen() (bool, error) {
	switch c := s.peek(); {
	case c == '"':
		_, _, err := s.stringBytes()
		return false, err
	case c == '{' || c == '[':
		if len(s.stack) >= maxDepth {
			return false, s.errorf("nested deeper than %d", maxDepth)
		}
		s.i++
		obj := c == '{'
		if e := s.peek(); obj && e == '}' || !obj && e == ']' {
			s.i++
			return false, nil
		}
		s.stack = append(s.stack, obj)
		if obj {
			return true, s.key()
		}
		return true, nil
	case c == 't':
		return false, s.literal("true")
	case c == 'f':
		return false, s.literal("false")
	case c == 'n':
		return false, s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		_, err := s.number()
		return false, err
	case c == 0:
		return false, s.errorf("unexpected end of the frame")
	default:
		return false, s.errorf("invalid character %q looking for a value", c)
	}
}

// key reads an object's key and its colon, in a value being skipped.
func (s *scanner) key() error {
	if s.peek() != '"' {
		return s.errorf("want a key, got %s", s.describe())
	}
	if _, _, err := s.stringBytes(); err != nil {
		return err
	}
	if s.peek() != ':' {
		return s.errorf("want ':' after a key")
	}
	s.i++
	return nil
}
