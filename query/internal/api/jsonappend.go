package api

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// The busiest answers (the contract lists of both APIs) are written by
// hand with these, byte for byte what encoding/json writes for the same
// values (each API's tests compare them), without reflection and without
// re-validating the stored JSON objects.

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, as encoding/json does with
// HTML escaping off.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = appendEscape(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendEscape escapes an ASCII control character, quote or backslash.
func appendEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// AppendOptString appends *s, or null.
func AppendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return AppendString(b, *s)
}

// AppendHex appends bytes as a JSON string of hex digits.
func AppendHex(b []byte, raw []byte) []byte {
	b = append(b, '"')
	b = hex.AppendEncode(b, raw)
	return append(b, '"')
}

// AppendRef appends an output reference as "TXID#INDEX".
func AppendRef(b []byte, r chain.TxOutRef) []byte {
	b = append(b, '"')
	b = hex.AppendEncode(b, r.TxID[:])
	b = append(b, '#')
	b = strconv.AppendUint(b, uint64(r.Index), 10)
	return append(b, '"')
}

// AppendBlock appends a block header as the native API shows it.
func AppendBlock(b []byte, h chain.BlockHeader) []byte {
	b = append(b, `{"slot":`...)
	b = strconv.AppendUint(b, h.Slot, 10)
	b = append(b, `,"blockNo":`...)
	b = strconv.AppendUint(b, h.BlockNo, 10)
	b = append(b, `,"hash":"`...)
	b = hex.AppendEncode(b, h.Hash[:])
	return append(b, `"}`...)
}

// AppendProgress appends a contract header's last fields, the same in both
// APIs: its seq, steps, last step's seq and last block (written by block,
// each API's block shape).
func AppendProgress(b []byte, seq int64, steps int, lastSeq int64, last chain.BlockHeader,
	block func([]byte, chain.BlockHeader) []byte) []byte {
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"steps":`...)
	b = strconv.AppendInt(b, int64(steps), 10)
	b = append(b, `,"lastSeq":`...)
	b = strconv.AppendInt(b, lastSeq, 10)
	b = append(b, `,"lastBlock":`...)
	return block(b, last)
}

// AppendRaw appends stored JSON (compact, as the projection wrote it), or
// def when there is none.
func AppendRaw(b []byte, raw json.RawMessage, def string) []byte {
	if len(raw) == 0 {
		return append(b, def...)
	}
	return append(b, raw...)
}
