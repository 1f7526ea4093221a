package client

import "encoding/binary"

// skipWellFormed steps over a well-formed value starting at b[i] and
// returns where it ends: one loop over the bytes, with the kinds of the
// containers open (up to 64 deep) in the bits of a word and no call per
// token, for the payloads that are most of a frame. It gives up (false) on
// anything else, an error or a deeper nesting, and skipValue then reads
// the value again from its start, for the error or the deep value. What
// it accepts is JSON, as skipValue checks it: the grammar of every token,
// the keys of objects, the nesting.
func skipWellFormed(b []byte, i int) (int, bool) {
	var objects uint64 // bit d: the container at depth d is an object
	depth := 0
	key := false // the next token is an object's key
	ok := true
	for {
		// A value, or a key.
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, false
		}
		c := b[i]
		if key && c != '"' {
			return 0, false
		}
		switch c {
		case '"':
			if i, ok = skipString(b, i+1); !ok {
				return 0, false
			}
			if key {
				i = skipSpace(b, i)
				if i >= len(b) || b[i] != ':' {
					return 0, false
				}
				i++
				key = false
				continue // to the value
			}
		case '{', '[':
			i++
			i = skipSpace(b, i)
			if i < len(b) && b[i] == c+2 { // '}' and ']' are '{' and '[' plus 2
				i++
				break
			}
			if depth == 64 {
				return 0, false
			}
			if c == '{' {
				objects |= 1 << depth
				key = true
			} else {
				objects &^= 1 << depth
			}
			depth++
			continue
		case 't':
			i, ok = skipLiteral(b, i, "true")
		case 'f':
			i, ok = skipLiteral(b, i, "false")
		case 'n':
			i, ok = skipLiteral(b, i, "null")
		default:
			i, ok = skipNumber(b, i)
		}
		if !ok {
			return 0, false
		}
		// After a value: close the containers that end here, or go on to
		// the next element (or key) of the innermost.
	after:
		for {
			if depth == 0 {
				return i, true
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, false
			}
			object := objects>>(depth-1)&1 == 1
			switch c := b[i]; {
			case c == ',':
				i++
				key = object
				break after
			case object && c == '}' || !object && c == ']':
				i++
				depth--
			default:
				return 0, false
			}
		}
	}
}

// skipString steps over the rest of a string whose opening quote is
// before b[i]: eight bytes at a time up to the word that holds the end,
// then byte by byte (hashes, addresses and names are tens of bytes).
func skipString(b []byte, i int) (int, bool) {
	for {
		for i+8 <= len(b) && !endsString(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && !stringEnds[b[i]] {
			i++
		}
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			var ok bool
			if i, ok = skipEscape(b, i); !ok {
				return 0, false
			}
		default:
			return 0, false // a control character
		}
	}
}

// skipSpace steps over whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && isSpace(b[i]) {
		i++
	}
	return i
}

// skipEscape steps over the escape sequence at b[i] (a backslash).
func skipEscape(b []byte, i int) (int, bool) {
	if i+1 >= len(b) {
		return 0, false
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, true
	case 'u':
		if len(b)-i < 6 || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
			return 0, false
		}
		return i + 6, true
	}
	return 0, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// stringEnds marks the bytes that stop the scan of a string in
// skipWellFormed: the closing quote, a backslash and control characters
// (bytes beyond ASCII are taken as they are, as encoding/json takes them).
var stringEnds = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// endsString reports whether one of the eight bytes of x is one that
// stops the scan of a string: a quote, a backslash or a byte below 0x20 (the
// bit tricks of "Determine if a word has a byte less than n": exact for
// whether there is one, whatever the bytes beyond ASCII).
func endsString(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs := x^(ones*'"'), x^(ones*'\\')
	return ((q-ones)&^q|(bs-ones)&^bs|(x-ones*0x20)&^x)&highs != 0
}

func skipLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// skipNumber steps over a number at b[i], checking its grammar.
func skipNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
