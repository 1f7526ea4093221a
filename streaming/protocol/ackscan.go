package protocol

// scanAck reads an ack in the plain form clients write it in,
// {"type":"ack","stream":"name","batch":12} with an optional "upToSeq",
// members in any order, without decoding it through encoding/json: acks
// are the bulk of what clients send, one per batch. It accepts only what
// encoding/json reads to the same Command (FuzzDecodeCommand holds the two
// together): exact lower-case member names, each once; strings of
// printable ASCII without escapes; integers of at most 18 digits without a
// sign or leading zeros. Anything else gives false, and the frame takes the
// encoding/json path.
func scanAck(data []byte) (Command, bool) {
	s := ackScanner{b: data}
	var c Command
	var seen [4]bool
	if !s.byte('{') {
		return c, false
	}
	for first := true; ; first = false {
		if s.byte('}') {
			return c, !first && s.end() && seen[0] && c.Type == TypeAck
		}
		if !first && !s.byte(',') {
			return c, false
		}
		key, ok := s.str()
		if !ok || !s.byte(':') {
			return c, false
		}
		var k int
		switch key {
		case "type":
			c.Type, ok = s.str()
		case "stream":
			k = 1
			c.Stream, ok = s.str()
		case "batch":
			k = 2
			c.Batch, ok = s.int()
		case "upToSeq":
			k = 3
			c.UpToSeq, ok = s.int()
		default:
			return c, false
		}
		if !ok || seen[k] {
			return c, false
		}
		seen[k] = true
	}
}

// ackScanner reads JSON tokens of the plain form scanAck accepts.
type ackScanner struct {
	b []byte
	i int
}

func (s *ackScanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// byte reads c after any white space.
func (s *ackScanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *ackScanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// str reads a string of printable ASCII without escapes.
func (s *ackScanner) str() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			return v, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", false
		}
	}
	return "", false
}

// int reads a non-negative integer of at most 18 digits, without leading
// zeros (so that it fits an int64 and is valid JSON).
func (s *ackScanner) int() (int64, bool) {
	s.space()
	start := s.i
	var v int64
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		v = v*10 + int64(s.b[s.i]-'0')
	}
	n := s.i - start
	if n == 0 || n > 18 || n > 1 && s.b[start] == '0' {
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	return v, true
}
