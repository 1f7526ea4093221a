package marlowe

import (
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Names (token names, role names, choice names and value names) are byte
// strings on chain but text in the core JSON format. The Haskell encoder
// fails on a name that is not valid UTF-8; this package shows every name,
// losslessly, with the escape plutus-ledger-api uses for token names:
//
//   - a name that is valid UTF-8 and does not start with U+0000 is its text;
//   - a name that is not valid UTF-8 is U+0000, "0x", then the lowercase hex of
//     its bytes: the bytes ff 00 become "\u00000xff00";
//   - a valid UTF-8 name that starts with U+0000 gets two more U+0000 in front:
//     "\u0000abc" becomes "\u0000\u0000\u0000abc".
//
// Reading reverses this: a text starting with U+0000 "0x" is hex, a text
// starting with three U+0000 loses two of them, and any other text is its
// UTF-8 bytes. Ordinary names, which never start with U+0000, read and write
// exactly as in the Haskell tools.

const nul = "\x00"

// NameText returns the JSON text of a name.
func NameText(name []byte) string {
	if !utf8.Valid(name) {
		return nul + "0x" + hex.EncodeToString(name)
	}
	s := string(name)
	if strings.HasPrefix(s, nul) {
		return nul + nul + s
	}
	return s
}

// NameFromText reads a name from its JSON text.
func NameFromText(s string) ([]byte, error) {
	switch {
	case strings.HasPrefix(s, nul+"0x"):
		b, err := hex.DecodeString(s[3:])
		if err != nil {
			return nil, fmt.Errorf("escaped name %q: bad hex: %w", s, err)
		}
		return b, nil
	case strings.HasPrefix(s, nul+nul+nul):
		return []byte(s[2:]), nil
	case strings.HasPrefix(s, nul):
		return nil, fmt.Errorf("name %q starts with U+0000 but is neither \\u00000x<hex> nor \\u0000\\u0000\\u0000<text>", s)
	}
	return []byte(s), nil
}
